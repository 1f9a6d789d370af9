// Storage of inboxes and of the allow/block list entries: reads and writes the `inboxes` and
// `list_entries` tables for src/domain/inboxes/inboxes.ts and lists.ts (and the inbox moves of
// src/domain/domains/domains.ts). Deleting an inbox also reads `messages` and `attachments`:
// the files its rows name, removed after the rows go. The rules (address checks, limits,
// matching entries) stay in the domain.
import { and, count, desc, eq, inArray, isNull, or, sql, type Column, type SQL } from 'drizzle-orm';
import { preparedQuery, preparedRows } from '../prepared.ts';
import { accounts, addressPolicies, attachments, inboxes, listEntries, messages } from '../schema.ts';
import { changes, type Db } from '../store.ts';

export type InboxRow = typeof inboxes.$inferSelect;
export type ListEntryRow = typeof listEntries.$inferSelect;

/** One page of a listing. */
export interface Window {
  limit: number;
  offset: number;
}

// ---- inboxes ---------------------------------------------------------------------------------

export async function insertInbox(db: Db, row: InboxRow): Promise<void> {
  await db.insert(inboxes).values(row).run();
}

// Hot reads (every inbox route, every RCPT TO): prepared once (src/store/prepared.ts). The read by
// id (every inbox and message-list request) is a plain statement, without drizzle's mapping.
type InboxTuple = [
  id: string,
  accountId: string,
  address: string,
  domainId: string | null,
  displayName: string | null,
  status: string,
  dailySendLimit: number,
  sendsToday: number,
  sendsDay: string | null,
  totalSent: number,
  bounceCount: number,
  complaintCount: number,
  createdAt: string,
  approval: string,
  hourlySendLimit: number | null,
  sendsThisHour: number,
  sendsHour: string | null,
  screening: string | null,
];
const INBOX_COLUMNS = `id, account_id, address, domain_id, display_name, status, daily_send_limit, sends_today, sends_day, total_sent,
            bounce_count, complaint_count, created_at, approval, hourly_send_limit, sends_this_hour, sends_hour, screening`;
const SELECT_INBOX = `SELECT ${INBOX_COLUMNS} FROM inboxes`;
const inboxById = (db: Db) => preparedRows<[string], InboxTuple>(db, `${SELECT_INBOX} WHERE id = ?`);
// A row of any statement whose first columns are an inbox's.
const inboxRow = (r: [...InboxTuple, ...unknown[]]): InboxRow => ({
  id: r[0],
  accountId: r[1],
  address: r[2],
  domainId: r[3],
  displayName: r[4],
  status: r[5],
  dailySendLimit: r[6],
  sendsToday: r[7],
  sendsDay: r[8],
  totalSent: r[9],
  bounceCount: r[10],
  complaintCount: r[11],
  createdAt: r[12],
  approval: r[13],
  hourlySendLimit: r[14],
  sendsThisHour: r[15],
  sendsHour: r[16],
  screening: r[17],
});
const inboxByAddress = (db: Db) => preparedRows<[string], InboxTuple>(db, `${SELECT_INBOX} WHERE address = ?`);
// Every RCPT TO of inbound mail: the inbox, and the bytes its account stores (the quota's
// counter, summed as findAccountUsageBytes in repo/accounts.ts does) in the same statement.
const recipientByAddress = (db: Db) =>
  preparedRows<[string], [...InboxTuple, number | string | null]>(
    db,
    `SELECT ${INBOX_COLUMNS}, (SELECT sum(bytes) FROM account_usage u WHERE u.account_id = inboxes.account_id) FROM inboxes WHERE address = ?`,
  );

/** The inbox `id`, of whichever account. */
export async function findInboxById(db: Db, id: string): Promise<InboxRow | undefined> {
  const found = await preparedQuery(db, inboxById).get(id);
  return found && inboxRow(found);
}

/** The inbox whose address is `address` (stored lowercase: the caller lowercases it). */
export async function findInboxByAddress(db: Db, address: string): Promise<InboxRow | undefined> {
  const found = await preparedQuery(db, inboxByAddress).get(address);
  return found && inboxRow(found);
}

/** findInboxByAddress, with the bytes the inbox's account stores (0 before its first). */
export async function findRecipientByAddress(db: Db, address: string): Promise<{ inbox: InboxRow; storedBytes: number } | undefined> {
  const found = await preparedQuery(db, recipientByAddress).get(address);
  return found && { inbox: inboxRow(found), storedBytes: Number(found[18] ?? 0) };
}

/** The id of the inbox whose address is `address`, if one has it. */
export async function findInboxIdByAddress(db: Db, address: string): Promise<string | undefined> {
  return (await db.select({ id: inboxes.id }).from(inboxes).where(eq(inboxes.address, address)).get())?.id;
}

/** A page of the account's inboxes, newest first. */
export function listInboxesOfAccount(db: Db, accountId: string, page: Window): Promise<InboxRow[]> {
  return db.select().from(inboxes).where(eq(inboxes.accountId, accountId)).orderBy(desc(inboxes.createdAt), desc(inboxes.id)).limit(page.limit).offset(page.offset);
}

export async function countInboxesOfAccount(db: Db, accountId: string): Promise<number> {
  return (await db.select({ n: count() }).from(inboxes).where(eq(inboxes.accountId, accountId)).get())!.n;
}

/** Every inbox, or every inbox of one account, newest first. */
export function listInboxesNewestFirst(db: Db, accountId?: string): Promise<InboxRow[]> {
  const q = db.select().from(inboxes);
  return (accountId ? q.where(eq(inboxes.accountId, accountId)) : q).orderBy(desc(inboxes.createdAt));
}

/** The inboxes on custom domain `domainId` (id and address), oldest first. */
export function listInboxesOfDomain(db: Db, domainId: string): Promise<Array<{ id: string; address: string }>> {
  return db.select({ id: inboxes.id, address: inboxes.address }).from(inboxes).where(eq(inboxes.domainId, domainId)).orderBy(inboxes.createdAt);
}

/**
 * What the rows under inbox `inboxId` name: its messages' ids, and the files of their raw
 * sources and attachments (read before the rows are deleted, to release the files after).
 */
export async function listInboxMessageFiles(db: Db, inboxId: string): Promise<{ messageIds: string[]; files: Array<string | null> }> {
  const msgRows = await db.select({ id: messages.id, rawPath: messages.rawPath }).from(messages).where(eq(messages.inboxId, inboxId));
  const messageIds = msgRows.map((m) => m.id);
  const attRows = messageIds.length ? await db.select({ p: attachments.storagePath }).from(attachments).where(inArray(attachments.messageId, messageIds)) : [];
  return { messageIds, files: [...msgRows.map((m) => m.rawPath), ...attRows.map((a) => a.p)] };
}

/** Deletes inbox `id` of `accountId` (cascades remove its threads, messages and their attachments). */
export async function deleteInboxOfAccount(db: Db, accountId: string, id: string): Promise<void> {
  await db
    .delete(inboxes)
    .where(and(eq(inboxes.id, id), eq(inboxes.accountId, accountId)))
    .run();
}

/** Sets `values` on inbox `id`; answers the row as it now is, or undefined when there is none. */
export function updateInbox(db: Db, id: string, values: Partial<InboxRow>): Promise<InboxRow | undefined> {
  return db.update(inboxes).set(values).where(eq(inboxes.id, id)).returning().get();
}

export async function updateInboxAddress(db: Db, id: string, address: string, domainId: string | null): Promise<void> {
  await db.update(inboxes).set({ address, domainId }).where(eq(inboxes.id, id)).run();
}

/**
 * Counts one send on inbox `inboxId` for UTC day `today` (YYYY-MM-DD), and in its total, unless
 * the day's count has reached its daily limit. Answers false when it has (nothing counted).
 */
export async function claimInboxSend(db: Db, inboxId: string, today: string, hour: string): Promise<boolean> {
  return changes(await preparedQuery(db, countInboxSend).run({ inboxId, today, hour })) > 0;
}

// One guarded UPDATE decides and counts: exact whatever else counts at the same moment (two
// nodes on one database, or a count read earlier): a day (hour) other than today's (this
// hour's) starts again at 1. A null hourly limit is no limit. Every send runs it: prepared once
// (src/store/prepared.ts; built per call it cost more than the send's message insert in bench/).
const countInboxSend = (db: Db) =>
  db
    .update(inboxes)
    .set({
      sendsToday: sql`CASE WHEN ${inboxes.sendsDay} = ${sql.placeholder('today')} THEN ${inboxes.sendsToday} + 1 ELSE 1 END`,
      sendsDay: sql`${sql.placeholder('today')}`,
      sendsThisHour: sql`CASE WHEN ${inboxes.sendsHour} = ${sql.placeholder('hour')} THEN ${inboxes.sendsThisHour} + 1 ELSE 1 END`,
      sendsHour: sql`${sql.placeholder('hour')}`,
      totalSent: sql`${inboxes.totalSent} + 1`,
    })
    .where(
      and(
        eq(inboxes.id, sql.placeholder('inboxId')),
        sql`CASE WHEN ${inboxes.sendsDay} = ${sql.placeholder('today')} THEN ${inboxes.sendsToday} ELSE 0 END < ${inboxes.dailySendLimit}`,
        sql`(${inboxes.hourlySendLimit} IS NULL OR CASE WHEN ${inboxes.sendsHour} = ${sql.placeholder('hour')} THEN ${inboxes.sendsThisHour} ELSE 0 END < ${inboxes.hourlySendLimit})`,
      ),
    )
    .prepare();

/**
 * Counts one send of account `accountId` on UTC day `today`, unless the day's count has reached
 * its daily limit (the account's own, else `fallback`). Answers false when it has.
 */
export async function claimAccountSend(db: Db, accountId: string, today: string, fallback: number): Promise<boolean> {
  return changes(await preparedQuery(db, countAccountSend).run({ accountId, today, fallback })) > 0;
}

// Every send runs it, as countInboxSend: prepared once.
const countAccountSend = (db: Db) =>
  db
    .update(accounts)
    .set({ sendsToday: sql`CASE WHEN ${accounts.sendsDay} = ${sql.placeholder('today')} THEN ${accounts.sendsToday} + 1 ELSE 1 END`, sendsDay: sql`${sql.placeholder('today')}` })
    .where(
      and(
        eq(accounts.id, sql.placeholder('accountId')),
        sql`CASE WHEN ${accounts.sendsDay} = ${sql.placeholder('today')} THEN ${accounts.sendsToday} ELSE 0 END < COALESCE(${accounts.dailySendLimit}, ${sql.placeholder('fallback')})`,
      ),
    )
    .prepare();

// ---- what support actions set on an address (address_policies) -------------------------------

export type AddressPolicyRow = typeof addressPolicies.$inferSelect;

export function findAddressPolicy(db: Db, address: string): Promise<AddressPolicyRow | undefined> {
  return db.select().from(addressPolicies).where(eq(addressPolicies.address, address)).get();
}

/** Sets `values` on the policy of `address` (lower-cased by the caller), creating it. */
export async function upsertAddressPolicy(db: Db, address: string, values: Partial<Omit<AddressPolicyRow, 'address'>> & { updatedAt: string }): Promise<void> {
  await db
    .insert(addressPolicies)
    .values({ address, ...values })
    .onConflictDoUpdate({ target: addressPolicies.address, set: values })
    .run();
}

// ---- allow and block list entries ------------------------------------------------------------

/** What an entry is, besides its id: the fields that make two entries the same. */
export interface ListEntryKey {
  /** null: the whole account. */
  inboxId: string | null;
  direction: string;
  kind: string;
  entry: string;
}

/** Optional filters of a listing; `inboxId` selects the entries of that inbox only. */
export interface ListEntryFilter {
  direction?: string;
  kind?: string;
  inboxId?: string;
  inboxIds?: readonly string[];
}

export async function insertListEntry(db: Db, row: ListEntryRow): Promise<void> {
  await db.insert(listEntries).values(row).run();
}

/** The account's entry equal to `key`, if there is one. */
export function findSameListEntry(db: Db, accountId: string, key: ListEntryKey): Promise<ListEntryRow | undefined> {
  return db
    .select()
    .from(listEntries)
    .where(
      and(
        eq(listEntries.accountId, accountId),
        key.inboxId === null ? isNull(listEntries.inboxId) : eq(listEntries.inboxId, key.inboxId),
        eq(listEntries.direction, key.direction),
        eq(listEntries.kind, key.kind),
        eq(listEntries.entry, key.entry),
      ),
    )
    .get();
}

/** Deletes entry `id` of `accountId`; answers false when there was none. */
export async function deleteListEntryOfAccount(db: Db, accountId: string, id: string): Promise<boolean> {
  return (
    changes(
      await db
        .delete(listEntries)
        .where(and(eq(listEntries.id, id), eq(listEntries.accountId, accountId)))
        .run(),
    ) > 0
  );
}

function listEntryWhere(accountId: string, filter: ListEntryFilter): SQL | undefined {
  const conds: SQL[] = [eq(listEntries.accountId, accountId)];
  if (filter.direction) conds.push(eq(listEntries.direction, filter.direction));
  if (filter.kind) conds.push(eq(listEntries.kind, filter.kind));
  if (filter.inboxId !== undefined) conds.push(eq(listEntries.inboxId, filter.inboxId));
  if (filter.inboxIds) conds.push(inArray(listEntries.inboxId, [...filter.inboxIds]));
  return and(...conds);
}

/** A page of the account's entries matching the filter, newest first. */
export function listListEntriesOfAccount(db: Db, accountId: string, query: ListEntryFilter & Window): Promise<ListEntryRow[]> {
  return db.select().from(listEntries).where(listEntryWhere(accountId, query)).orderBy(desc(listEntries.createdAt), desc(listEntries.id)).limit(query.limit).offset(query.offset);
}

export async function countListEntriesOfAccount(db: Db, accountId: string, filter: ListEntryFilter): Promise<number> {
  return (await db.select({ n: count() }).from(listEntries).where(listEntryWhere(accountId, filter)).get())!.n;
}

export type ApplicableListEntry = Pick<ListEntryRow, 'kind' | 'entry' | 'requireAuth'>;

// Every RCPT TO and every send asks: prepared once (src/store/prepared.ts), one index range read.
const entriesFor = (db: Db) =>
  db
    .select({ kind: listEntries.kind, entry: listEntries.entry, requireAuth: listEntries.requireAuth })
    .from(listEntries)
    .where(
      and(
        eq(listEntries.accountId, sql.placeholder('accountId')),
        eq(listEntries.direction, sql.placeholder('direction')),
        or(isNull(listEntries.inboxId), eq(listEntries.inboxId, sql.placeholder('inboxId'))),
      ),
    )
    .prepare();

/** The account's entries for `direction` that apply to inbox `inboxId`: its own and the account-wide ones. */
export function listApplicableListEntries(db: Db, accountId: string, direction: string, inboxId: string): Promise<ApplicableListEntry[]> {
  return preparedQuery(db, entriesFor).all({ accountId, direction, inboxId });
}

// Inboxes by id, the id list passed as one JSON array: prepared once (src/store/prepared.ts).
// Run for every stored message inside the group commit, and for every spooled one.
const inboxesByIds = (db: Db) =>
  db
    .select()
    .from(inboxes)
    .where(sql`${inboxes.id} IN (SELECT value FROM json_each(${sql.placeholder('ids')}))`)
    .prepare();
const liveInboxIds = (db: Db) =>
  db
    .select({ id: inboxes.id })
    .from(inboxes)
    .where(sql`${inboxes.id} IN (SELECT value FROM json_each(${sql.placeholder('ids')}))`)
    .prepare();

/** The inboxes of `ids` that still exist. */
export function listInboxesByIds(db: Db, ids: string[]): Promise<InboxRow[]> {
  return preparedQuery(db, inboxesByIds).all({ ids: JSON.stringify(ids) });
}

/** The ids of `ids` that still name an inbox. */
export async function listLiveInboxIds(db: Db, ids: string[]): Promise<string[]> {
  return (await preparedQuery(db, liveInboxIds).all({ ids: JSON.stringify(ids) })).map((r) => r.id);
}

const incr = (col: Column) => sql`${col} + 1`;

export async function incrementInboxBounces(db: Db, inboxId: string): Promise<void> {
  await db
    .update(inboxes)
    .set({ bounceCount: incr(inboxes.bounceCount) })
    .where(eq(inboxes.id, inboxId))
    .run();
}

export async function incrementInboxComplaints(db: Db, inboxId: string): Promise<void> {
  await db
    .update(inboxes)
    .set({ complaintCount: incr(inboxes.complaintCount) })
    .where(eq(inboxes.id, inboxId))
    .run();
}
