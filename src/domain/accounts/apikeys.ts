// API keys: `mr_live_<random>`, stored only as a SHA-256 hash. Authentication finds candidates
// by the visible prefix and compares hashes in constant time; a key found valid is remembered
// (auth-cache.ts). A key has scopes (what it may do) and may be limited to some inboxes (the
// others look missing to it); read-only keys (only `read`) may not write.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { errorFields } from '../../log.ts';
import {
  findActiveApiKeyAccountId,
  findAttachmentInboxIds,
  isHeldInbound,
  findInboxIdOf,
  findInboxIdsOf,
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
import { findInboxRow, inboxView, type Inbox } from '../inboxes/inboxes.ts';
import type { Page, PageResult } from '../pagination.ts';
import { CLI_ACTOR, SYSTEM_ACTOR, keyActor, recordAudit, type Actor } from '../audit/audit.ts';

/**
 * What a key may do (PRODUCT.md "Key permissions"): `read` every GET; `send` sending and the
 * marks on mail; `manage` inboxes, lists, webhooks, domains and keys; `review` what a person
 * decides (held mail, suppressions, the audit log), which an agent's key should not have.
 */
export const SCOPES = ['read', 'send', 'manage', 'review'] as const;
export type Scope = (typeof SCOPES)[number];
const ALL_SCOPES = JSON.stringify(SCOPES);

export const KEY_PREFIX_LENGTH = 12;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export interface ApiKeyView {
  id: string;
  keyPrefix: string;
  name: string | null;
  readOnly: boolean;
  scopes: Scope[];
  /** Empty: every inbox of the account. */
  inboxIds: string[];
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
  scopes: Scope[];
  inboxIds: string[];
  expiresAt: string | null;
  message: string;
}

export interface Principal {
  accountId: string;
  keyId: string;
  /** Only `read`: writes get 403 FORBIDDEN (the seed's read-only rule), not INSUFFICIENT_SCOPE. */
  readOnly: boolean;
  scopes: ReadonlySet<Scope>;
  /** null: every inbox of the account. */
  inboxIds: ReadonlySet<string> | null;
}

/** 403 unless the key has `scope`; a write refused to a read-only key keeps the seed's FORBIDDEN. */
export function requireScope(principal: Principal, scope: Scope, write: boolean): void {
  if (principal.scopes.has(scope)) return;
  if (write && principal.readOnly) throw new AppError('FORBIDDEN', 'this API key is read-only');
  throw new AppError('INSUFFICIENT_SCOPE', `this API key lacks the \`${scope}\` scope`);
}

/** Whether the key may see inbox `inboxId`: any other inbox is reported to it as missing. */
export const seesInbox = (principal: Principal, inboxId: string): boolean => principal.inboxIds === null || principal.inboxIds.has(inboxId);

/** What a route or tool can name that belongs to one inbox. */
export type InboxResource = 'inbox' | 'message' | 'thread' | 'draft' | 'webhook' | 'list' | 'key' | 'attachment';
const MISSING = {
  inbox: 'INBOX_NOT_FOUND',
  attachment: 'ATTACHMENT_NOT_FOUND',
  message: 'MESSAGE_NOT_FOUND',
  thread: 'THREAD_NOT_FOUND',
  draft: 'DRAFT_NOT_FOUND',
  webhook: 'WEBHOOK_NOT_FOUND',
  list: 'LIST_ENTRY_NOT_FOUND',
  key: 'API_KEY_NOT_FOUND',
} as const;

/** Whether the key may see a webhook or key of these inboxes (empty: every inbox, so only a key of every inbox). */
export const reachesInboxes = (principal: Principal, inboxIds: string[]): boolean => principal.inboxIds === null || (inboxIds.length > 0 && inboxIds.every((id) => principal.inboxIds!.has(id)));

/**
 * For a key limited to some inboxes: 404, exactly as if it did not exist, when resource `id` lies
 * in another inbox. Nothing to read for the other keys.
 */
/**
 * Inbound mail held by screening is out of an agent's reach until a person releases it: for a key
 * without `review`, the held message and its attachments are missing (404) on every route and
 * tool that names them (its source, reply, forward, marks, attachment text), as in the lists.
 */
export async function requireNotHeldFrom(ctx: AppContext, principal: Principal, kind: InboxResource, id: string): Promise<void> {
  if (principal.scopes.has('review') || (kind !== 'message' && kind !== 'attachment')) return;
  if (await isHeldInbound(ctx.db, kind, principal.accountId, id)) throw new AppError(MISSING[kind], `${kind} ${id} not found`);
}

export async function requireInboxOf(ctx: AppContext, principal: Principal, kind: InboxResource, id: string): Promise<void> {
  if (principal.inboxIds === null) return;
  if (kind === 'webhook' || kind === 'key') {
    const json = await findInboxIdsOf(ctx.db, kind, principal.accountId, id);
    if (json === undefined || !reachesInboxes(principal, readInboxIds(json))) throw new AppError(MISSING[kind], `${kind === 'key' ? 'API key' : kind} ${id} not found`);
    return;
  }
  if (kind === 'attachment') {
    // An upload no message sent yet belongs to the account, not to an inbox: any key of it may
    // read it (its id is known only to whoever uploaded it or received the upload's answer).
    const inboxIds = await findAttachmentInboxIds(ctx.db, principal.accountId, id);
    if (inboxIds === undefined || (inboxIds.length > 0 && !inboxIds.some((x) => principal.inboxIds!.has(x)))) throw new AppError(MISSING.attachment, `attachment ${id} not found`);
    return;
  }
  const inboxId = kind === 'inbox' ? id : await findInboxIdOf(ctx.db, kind, principal.accountId, id);
  if (inboxId === undefined || !principal.inboxIds.has(inboxId)) throw new AppError(MISSING[kind], `${kind === 'list' ? 'list entry' : kind} ${id} not found`);
}

/**
 * The inboxes an account-wide list (GET /messages, /threads, /events, /lists) is narrowed to:
 * null (the whole account) for a key of every inbox, its one inbox for a key limited to one, its
 * inboxes for a key limited to several.
 */
export function accountWideInbox(principal: Principal): string | string[] | null {
  if (principal.inboxIds === null) return null;
  const ids = [...principal.inboxIds];
  return ids.length === 1 ? ids[0]! : ids;
}

/**
 * The inbox filter of a query with an optional `inboxId`, for a key limited to some inboxes: the
 * inbox asked for (404 when the key may not see it), else the key's one inbox or its several.
 */
export async function inboxFilterFor(ctx: AppContext, principal: Principal, inboxId: string | undefined): Promise<{ inboxId?: string; inboxIds?: string[] }> {
  if (inboxId !== undefined) {
    await requireInboxOf(ctx, principal, 'inbox', inboxId);
    return { inboxId };
  }
  const own = accountWideInbox(principal);
  return typeof own === 'string' ? { inboxId: own } : own ? { inboxIds: own } : {};
}

/** GET /inboxes for a key limited to some inboxes: those of them that exist, newest first. */
export async function listInboxesOfKey(ctx: AppContext, principal: Principal, page: Page): Promise<PageResult<Inbox>> {
  const rows = [];
  for (const id of principal.inboxIds ?? [])
    rows.push(
      ...(await findInboxRow(ctx, principal.accountId, id).then(
        (r) => [r],
        () => [],
      )),
    );
  rows.sort((a, b) => (a.createdAt === b.createdAt ? b.id.localeCompare(a.id) : b.createdAt.localeCompare(a.createdAt)));
  return { data: rows.slice(page.offset, page.offset + page.limit).map((r) => inboxView(ctx, r)), total: rows.length, ...page };
}

const readScopes = (json: string): Scope[] => (JSON.parse(json) as string[]).filter((s): s is Scope => (SCOPES as readonly string[]).includes(s));
const readInboxIds = (json: string | null): string[] => (json ? (JSON.parse(json) as string[]) : []);

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
  scopes: readScopes(row.scopes),
  inboxIds: readInboxIds(row.inboxIds),
  lastUsedAt: row.lastUsedAt,
  expiresAt: row.expiresAt,
  createdAt: row.createdAt,
});

export async function createApiKey(
  ctx: AppContext,
  accountId: string,
  opts: {
    name?: string | null;
    readOnly?: boolean;
    /** Default: all four for the CLI; the creating key's own over the API. */
    scopes?: Scope[];
    /** Default: every inbox for the CLI; the creating key's own over the API. */
    inboxIds?: string[];
    expiresAt?: string | null;
    /** The key that asks (API): the new key gets no scope and no inbox that it lacks. */
    creator?: Principal;
    /** Who the audit log names when no key asks (default: mailroom itself, as for the first key). */
    actor?: Actor;
  } = {},
): Promise<CreatedApiKey> {
  const { creator } = opts;
  const asked = new Set<Scope>(opts.scopes ?? (opts.readOnly ? ['read'] : creator ? [...creator.scopes] : SCOPES));
  const scopes = SCOPES.filter((s) => asked.has(s));
  if (!scopes.length) throw new AppError('VALIDATION_ERROR', '`scopes` must name at least one of read, send, manage, review');
  const inboxIds = [...new Set(opts.inboxIds ?? (creator?.inboxIds ? [...creator.inboxIds] : []))];
  if (creator) {
    const missing = scopes.find((s) => !creator.scopes.has(s));
    if (missing) throw new AppError('INSUFFICIENT_SCOPE', `this API key lacks the \`${missing}\` scope, so it cannot give it to a new key`);
    // Checked before the inboxes are looked up, so the answer tells nothing of inboxes the key cannot see.
    if (creator.inboxIds && (!inboxIds.length || inboxIds.some((id) => !creator.inboxIds!.has(id)))) {
      throw new AppError('INSUFFICIENT_SCOPE', 'this API key is limited to some inboxes: a new key may only be limited to some of them');
    }
  }
  for (const id of inboxIds) await findInboxRow(ctx, accountId, id);
  const key = generateKey();
  const row = {
    id: newId('key'),
    accountId,
    name: opts.name ?? null,
    keyPrefix: key.slice(0, KEY_PREFIX_LENGTH),
    keyHash: hashKey(key),
    readOnly: scopes.length === 1 && scopes[0] === 'read',
    scopes: JSON.stringify(scopes),
    inboxIds: inboxIds.length ? JSON.stringify(inboxIds) : null,
    expiresAt: opts.expiresAt ?? null,
    createdAt: isoNow(ctx.clock),
  };
  await ctx.store.transaction(async (tx) => {
    await insertApiKey(tx, row);
    const actor = creator ? keyActor(creator.keyId) : (opts.actor ?? SYSTEM_ACTOR);
    await recordAudit(ctx, tx, accountId, actor, 'key.created', row.id, { name: row.name, scopes, inboxIds });
  });
  return {
    id: row.id,
    key,
    prefix: row.keyPrefix,
    name: row.name,
    readOnly: row.readOnly,
    scopes,
    inboxIds,
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
  // The CLI (no current key) revokes a key of any account; the entry goes to the key's account.
  const revoked = await ctx.store.transaction(async (tx) => {
    const owner = await findActiveApiKeyAccountId(tx, id);
    if (!owner || !(await updateApiKeyRevoked(tx, id, accountId, isoNow(ctx.clock)))) return false;
    await recordAudit(ctx, tx, owner, currentKeyId ? keyActor(currentKeyId) : CLI_ACTOR, 'key.revoked', id);
    return true;
  });
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
  for (const [id, accountId, keyHash, scopeList, inboxIds, lastUsedAt, expiresAt] of candidates) {
    if (!timingSafeEqual(presentedHash, Buffer.from(keyHash, 'hex'))) continue;
    const scopes = new Set(scopeList === ALL_SCOPES ? SCOPES : readScopes(scopeList));
    const entry: CachedKey = {
      accountId,
      keyId: id,
      readOnly: scopes.size === 1 && scopes.has('read'),
      scopes,
      inboxIds: inboxIds ? new Set(readInboxIds(inboxIds)) : null,
      expiresAt: expiresAt ? Date.parse(expiresAt) : null,
      lastUsed: lastUsedAt ? Date.parse(lastUsedAt) : 0,
    };
    const principal = admit(ctx, entry, now);
    if (principal) cache.put(digest, entry, generation, now);
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
  return { accountId: key.accountId, keyId: key.keyId, readOnly: key.readOnly, scopes: key.scopes, inboxIds: key.inboxIds };
}
