// Presigned attachment download URLs: `{public_url}/attachments/{id}/download?expires=<unix>&signature=<hex>`.
// The signature is HMAC-SHA256 over the attachment id and the expiry, keyed with a secret
// created once in data_dir (mode 0600), so URLs stay valid across restarts and never need an API key.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const SECRET_FILE = 'url-signing.key';
const secrets = new Map<string, Buffer>();

/** The signing secret of a data directory, created on first use (never rotated implicitly). */
export function urlSigningSecret(dataDir: string): Buffer {
  const cached = secrets.get(dataDir);
  if (cached) return cached;
  const file = join(dataDir, SECRET_FILE);
  let secret: Buffer;
  try {
    secret = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    mkdirSync(dataDir, { recursive: true });
    try {
      // 'wx': if another process (the CLI) created it first, read theirs instead.
      writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    secret = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  }
  if (secret.length < 16) throw new Error(`${file} does not hold a usable signing secret`);
  secrets.set(dataDir, secret);
  return secret;
}

/** Hex HMAC of "<id>\n<expires>": binding the id means one attachment's signature never opens another. */
export function signDownload(secret: Buffer, id: string, expires: number): string {
  return createHmac('sha256', secret).update(`${id}\n${expires}`).digest('hex');
}

export function downloadUrl(publicUrl: string, secret: Buffer, id: string, expires: number): string {
  const base = publicUrl.replace(/\/+$/, '');
  return `${base}/attachments/${encodeURIComponent(id)}/download?expires=${expires}&signature=${signDownload(secret, id, expires)}`;
}

/** Constant-time check of a presented signature. */
export function verifyDownload(secret: Buffer, id: string, expires: number, signature: string): boolean {
  if (!/^[0-9a-f]{64}$/i.test(signature)) return false;
  const expected = Buffer.from(signDownload(secret, id, expires), 'hex');
  return timingSafeEqual(expected, Buffer.from(signature, 'hex'));
}
