// Presigned attachment download URLs: `{public_url}/attachments/{id}/download?expires=<unix>&signature=<hex>`.
// The signature is HMAC-SHA256 over the attachment id and the expiry, keyed with a secret
// created once (data_dir/url-signing.key, mode 0600; on PostgreSQL a row every node shares), so
// URLs stay valid across restarts and nodes and never need an API key.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AppContext } from '../context.ts';
import { ensureSecret, writeFileExclusive } from './secrets.ts';
import type { Store } from './store.ts';

const SECRET_FILE = 'url-signing.key';

const loaded = new WeakMap<Store, Buffer>();

function parseSecret(text: string, where: string): Buffer {
  const secret = Buffer.from(text.trim(), 'hex');
  if (secret.length < 16) throw new Error(`${where} does not hold a usable signing secret`);
  return secret;
}

/**
 * The signing secret, never rotated implicitly. Embedded SQLite: data_dir/url-signing.key,
 * created on first use. PostgreSQL: the row every node shares, read at start (loadUrlSigningSecret).
 */
export function urlSigningSecret(ctx: AppContext): Buffer {
  const cached = loaded.get(ctx.store);
  if (cached) return cached;
  if (ctx.store.dialect === 'postgres') throw new Error('the URL signing secret is read at start (loadUrlSigningSecret)');
  const file = join(ctx.config.data_dir, SECRET_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    // Written to a temporary file, fsynced, linked into place and the directory fsynced: a
    // crash never leaves an empty key that would refuse every start. If another process (the
    // CLI) created it first, theirs is read instead.
    writeFileExclusive(file, randomBytes(32).toString('hex') + '\n');
    text = readFileSync(file, 'utf8');
  }
  const secret = parseSecret(text, file);
  loaded.set(ctx.store, secret);
  return secret;
}

/** Reads (or makes, first node wins) the shared signing secret of a PostgreSQL database. */
export async function loadUrlSigningSecret(ctx: AppContext): Promise<void> {
  const text = await ensureSecret(ctx.store, ctx.config.data_dir, SECRET_FILE, () => randomBytes(32).toString('hex') + '\n');
  loaded.set(ctx.store, parseSecret(text, `secret ${SECRET_FILE}`));
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

const derived = new WeakMap<AppContext, Map<string, Buffer>>();
/** A key of its own for one use (`label`), derived from the signing secret (never the URL key itself). */
export function derivedKey(ctx: AppContext, label: string): Buffer {
  let keys = derived.get(ctx);
  if (!keys) derived.set(ctx, (keys = new Map()));
  let key = keys.get(label);
  if (!key) keys.set(label, (key = createHmac('sha256', urlSigningSecret(ctx)).update(label).digest()));
  return key;
}

const BASE32 = '0123456789abcdefghijklmnopqrstuv';
/** `chars` base-32 characters ([0-9a-v]) of the HMAC of `text`: tokens that survive lowercasing MTAs. */
export function base32Mac(key: Buffer, text: string, chars: number): string {
  const mac = createHmac('sha256', key).update(text).digest();
  let out = '';
  for (let i = 0; i < chars; i++) out += BASE32[mac[i] & 31];
  return out;
}
