// API keys: `mr_live_<random>`, stored only as a SHA-256 hash. Authentication finds candidates
// by the visible prefix and compares hashes in constant time; a key found valid is remembered
// (auth-cache.ts). Read-only keys may not write.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { errorFields } from '../../log.ts';
import {
  insertApiKey,
  listActiveApiKeys,
  listActiveApiKeysByPrefix,
  listActiveApiKeysOfAccount,
  updateApiKeyLastUsed,
  updateApiKeyRevoked,
  type ApiKeyRow,
} from '../../store/repo/accounts.ts';
import { AppError } from '../errors.ts';
import { authCacheOf, keysChanged, type CachedKey } from './auth-cache.ts';
import { isoNow } from '../time.ts';

export const KEY_PREFIX_LENGTH = 12;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export interface ApiKeyView {
  id: string;
  keyPrefix: string;
  name: string | null;
  readOnly: boolean;
  lastUsedAt: string | null;
  expiresAt: string | null;
  createdAt: string;
}

export interface CreatedApiKey {
  id: string;
  key: string;
  prefix: string;
  name: string | null;
  readOnly: boolean;
  expiresAt: string | null;
  message: string;
}

export interface Principal {
  accountId: string;
  keyId: string;
  readOnly: boolean;
}

// One-shot hash: no Hash object per call (this runs on every API request).
const hashKey = (key: string): string => hash('sha256', key, 'hex');

function generateKey(): string {
  // 40 base62 characters ≈ 238 bits; rejection sampling keeps the characters uniform.
  let out = '';
  while (out.length < 40) {
    for (const b of randomBytes(48)) {
      if (b < 248 && out.length < 40) out += BASE62[b % 62];
    }
  }
  return `mr_live_${out}`;
}

const view = (row: ApiKeyRow): ApiKeyView => ({
  id: row.id,
  keyPrefix: row.keyPrefix,
  name: row.name,
  readOnly: row.readOnly,
  lastUsedAt: row.lastUsedAt,
  expiresAt: row.expiresAt,
  createdAt: row.createdAt,
});

export async function createApiKey(
  ctx: AppContext,
  accountId: string,
  opts: { name?: string | null; readOnly?: boolean; expiresAt?: string | null } = {},
): Promise<CreatedApiKey> {
  const key = generateKey();
  const row = {
    id: newId('key'),
    accountId,
    name: opts.name ?? null,
    keyPrefix: key.slice(0, KEY_PREFIX_LENGTH),
    keyHash: hashKey(key),
    readOnly: opts.readOnly ?? false,
    expiresAt: opts.expiresAt ?? null,
    createdAt: isoNow(ctx.clock),
  };
  await insertApiKey(ctx.db, row);
  return {
    id: row.id,
    key,
    prefix: row.keyPrefix,
    name: row.name,
    readOnly: row.readOnly,
    expiresAt: row.expiresAt,
    message: 'Store this key now: it is shown only once and cannot be retrieved again.',
  };
}

export async function listApiKeys(ctx: AppContext, accountId: string): Promise<ApiKeyView[]> {
  return (await listActiveApiKeysOfAccount(ctx.db, accountId)).map(view);
}

/** Every active key of every account (CLI listing without --account). */
export async function listAllApiKeys(ctx: AppContext): Promise<Array<ApiKeyView & { accountId: string }>> {
  return (await listActiveApiKeys(ctx.db)).map((r) => ({ ...view(r), accountId: r.accountId }));
}

export async function revokeApiKey(ctx: AppContext, accountId: string | null, id: string, currentKeyId?: string): Promise<void> {
  if (id === currentKeyId) {
    throw new AppError('CANNOT_REVOKE_CURRENT_KEY', 'the key that authenticates this request cannot revoke itself; use another key');
  }
  const revoked = await updateApiKeyRevoked(ctx.db, id, accountId, isoNow(ctx.clock));
  // Committed: no process may go on accepting the key from memory.
  if (revoked) keysChanged(ctx);
  else throw new AppError('API_KEY_NOT_FOUND', `API key ${id} not found`);
}

const LAST_USED_PRECISION_MS = 1000;

/** Keys whose lastUsedAt write is queued, so concurrent requests queue one write, not fifty. */
const recording = new Set<string>();

/**
 * Writes lastUsedAt through the group committer, whose WAL fsync runs off the event loop: a
 * synchronous=FULL commit here stalled every open connection once a second (bench/, GET at 50
 * connections). The timestamp is informational, so the request does not wait for it.
 */
function recordUse(ctx: AppContext, id: string, now: Date): void {
  if (recording.has(id)) return;
  recording.add(id);
  ctx.store
    .grouped((tx) => updateApiKeyLastUsed(tx, id, now.toISOString()))
    .catch((err: unknown) => ctx.log.warn('lastUsedAt not recorded', { keyId: id, ...errorFields(err) }))
    .finally(() => recording.delete(id));
}

/**
 * Resolves a presented key to its principal, or undefined. A key found valid is remembered
 * (auth-cache.ts says until when: a revocation, by this process, the CLI or another node, empties
 * the cache); an unknown, revoked or expired key is read from the table every time.
 */
export async function authenticateKey(ctx: AppContext, presented: string): Promise<Principal | undefined> {
  const known = rememberedKey(ctx, presented);
  return known === NOT_REMEMBERED ? readKey(ctx, presented) : known;
}

/** What rememberedKey answers when the database must be asked (readKey). */
export const NOT_REMEMBERED = Symbol('not remembered');

/**
 * authenticateKey without a promise when the answer is known in memory (a remembered key, or a
 * key too short or long to be one): the HTTP API's every request starts here.
 */
export function rememberedKey(ctx: AppContext, presented: string): Principal | undefined | typeof NOT_REMEMBERED {
  if (presented.length < KEY_PREFIX_LENGTH || presented.length > 200) return undefined;
  const now = ctx.clock.now().getTime();
  // A map lookup by the digest leaks nothing about stored keys through its timing: finding a
  // digest's neighbours would take preimages of SHA-256.
  const hit = authCacheOf(ctx).get(hashKey(presented), now);
  return hit ? admit(ctx, hit, now) : NOT_REMEMBERED;
}

/** Reads a key not remembered from the table, and remembers it when it is valid. */
export async function readKey(ctx: AppContext, presented: string): Promise<Principal | undefined> {
  if (presented.length < KEY_PREFIX_LENGTH || presented.length > 200) return undefined;
  const digest = hashKey(presented);
  const now = ctx.clock.now().getTime();
  const cache = authCacheOf(ctx);
  const generation = cache.generation;
  const candidates = await listActiveApiKeysByPrefix(ctx.db, presented.slice(0, KEY_PREFIX_LENGTH));
  const presentedHash = Buffer.from(digest, 'hex');
  for (const [id, accountId, keyHash, readOnly, lastUsedAt, expiresAt] of candidates) {
    if (!timingSafeEqual(presentedHash, Buffer.from(keyHash, 'hex'))) continue;
    const entry: CachedKey = {
      accountId,
      keyId: id,
      readOnly: readOnly === 1,
      expiresAt: expiresAt ? Date.parse(expiresAt) : null,
      lastUsed: lastUsedAt ? Date.parse(lastUsedAt) : 0,
      filled: now,
    };
    const principal = admit(ctx, entry, now);
    if (principal) cache.put(digest, entry, generation);
    return principal;
  }
  return undefined;
}

/** The principal of a valid key (undefined once expired); records its use at most once a second. */
function admit(ctx: AppContext, key: CachedKey, now: number): Principal | undefined {
  if (key.expiresAt !== null && key.expiresAt <= now) return undefined;
  if (now - key.lastUsed >= LAST_USED_PRECISION_MS) {
    key.lastUsed = now;
    recordUse(ctx, key.keyId, new Date(now));
  }
  return { accountId: key.accountId, keyId: key.keyId, readOnly: key.readOnly };
}
