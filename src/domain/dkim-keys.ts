// DKIM keys: 2048-bit RSA pairs for custom domains (stored on the domain row) and for the
// shared domain (one JSON file under data_dir/dkim/, mode 0600, made once), the DKIM TXT
// value operators publish (RFC 6376 §3.6.1), and the key the outbound sender signs with.
import { generateKeyPair, generateKeyPairSync } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { eq } from 'drizzle-orm';
import type { AppContext } from '../context.ts';
import { domains } from '../db/schema.ts';
import { randomToken } from '../ids.ts';

const generateKeyPairAsync = promisify(generateKeyPair);

/** 2048 bits: the size RFC 8301 §3.2 requires verifiers to accept and signers to prefer. */
const MODULUS_BITS = 2048;

const KEY_OPTIONS = {
  modulusLength: MODULUS_BITS,
  publicKeyEncoding: { type: 'spki', format: 'der' },
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
} as const;

export interface DkimKeyPair {
  /** PKCS#8 PEM; never leaves the box. */
  privateKey: string;
  /** Base64 of the DER SubjectPublicKeyInfo: the `p=` tag of the DKIM record. */
  publicKey: string;
}

export interface SigningKey {
  domainName: string;
  selector: string;
  privateKey: string;
}

/** Makes a key pair off the event loop (RSA generation takes tens to hundreds of ms). */
export async function generateDkimKeyPair(): Promise<DkimKeyPair> {
  const { publicKey, privateKey } = await generateKeyPairAsync('rsa', KEY_OPTIONS);
  return { privateKey, publicKey: publicKey.toString('base64') };
}

/**
 * A selector naming the key's month (`mr202611`), so a later rotation can publish a new
 * selector beside the old one. Selectors are per domain; reuse across domains is harmless.
 */
export function newSelector(now: Date): string {
  return `mr${now.toISOString().slice(0, 7).replace('-', '')}`;
}

/** The TXT value published at `<selector>._domainkey.<domain>` (RFC 6376 §3.6.1 tags). */
export function dkimTxtValue(publicKey: string): string {
  return `v=DKIM1; k=rsa; p=${publicKey}`;
}

// ---------------------------------------------------------------------------------------------
// The shared domain's key: a file, so it survives database resets and can be backed up alone.

interface SharedKeyFile {
  domain: string;
  selector: string;
  privateKey: string;
  publicKey: string;
  createdAt: string;
}

/** Cache of files already read, by absolute path (the file never changes once written). */
const sharedKeys = new Map<string, SharedKeyFile>();

const normalizeName = (name: string) => name.trim().toLowerCase().replace(/\.$/, '');

function sharedKeyPath(ctx: AppContext): string {
  // The name comes from the config file; keep it a plain file name whatever it holds.
  const file = normalizeName(ctx.config.shared_domain).replace(/[^a-z0-9.-]/g, '_');
  return join(ctx.blobs.root, 'dkim', `${file}.json`);
}

function readSharedKey(path: string): SharedKeyFile | undefined {
  const cached = sharedKeys.get(path);
  if (cached) return cached;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const parsed = JSON.parse(text) as SharedKeyFile;
  sharedKeys.set(path, parsed);
  return parsed;
}

/**
 * Writes the key file exclusively: a temporary file is fsynced, then hard-linked to the final
 * name, which fails if another process (the CLI beside the server) got there first; the
 * winner's key is then used, so every process signs with the one published key.
 */
function persistSharedKey(path: string, record: SharedKeyFile): SharedKeyFile {
  mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${randomToken(8)}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, JSON.stringify(record, null, 2) + '\n');
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    rmSync(tmp, { force: true });
  }
  return readSharedKey(path)!;
}

function sharedRecord(ctx: AppContext, pair: DkimKeyPair): SharedKeyFile {
  const now = ctx.clock.now();
  return {
    domain: normalizeName(ctx.config.shared_domain),
    selector: newSelector(now),
    privateKey: pair.privateKey,
    publicKey: pair.publicKey,
    createdAt: now.toISOString(),
  };
}

/** The shared domain's key, generated (asynchronously) and persisted the first time. */
export async function ensureSharedDkimKey(ctx: AppContext): Promise<{ selector: string; publicKey: string }> {
  const path = sharedKeyPath(ctx);
  const existing = readSharedKey(path);
  if (existing) return existing;
  const pair = await generateDkimKeyPair();
  return readSharedKey(path) ?? persistSharedKey(path, sharedRecord(ctx, pair));
}

/**
 * Synchronous read of the shared key. Normally the server made it at start; if not (a race at
 * the very first start), it is generated synchronously once.
 */
function sharedKeySync(ctx: AppContext): SharedKeyFile {
  const path = sharedKeyPath(ctx);
  const existing = readSharedKey(path);
  if (existing) return existing;
  const { publicKey, privateKey } = generateKeyPairSync('rsa', KEY_OPTIONS);
  return persistSharedKey(path, sharedRecord(ctx, { privateKey, publicKey: publicKey.toString('base64') }));
}

export function isSharedDomain(ctx: AppContext, domainName: string): boolean {
  return normalizeName(domainName) === normalizeName(ctx.config.shared_domain);
}

/** Selector and public key of a domain mailroom signs for (the shared one or a custom one). */
export async function publishedKeyFor(ctx: AppContext, domainName: string): Promise<{ selector: string; publicKey: string } | undefined> {
  if (isSharedDomain(ctx, domainName)) return sharedKeySync(ctx);
  const row = await ctx.db
    .select({ selector: domains.dkimSelector, publicKey: domains.dkimPublicKey })
    .from(domains)
    .where(eq(domains.domain, normalizeName(domainName)))
    .get();
  return row;
}

/**
 * The key the outbound sender signs mail from `domainName` with: the custom domain's key
 * (whatever its verification state), the shared domain's key, or undefined for any other
 * domain (mail is then sent unsigned).
 */
export async function signingKeyFor(ctx: AppContext, domainName: string): Promise<SigningKey | undefined> {
  const name = normalizeName(domainName);
  if (isSharedDomain(ctx, name)) {
    const k = sharedKeySync(ctx);
    return { domainName: name, selector: k.selector, privateKey: k.privateKey };
  }
  const row = await ctx.db
    .select({ selector: domains.dkimSelector, privateKey: domains.dkimPrivateKey })
    .from(domains)
    .where(eq(domains.domain, name))
    .get();
  return row ? { domainName: name, selector: row.selector, privateKey: row.privateKey } : undefined;
}
