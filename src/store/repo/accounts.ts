// Storage of accounts and their API keys: reads and writes the `accounts` and `api_keys` tables
// for src/domain/accounts/accounts.ts and apikeys.ts. The rules (key format, hashing, expiry,
// who may revoke what) stay in the domain; this module only reads and writes rows.
import { and, asc, desc, eq, isNull } from 'drizzle-orm';
import { preparedQuery, preparedRows } from '../prepared.ts';
import { accounts, apiKeys, drafts, listEntries, messages, threads, webhooks } from '../schema.ts';
import { changes, rawRows, type Db } from '../store.ts';

export type AccountRow = typeof accounts.$inferSelect;
export type ApiKeyRow = typeof apiKeys.$inferSelect;

// ---- accounts --------------------------------------------------------------------------------

export async function insertAccount(db: Db, row: typeof accounts.$inferInsert): Promise<void> {
  await db.insert(accounts).values(row).run();
}

export function listAccountsOldestFirst(db: Db): Promise<AccountRow[]> {
  return db.select().from(accounts).orderBy(asc(accounts.createdAt)).all();
}

export function findOldestAccount(db: Db): Promise<AccountRow | undefined> {
  return db.select().from(accounts).orderBy(asc(accounts.createdAt)).limit(1).get();
}

export function findAccountById(db: Db, id: string): Promise<AccountRow | undefined> {
  return db.select().from(accounts).where(eq(accounts.id, id)).get();
}

/** Sets the account's own limits (null: the config's); answers the row as it now is, or undefined. */
export function updateAccountLimits(db: Db, id: string, values: Partial<Pick<AccountRow, 'dailySendLimit' | 'inboxLimit'>>): Promise<AccountRow | undefined> {
  return db.update(accounts).set(values).where(eq(accounts.id, id)).returning().get();
}

// ---- API keys --------------------------------------------------------------------------------

export async function insertApiKey(db: Db, row: typeof apiKeys.$inferInsert): Promise<void> {
  await db.insert(apiKeys).values(row).run();
}

/** The account's keys not revoked, newest first. */
export function listActiveApiKeysOfAccount(db: Db, accountId: string): Promise<ApiKeyRow[]> {
  return db
    .select()
    .from(apiKeys)
    .where(and(eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)))
    .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id));
}

/** Every account's keys not revoked, newest first. */
export function listActiveApiKeys(db: Db): Promise<ApiKeyRow[]> {
  return db.select().from(apiKeys).where(isNull(apiKeys.revokedAt)).orderBy(desc(apiKeys.createdAt));
}

/**
 * Marks key `id` revoked at `revokedAt` unless it is already; `accountId` null matches a key of
 * any account. Answers false when no such active key exists.
 */
export async function updateApiKeyRevoked(db: Db, id: string, accountId: string | null, revokedAt: string): Promise<boolean> {
  const conds = [eq(apiKeys.id, id), isNull(apiKeys.revokedAt)];
  if (accountId) conds.push(eq(apiKeys.accountId, accountId));
  return (
    changes(
      await db
        .update(apiKeys)
        .set({ revokedAt })
        .where(and(...conds))
        .run(),
    ) > 0
  );
}

/** The account of key `id` if it is active. */
export async function findActiveApiKeyAccountId(db: Db, id: string): Promise<string | undefined> {
  return (
    await db
      .select({ accountId: apiKeys.accountId })
      .from(apiKeys)
      .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)))
      .get()
  )?.accountId;
}

export async function updateApiKeyLastUsed(db: Db, id: string, lastUsedAt: string): Promise<void> {
  await db.update(apiKeys).set({ lastUsedAt }).where(eq(apiKeys.id, id)).run();
}

// Runs on every API request: a plain statement prepared once (src/store/prepared.ts), reading only
// the columns authentication needs.
export type ApiKeyCandidate = [id: string, accountId: string, keyHash: string, scopes: string, inboxIds: string | null, lastUsedAt: string | null, expiresAt: string | null];
const activeKeysByPrefix = (db: Db) =>
  preparedRows<[string], ApiKeyCandidate>(db, 'SELECT id, account_id, key_hash, scopes, inbox_ids, last_used_at, expires_at FROM api_keys WHERE key_prefix = ? AND revoked_at IS NULL');

/** The keys not revoked whose visible prefix is `prefix` (authentication compares their hashes). */
export function listActiveApiKeysByPrefix(db: Db, prefix: string): Promise<ApiKeyCandidate[]> {
  return preparedQuery(db, activeKeysByPrefix).all(prefix);
}

/**
 * The inbox of the account's message, thread, draft or list entry `id` (undefined when there is
 * none, or for an entry of the whole account): what a key limited to some inboxes is checked
 * against before a route touches the resource.
 */
export async function findInboxIdOf(db: Db, kind: 'message' | 'thread' | 'draft' | 'list', accountId: string, id: string): Promise<string | undefined> {
  const t = kind === 'message' ? messages : kind === 'thread' ? threads : kind === 'draft' ? drafts : listEntries;
  return (
    (
      await db
        .select({ inboxId: t.inboxId })
        .from(t)
        .where(and(eq(t.id, id), eq(t.accountId, accountId)))
        .get()
    )?.inboxId ?? undefined
  );
}

/**
 * The inboxes attachment `id` of the account is in: its message's, or for an upload the inboxes of
 * the messages that sent it (none yet: []); undefined when there is no such attachment.
 */
export async function findAttachmentInboxIds(db: Db, accountId: string, id: string): Promise<string[] | undefined> {
  const rows = await rawRows<[string | null]>(
    db,
    `SELECT m.inbox_id FROM attachments a LEFT JOIN messages m ON m.id = a.message_id WHERE a.id = ? AND a.account_id = ?
     UNION ALL SELECT m.inbox_id FROM message_attachments ma JOIN messages m ON m.id = ma.message_id WHERE ma.attachment_id = ? AND m.account_id = ?`,
    [id, accountId, id, accountId],
  );
  return rows.length ? [...new Set(rows.flatMap(([inboxId]) => (inboxId ? [inboxId] : [])))] : undefined;
}

/** Whether message or attachment `id` of the account is (of) inbound mail held by screening. */
export async function isHeldInbound(db: Db, kind: 'message' | 'attachment', accountId: string, id: string): Promise<boolean> {
  const sql =
    kind === 'message'
      ? "SELECT 1 FROM messages WHERE id = ? AND account_id = ? AND status = 'held' AND direction = 'inbound'"
      : "SELECT 1 FROM attachments a JOIN messages m ON m.id = a.message_id WHERE a.id = ? AND a.account_id = ? AND m.status = 'held' AND m.direction = 'inbound'";
  return (await rawRows<[number]>(db, sql, [id, accountId])).length > 0;
}

/** The `inbox_ids` JSON of the account's webhook or active key `id` (null: every inbox); undefined when there is none. */
export async function findInboxIdsOf(db: Db, kind: 'webhook' | 'key', accountId: string, id: string): Promise<string | null | undefined> {
  if (kind === 'key') {
    return (
      await db
        .select({ inboxIds: apiKeys.inboxIds })
        .from(apiKeys)
        .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)))
        .get()
    )?.inboxIds;
  }
  return (
    await db
      .select({ inboxIds: webhooks.inboxIds })
      .from(webhooks)
      .where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId)))
      .get()
  )?.inboxIds;
}

// ---- usage -----------------------------------------------------------------------------------

// Read on every RCPT of inbound mail: one primary-key range of the counter the triggers keep
// (schema.ts accountUsage; on PostgreSQL split into slots, one per connection, summed here), prepared once.
const usageOf = (db: Db) => preparedRows<[string], [number | string | null]>(db, 'SELECT sum(bytes) FROM account_usage WHERE account_id = ?');

/** Bytes the account stores: its messages' sources and its attachments (0 before its first). */
export async function findAccountUsageBytes(db: Db, accountId: string): Promise<number> {
  const row = await preparedQuery(db, usageOf).get(accountId);
  return row ? Number(row[0]) : 0;
}
