// DKIM keys: 2048-bit RSA pairs for custom domains (stored on the domain row) and for the
// shared domain (a secret made once: data_dir/dkim/<domain>.json, or a row on PostgreSQL), the DKIM TXT
// value operators publish (RFC 6376 §3.6.1), and the key the outbound sender signs with.
import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';
import type { AppContext } from '../../context.ts';
import { findDomainPublicKey, findDomainSigningKey } from '../../store/repo/domains.ts';
import { ensureSecret } from '../../store/secrets.ts';

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
// The shared domain's key: a secret of its own (src/store/secrets.ts: a file under data_dir on
// SQLite, so it survives database resets and can be backed up alone; a row every node reads on
// PostgreSQL), made once: if two processes make one at once, both use the first stored.

interface SharedKeyFile {
  domain: string;
  selector: string;
  privateKey: string;
  publicKey: string;
  createdAt: string;
}

const normalizeName = (name: string) => name.trim().toLowerCase().replace(/\.$/, '');

function sharedKeyPath(ctx: AppContext): string {
  // The name comes from the config file; keep it a plain file name whatever it holds.
  return `dkim/${normalizeName(ctx.config.shared_domain).replace(/[^a-z0-9.-]/g, '_')}.json`;
}

/** The last shared key file read, parsed: every send signed with the shared key asks for it. */
let parsedShared: { text: string; key: SharedKeyFile } | undefined;

/** The shared domain's key, generated (off the event loop) and stored the first time. */
async function sharedKey(ctx: AppContext): Promise<SharedKeyFile> {
  const text = await ensureSecret(ctx.store, ctx.config.data_dir, sharedKeyPath(ctx), async () => {
    const pair = await generateDkimKeyPair();
    const now = ctx.clock.now();
    const record: SharedKeyFile = { domain: normalizeName(ctx.config.shared_domain), selector: newSelector(now), ...pair, createdAt: now.toISOString() };
    return JSON.stringify(record, null, 2) + '\n';
  });
  if (parsedShared?.text !== text) parsedShared = { text, key: JSON.parse(text) as SharedKeyFile };
  return parsedShared.key;
}

/** The shared domain's key, made the first time (the server does it at start). */
export async function ensureSharedDkimKey(ctx: AppContext): Promise<{ selector: string; publicKey: string }> {
  const { selector, publicKey } = await sharedKey(ctx);
  return { selector, publicKey };
}

export function isSharedDomain(ctx: AppContext, domainName: string): boolean {
  return normalizeName(domainName) === normalizeName(ctx.config.shared_domain);
}

/** Selector and public key of a domain mailroom signs for (the shared one or a custom one). */
export async function publishedKeyFor(ctx: AppContext, domainName: string): Promise<{ selector: string; publicKey: string } | undefined> {
  if (isSharedDomain(ctx, domainName)) return ensureSharedDkimKey(ctx);
  return findDomainPublicKey(ctx.db, normalizeName(domainName));
}

/**
 * The key the outbound sender signs mail from `domainName` with: the custom domain's key
 * (whatever its verification state), the shared domain's key, or undefined for any other
 * domain (mail is then sent unsigned).
 */
export async function signingKeyFor(ctx: AppContext, domainName: string): Promise<SigningKey | undefined> {
  const name = normalizeName(domainName);
  if (isSharedDomain(ctx, name)) {
    const k = await sharedKey(ctx);
    return { domainName: name, selector: k.selector, privateKey: k.privateKey };
  }
  const row = await findDomainSigningKey(ctx.db, name);
  return row ? { domainName: name, selector: row.selector, privateKey: row.privateKey } : undefined;
}
