// Storage of messages, their threads and their labels: reads and writes `messages`, `threads` and
// `message_labels`, and reads the per-inbox counters `inbox_message_counts` (kept by triggers)
// and `inboxes` (an account's inboxes), for src/domain/mail/messages.ts, threads.ts and
// labels.ts. Which messages pass a list's filters is worded in ./message-search.ts.
import { count, eq, and, getTableColumns, sql } from 'drizzle-orm';
import { preparedQuery, preparedRows, tableColumns } from '../prepared.ts';
import { messages, threads } from '../schema.ts';
import { PLAN_EACH_TIME, dialectOf, insertRows, rawRows, rawRun, type Db } from '../store.ts';
import { countMatchesUpTo, isRanked, listRankedSearchPage, matchMessages, scopeCondition, type ListScope, type MatchFilters } from './message-search.ts';

export type MessageRow = typeof messages.$inferSelect;
/** The columns a Message is made of (what list pages read). */
export type MessageViewRow = Omit<MessageRow, 'accountId' | 'references' | 'rawPath' | 'contentHash'> & {
  /** Read with a page of an inbox: whether the message has labels, and attachments; unknown when absent. */
  hasLabels?: boolean;
  hasAttachments?: boolean;
};
export type ThreadRow = typeof threads.$inferSelect;

/** The rows of one page of a list, and how many rows the whole list has. */
export interface RowPage<T> {
  rows: T[];
  total: number;
  /** A search with more matches than it counts: `total` is that bound, a lower bound. */
  totalIsLowerBound?: boolean;
}

// ---- messages ---------------------------------------------------------------------------------

// Every stored message, received or sent, is one insert: prepared once (src/store/prepared.ts).
const MESSAGE_COLUMNS = Object.keys(getTableColumns(messages)) as Array<keyof MessageRow>;
const insertMessageQuery = (db: Db) =>
  db
    .insert(messages)
    .values(Object.fromEntries(MESSAGE_COLUMNS.map((k) => [k, sql.placeholder(k)])) as unknown as MessageRow)
    .prepare();

const MESSAGE_TABLE = tableColumns<MessageRow>(messages);

/**
 * Inserts a message. On PostgreSQL a `vector` given (the tsvector literal of its search column)
 * is stored as it is; without one, the server computes the column (migration pg/0023).
 */
export async function insertMessage(db: Db, row: MessageRow, vector?: string | null): Promise<void> {
  if (vector != null && dialectOf(db) === 'postgres') {
    await insertRows(db, 'messages', [...MESSAGE_TABLE.names, 'fts'], [[...MESSAGE_TABLE.values(row), vector]]);
    return;
  }
  await preparedQuery(db, insertMessageQuery).run(row as unknown as Record<string, unknown>);
}

// The read behind GET /messages/{id}: prepared once (src/store/prepared.ts).
const messageById = (db: Db) =>
  db
    .select()
    .from(messages)
    .where(eq(messages.id, sql.placeholder('id')))
    .prepare();

export function findMessageById(db: Db, id: string): Promise<MessageRow | undefined> {
  return preparedQuery(db, messageById).get({ id });
}

export async function deleteMessageById(db: Db, id: string): Promise<void> {
  await db.delete(messages).where(eq(messages.id, id)).run();
  forgetFixedParts(id);
}

// A list page is 20-100 rows of 21 columns: read with plain statements in raw mode (rows as
// arrays, src/store/prepared.ts), each turned into a MessageViewRow once. drizzle mapped every
// value through its column decoders into one object and messageView copied it into another.
/** The first columns of a list's every row, in this order (ViewTuple, and FixedTuple below). */
type HeadTuple = [
  id: string,
  inboxId: string,
  threadId: string,
  direction: string,
  fromAddress: string,
  fromName: string | null,
  toAddresses: string,
  ccAddresses: string,
  bccAddresses: string,
  subject: string,
  bodyText: string | null,
  bodyHtml: string | null,
  delivery: string | null,
];
type ViewTuple = [
  ...HeadTuple,
  status: string,
  messageIdHeader: string,
  inReplyTo: string | null,
  recipients: string,
  authentication: string | null,
  size: number,
  createdAt: string,
  updatedAt: string,
  unread: number,
  sendAt: string | null,
  screening: string | null,
  hold: string | null,
];
// A list reads each body only to its first `bodyBytes` + 1 characters (the first four `?` of
// every statement below, bodyChars): the database cuts a 14 MB body, not this process. Every
// character is at least one byte of UTF-8, so a body read cut is still longer than `bodyBytes`
// bytes and cutBodies (src/domain/mail/body-cut.ts) cuts it to that and flags it; a body read
// whole is judged exactly. A body of no more bytes than that has no more characters either and
// is read as it is: substr() counts characters, and counting those of every body of a page was
// a tenth of its cost (bench/).
const cutBody = (column: string) => `CASE WHEN octet_length(${column}) > CAST(? AS integer) THEN substr(${column}, 1, CAST(? AS integer)) ELSE ${column} END`;
type BodyChars = [number, number, number, number];
const bodyChars = (bodyBytes: number): BodyChars => [bodyBytes + 1, bodyBytes + 1, bodyBytes + 1, bodyBytes + 1];
const headColumns = (t: string) =>
  `${t}id, ${t}inbox_id, ${t}thread_id, ${t}direction, ${t}from_address, ${t}from_name, ${t}to_addresses, ${t}cc_addresses, ${t}bcc_addresses, ${t}subject,
  ${cutBody(`${t}body_text`)}, ${cutBody(`${t}body_html`)}, ${t}delivery`;
const viewColumns = (t: string) =>
  `${headColumns(t)}, ${t}status, ${t}message_id_header, ${t}in_reply_to, ${t}recipients, ${t}authentication, ${t}size, ${t}created_at, ${t}updated_at, ${t}unread, ${t}send_at, ${t}screening, ${t}hold`;
const VIEW_COLUMNS = viewColumns('');
// In VIEW_COLUMNS order.
const viewRow = (r: ViewTuple): MessageViewRow => ({
  id: r[0],
  inboxId: r[1],
  threadId: r[2],
  direction: r[3],
  fromAddress: r[4],
  fromName: r[5],
  toAddresses: r[6],
  ccAddresses: r[7],
  bccAddresses: r[8],
  subject: r[9],
  bodyText: r[10],
  bodyHtml: r[11],
  delivery: r[12],
  status: r[13],
  messageIdHeader: r[14],
  inReplyTo: r[15],
  recipients: r[16],
  authentication: r[17],
  size: r[18],
  createdAt: r[19],
  updatedAt: r[20],
  unread: r[21] === 1,
  sendAt: r[22],
  screening: r[23],
  hold: r[24],
});

// ---- the fixed part of a listed message ------------------------------------------------------

// Most of a list page is what no statement changes once a message is stored: its addresses,
// subject, bodies, headers, authentication results and screening verdict. Only status,
// recipients, hold, size and updated_at (outbound.ts, holds.ts, updateMessageStatusIf below) and
// unread (the marks below) change; labels and attachments are rows of their own. So the page of
// an inbox reads those and the ids, and takes the rest of each message from memory, read from
// the table the first time it is listed: turning two bodies and 20 more columns of every row
// into JS values was half of a page's cost (bench/). A statement that came to change any other
// column would have to forget its message here (forgetFixedParts).
type FixedTuple = [...HeadTuple, messageIdHeader: string, inReplyTo: string | null, authentication: string | null, createdAt: string, sendAt: string | null, screening: string | null];
type ChangingTuple = [id: string, status: string, recipients: string, size: number, updatedAt: string, unread: number, hold: string | null, hasLabels: number, hasAttachments: number, total?: number];
const FIXED_COLUMNS = `${headColumns('')}, message_id_header, in_reply_to, authentication, created_at, send_at, screening`;
// With whether each message has labels and attachments (an index probe each): a page none of
// whose messages has any needs neither read (src/domain/mail/messages.ts messageViews).
const CHANGING_COLUMNS = `id, status, recipients, size, updated_at, unread, hold,
  CASE WHEN EXISTS (SELECT 1 FROM message_labels l WHERE l.message_id = messages.id) THEN 1 ELSE 0 END,
  CASE WHEN EXISTS (SELECT 1 FROM attachments a WHERE a.message_id = messages.id) OR EXISTS (SELECT 1 FROM message_attachments ma WHERE ma.message_id = messages.id) THEN 1 ELSE 0 END`;
const joinedRow = (f: FixedTuple, c: ChangingTuple): MessageViewRow => ({
  id: f[0],
  inboxId: f[1],
  threadId: f[2],
  direction: f[3],
  fromAddress: f[4],
  fromName: f[5],
  toAddresses: f[6],
  ccAddresses: f[7],
  bccAddresses: f[8],
  subject: f[9],
  bodyText: f[10],
  bodyHtml: f[11],
  delivery: f[12],
  status: c[1],
  messageIdHeader: f[13],
  inReplyTo: f[14],
  recipients: c[2],
  authentication: f[15],
  size: c[3],
  createdAt: f[16],
  updatedAt: c[4],
  unread: c[5] === 1,
  sendAt: f[17],
  screening: f[18],
  hold: c[6],
  hasLabels: c[7] === 1,
  hasAttachments: c[8] === 1,
});

/**
 * The fixed parts kept, per body cut, by message id (ids are never reused, so one map serves every
 * store of the process); bounded by the characters they hold, the first kept first out (a hit
 * costs one lookup, not an LRU's move). A message deleted here is dropped (deleteMessageById);
 * others (a deleted inbox's, one deleted by another node) age out.
 */
const FIXED_CHARS_MAX = 8 * 1024 * 1024;
interface FixedParts {
  byId: Map<string, { f: FixedTuple; chars: number }>;
  chars: number;
}
const fixedParts = new Map<number, FixedParts>();

const fixedPartsOf = (bodyBytes: number): FixedParts => fixedParts.get(bodyBytes) ?? fixedParts.set(bodyBytes, { byId: new Map(), chars: 0 }).get(bodyBytes)!;

function keepFixedPart(parts: FixedParts, f: FixedTuple): void {
  let chars = 0;
  for (const v of f) if (typeof v === 'string') chars += v.length;
  parts.byId.set(f[0], { f, chars });
  parts.chars += chars;
  for (const [id, old] of parts.byId) {
    if (parts.chars <= FIXED_CHARS_MAX) break;
    parts.byId.delete(id);
    parts.chars -= old.chars;
  }
}

function forgetFixedParts(id: string): void {
  for (const parts of fixedParts.values()) {
    const old = parts.byId.get(id);
    if (!old) continue;
    parts.byId.delete(id);
    parts.chars -= old.chars;
  }
}

// LIMIT and OFFSET are cast: with the bound values bare, SQLite read the same page by the same
// plan markedly slower (docs/performance.md, "HTTP reads"). bigint: an offset may be any safe
// integer (src/domain/pagination.ts).
const PAGE = 'LIMIT CAST(? AS bigint) OFFSET CAST(? AS bigint)';
const fixedOfIds = (db: Db) => preparedRows<[...BodyChars, string], FixedTuple>(db, `SELECT ${FIXED_COLUMNS} FROM messages WHERE id IN (SELECT value FROM json_each(?))`);
const pageOfInbox = (db: Db) =>
  preparedRows<[string, number, number], ChangingTuple>(db, `SELECT ${CHANGING_COLUMNS} FROM messages WHERE inbox_id = ? AND status <> 'held' ORDER BY created_at DESC, id DESC ${PAGE}`);
const pageOfInboxStatus = (db: Db) =>
  preparedRows<[string, string, number, number], ChangingTuple>(db, `SELECT ${CHANGING_COLUMNS} FROM messages WHERE inbox_id = ? AND status = ? ORDER BY created_at DESC, id DESC ${PAGE}`);

/** A page of an inbox (with `status`, when not null), newest first: the changing columns. */
function readInboxPage(db: Db, inboxId: string, status: string | null, limit: number, offset: number): Promise<ChangingTuple[]> {
  return status ? preparedQuery(db, pageOfInboxStatus).all(inboxId, status, limit, offset) : preparedQuery(db, pageOfInbox).all(inboxId, limit, offset);
}

/** The rows of `page` with their fixed parts (as above), in its order. */
async function withFixedParts(db: Db, page: ChangingTuple[], bodyBytes: number): Promise<MessageViewRow[]> {
  const parts = fixedPartsOf(bodyBytes);
  const missing = page.filter((c) => !parts.byId.has(c[0])).map((c) => c[0]);
  // Kept once the page is made: a page larger than the bound must not lose its own rows to it.
  const read = missing.length ? new Map((await preparedQuery(db, fixedOfIds).all(...bodyChars(bodyBytes), JSON.stringify(missing))).map((f) => [f[0], f])) : undefined;
  const rows: MessageViewRow[] = [];
  for (const c of page) {
    const f = parts.byId.get(c[0])?.f ?? read?.get(c[0]);
    // Deleted between the two reads: left out, as if the page had been read just after.
    if (f) rows.push(joinedRow(f, c));
  }
  for (const f of read?.values() ?? []) keepFixedPart(parts, f);
  return rows;
}

// Kept by triggers (schema.ts inboxMessageCounts): constant time however large the inbox.
const totalOfInbox = (db: Db) => preparedRows<[string], [number]>(db, `SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id = ? AND status <> 'held'`);
const totalOfInboxStatus = (db: Db) => preparedRows<[string, string], [number]>(db, 'SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id = ? AND status = ?');
// Account-wide totals from the same counters: the account's inboxes' rows.
const totalOfAccount = (db: Db) =>
  preparedRows<[string], [number]>(db, `SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id IN (SELECT id FROM inboxes WHERE account_id = ?) AND status <> 'held'`);
const totalOfAccountStatus = (db: Db) =>
  preparedRows<[string, string], [number]>(db, 'SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id IN (SELECT id FROM inboxes WHERE account_id = ?) AND status = ?');
const M_VIEW_COLUMNS = viewColumns('m.');

// The inbox's account and total in one statement: what an empty page of an inbox reads to tell a
// missing inbox from an empty page.
const totalOfOwnInbox = (db: Db) =>
  preparedRows<[string, string], [number]>(
    db,
    `SELECT (SELECT coalesce(sum(n), 0) FROM inbox_message_counts c WHERE c.inbox_id = i.id AND c.status <> 'held') FROM inboxes i WHERE i.id = ? AND i.account_id = ?`,
  );
const totalOfOwnInboxStatus = (db: Db) =>
  preparedRows<[string, string, string], [number]>(
    db,
    'SELECT (SELECT coalesce(sum(n), 0) FROM inbox_message_counts c WHERE c.inbox_id = i.id AND c.status = ?) FROM inboxes i WHERE i.id = ? AND i.account_id = ?',
  );
// A plain page of an inbox (the API's most common list) in one statement: its rows, only if the
// inbox is the account's, each with the total (computed once: the subqueries name no row).
const ownPageOfInbox = (db: Db) =>
  preparedRows<[string, string, string, string, number, number], ChangingTuple>(
    db,
    `SELECT ${CHANGING_COLUMNS}, (SELECT coalesce(sum(n), 0) FROM inbox_message_counts c WHERE c.inbox_id = ? AND c.status <> 'held') FROM messages
     WHERE inbox_id = ? AND status <> 'held' AND EXISTS (SELECT 1 FROM inboxes i WHERE i.id = ? AND i.account_id = ?) ORDER BY created_at DESC, id DESC ${PAGE}`,
  );
const ownPageOfInboxStatus = (db: Db) =>
  preparedRows<[string, string, string, string, string, string, number, number], ChangingTuple>(
    db,
    `SELECT ${CHANGING_COLUMNS}, (SELECT coalesce(sum(n), 0) FROM inbox_message_counts c WHERE c.inbox_id = ? AND c.status = ?) FROM messages
     WHERE inbox_id = ? AND status = ? AND EXISTS (SELECT 1 FROM inboxes i WHERE i.id = ? AND i.account_id = ?) ORDER BY created_at DESC, id DESC ${PAGE}`,
  );

/**
 * A page of inbox `inboxId`'s messages (with `status`, when not null), newest first, and their
 * total; undefined when account `accountId` has no such inbox. Bodies are read to `bodyBytes`
 * + 1 characters (bodyChars above), as in every list of this file.
 */
export async function listOwnInboxPage(
  db: Db,
  accountId: string,
  inboxId: string,
  status: string | null,
  limit: number,
  offset: number,
  bodyBytes: number,
): Promise<RowPage<MessageViewRow> | undefined> {
  const page = await (status
    ? preparedQuery(db, ownPageOfInboxStatus).all(inboxId, status, inboxId, status, inboxId, accountId, limit, offset)
    : preparedQuery(db, ownPageOfInbox).all(inboxId, inboxId, inboxId, accountId, limit, offset));
  if (page.length) return { rows: await withFixedParts(db, page, bodyBytes), total: Number(page[0][9]) };
  // No rows: no such inbox of the account, or none at this offset.
  const found = await (status ? preparedQuery(db, totalOfOwnInboxStatus).get(status, inboxId, accountId) : preparedQuery(db, totalOfOwnInbox).get(inboxId, accountId));
  return found && { rows: [], total: Number(found[0]) };
}

/**
 * A page of the messages of `scope` passing `f`, newest first (with words in a search: best match
 * first). Without filters, or with only `status`, the total comes from the counters kept by
 * triggers (and an inbox's page from plain prepared statements); a search counts up to
 * `searchCap` (past it, a search with words ranks only its `searchCap` newest matches and the
 * older ones follow them, newest first: ./message-search.ts); otherwise it is counted over the
 * same index range as the page.
 */
export async function listMessagePage(db: Db, scope: ListScope, f: MatchFilters, limit: number, offset: number, searchCap: number, bodyBytes: number): Promise<RowPage<MessageViewRow>> {
  const { status } = f;
  const counted = f.search === undefined && f.label === undefined && f.unread === undefined && f.direction === undefined;
  if ('inboxId' in scope && counted) {
    const { inboxId } = scope;
    const rows = await withFixedParts(db, await readInboxPage(db, inboxId, status ?? null, limit, offset), bodyBytes);
    const [total] = (await (status ? preparedQuery(db, totalOfInboxStatus).get(inboxId, status) : preparedQuery(db, totalOfInbox).get(inboxId)))!;
    return { rows, total };
  }
  if (f.search !== undefined && isRanked(f)) {
    const page = await listRankedSearchPage(db, scope, f, limit, offset, searchCap);
    return { rows: (await listViewsInOrder(db, page.ids, bodyBytes)).map(viewRow), total: page.total, totalIsLowerBound: page.more };
  }
  const m = matchMessages(scope, f, dialectOf(db));
  const rows = await rawRows<ViewTuple>(db, `SELECT ${M_VIEW_COLUMNS} FROM ${m.from} WHERE ${m.where} ORDER BY ${m.order} LIMIT ? OFFSET ?`, [...bodyChars(bodyBytes), ...m.params, limit, offset]);
  if (f.search !== undefined) {
    const { total, more } = await countMatchesUpTo(db, scope, f, searchCap);
    return { rows: rows.map(viewRow), total, totalIsLowerBound: more };
  }
  let total: number;
  if ('accountId' in scope && counted) {
    const { accountId } = scope;
    [total] = (await (status ? preparedQuery(db, totalOfAccountStatus).get(accountId, status) : preparedQuery(db, totalOfAccount).get(accountId)))!;
  } else {
    [[total]] = await rawRows<[number]>(db, `SELECT count(*) FROM ${m.from} WHERE ${m.where}`, m.params);
  }
  return { rows: rows.map(viewRow), total };
}

/** The messages `ids`, in that order. */
async function listViewsInOrder(db: Db, ids: string[], bodyBytes: number): Promise<ViewTuple[]> {
  if (!ids.length) return [];
  const rows = await rawRows<ViewTuple>(db, `SELECT ${VIEW_COLUMNS} FROM messages WHERE id IN (${ids.map(() => '?').join(', ')})`, [...bodyChars(bodyBytes), ...ids]);
  const byId = new Map(rows.map((r) => [r[0], r]));
  return ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
}

// `after`: the messages stored after a given one. Message ids are made before an inbound message's
// files are written, so two arriving at once may commit in the other order than their ids. The
// order they were stored in: SQLite's rowid (assigned at insert, one writer at a time; only
// reused after the newest row is deleted, and the `after` message still exists, looked up each
// time); on PostgreSQL (tx, seq) of rows whose transaction is older than any still running
// (migrations/pg 0006). When the `after` message is gone (deleted), its id is compared instead:
// ids are time-ordered.
const AFTER = {
  sqlite: {
    position: 'SELECT rowid, NULL FROM messages WHERE id = ? AND inbox_id = ?',
    // Without `status`, held mail is not listed (src/domain/screening/hold.ts).
    where: `inbox_id = ? AND (? IS NULL OR rowid > ?) AND (? IS NULL OR id > ?) AND ((? IS NULL AND status <> 'held') OR status = ?)`,
    cursor: (p: [unknown, unknown] | undefined) => (p ? [p[0], p[0]] : [null, null]),
  },
  postgres: {
    position: 'SELECT tx::text, seq FROM messages WHERE id = ? AND inbox_id = ?',
    where: `inbox_id = ? AND (?::text IS NULL OR (tx, seq) > (?::xid8, ?::bigint)) AND (?::text IS NULL OR id > ?) AND ((?::text IS NULL AND status <> 'held') OR status = ?) AND tx < pg_snapshot_xmin(pg_current_snapshot())`,
    cursor: (p: [unknown, unknown] | undefined) => (p ? [p[0], p[0], p[1]] : [null, null, null]),
  },
};

/** A page of the messages of an inbox stored after message `after` (with `status`, when not null), newest first. */
export async function listMessagePageAfter(db: Db, inboxId: string, after: string, status: string | null, limit: number, offset: number, bodyBytes: number): Promise<RowPage<MessageViewRow>> {
  const stmt = AFTER[dialectOf(db)];
  const [position] = await rawRows<[unknown, unknown]>(db, stmt.position, [after, inboxId]);
  const params = [inboxId, ...stmt.cursor(position), position ? null : after, position ? null : after, status, status];
  const rows = await rawRows<ViewTuple>(db, `SELECT ${VIEW_COLUMNS} FROM messages WHERE ${stmt.where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`, [
    ...bodyChars(bodyBytes),
    ...params,
    limit,
    offset,
  ]);
  const [[total]] = await rawRows<[number]>(db, `SELECT count(*) FROM messages WHERE ${stmt.where}`, params);
  return { rows: rows.map(viewRow), total };
}

const pageOfThread = (db: Db) =>
  preparedRows<[...BodyChars, string, number, number], ViewTuple>(db, `SELECT ${VIEW_COLUMNS} FROM messages WHERE thread_id = ? AND status <> 'held' ORDER BY created_at, id LIMIT ? OFFSET ?`);

/** A page of the messages of thread `threadId`, oldest first (bodies as in every list here). */
export async function listMessagesOfThread(db: Db, threadId: string, limit: number, offset: number, bodyBytes: number): Promise<MessageViewRow[]> {
  const rows = await preparedQuery(db, pageOfThread).all(...bodyChars(bodyBytes), threadId, limit, offset);
  return rows.map(viewRow);
}

// ---- threads ----------------------------------------------------------------------------------

export function findThreadById(db: Db, id: string): Promise<ThreadRow | undefined> {
  return db.select().from(threads).where(eq(threads.id, id)).get();
}

// Run for every stored message that names parents. No ORDER BY ... LIMIT 1 in SQL: with it
// both engines walked the inbox newest first looking for a parent, and read every message of
// it when none was there (the usual case for the first reply from outside): 4.7 ms on SQLite and
// 6.2 ms on PostgreSQL at 20,000 messages in the inbox (a call per message, growing with the
// inbox). Equality on (account_id, message_id_header) finds the few copies of the parents; the
// newest is picked here. On PostgreSQL the parents go as an array, planned for each run
// (PLAN_EACH_TIME): knowing how many there are, the planner takes that index even before the
// table's first ANALYZE; with a JSON list (estimated at 100 rows) it took (inbox_id, …) and read
// the inbox (10 ms a call at 20,000 messages).
const PARENT_THREADS = {
  sqlite: 'SELECT thread_id, created_at FROM messages WHERE account_id = ? AND message_id_header IN (SELECT value FROM json_each(?)) AND inbox_id = ?',
  postgres: `${PLAN_EACH_TIME}SELECT thread_id, created_at FROM messages WHERE account_id = ? AND message_id_header = ANY (CAST(? AS text[])) AND inbox_id = ?`,
};
const countOnThread = (db: Db) =>
  db
    .update(threads)
    .set({
      messageCount: sql`${threads.messageCount} + 1`,
      lastMessageAt: sql`CASE WHEN ${threads.lastMessageAt} > ${sql.placeholder('at')} THEN ${threads.lastMessageAt} ELSE ${sql.placeholder('at')} END`,
    })
    .where(eq(threads.id, sql.placeholder('id')))
    .prepare();
const insertThreadQuery = (db: Db) =>
  db
    .insert(threads)
    .values({
      id: sql.placeholder('id'),
      accountId: sql.placeholder('accountId'),
      inboxId: sql.placeholder('inboxId'),
      subject: sql.placeholder('subject'),
      messageCount: 1,
      lastMessageAt: sql.placeholder('at'),
      createdAt: sql.placeholder('at'),
    })
    .prepare();

/** The thread of the newest message of the inbox whose Message-ID is one of `parents`. */
export async function findThreadIdOfParents(db: Db, accountId: string, inboxId: string, parents: string[]): Promise<string | undefined> {
  const dialect = dialectOf(db);
  const rows = await rawRows<[string, string]>(db, PARENT_THREADS[dialect], [accountId, dialect === 'postgres' ? parents : JSON.stringify(parents), inboxId]);
  let newest: [string, string] | undefined;
  for (const row of rows) if (!newest || row[1] > newest[1]) newest = row;
  return newest?.[0];
}

/** Counts one more message, stored at `at`, on thread `id`. */
export async function updateThreadWithMessage(db: Db, id: string, at: string): Promise<void> {
  await preparedQuery(db, countOnThread).run({ id, at });
}

/** A thread of one message, stored at `at`. */
export async function insertThread(db: Db, thread: { id: string; accountId: string; inboxId: string; subject: string; at: string }): Promise<void> {
  await preparedQuery(db, insertThreadQuery).run(thread);
}

/** How many messages thread `id` has, and when the newest was stored (null when none). */
export async function countMessagesOfThread(db: Db, id: string): Promise<{ n: number; last: string | null }> {
  return (await db
    .select({ n: count(), last: sql<string | null>`max(${messages.createdAt})` })
    .from(messages)
    .where(eq(messages.threadId, id))
    .get())!;
}

export async function updateThreadCounts(db: Db, id: string, messageCount: number, lastMessageAt: string): Promise<void> {
  await db.update(threads).set({ messageCount, lastMessageAt }).where(eq(threads.id, id)).run();
}

export async function deleteThreadById(db: Db, id: string): Promise<void> {
  await db.delete(threads).where(eq(threads.id, id)).run();
}

type ThreadTuple = [id: string, accountId: string, inboxId: string, subject: string, messageCount: number, lastMessageAt: string, createdAt: string];
const THREAD_COLUMNS = 't.id, t.account_id, t.inbox_id, t.subject, t.message_count, t.last_message_at, t.created_at';
const threadRow = (r: ThreadTuple): ThreadRow => ({ id: r[0], accountId: r[1], inboxId: r[2], subject: r[3], messageCount: r[4], lastMessageAt: r[5], createdAt: r[6] });

async function hasHeld(db: Db, scope: ListScope): Promise<boolean> {
  const [match, value] = scopeCondition(scope);
  // The counters have no account column: an account's are those of its inboxes.
  const where = 'accountId' in scope ? 'c.inbox_id IN (SELECT id FROM inboxes WHERE account_id = ?)' : match('c');
  const [[n]] = await rawRows<[number]>(db, `SELECT coalesce(sum(n), 0) FROM inbox_message_counts c WHERE ${where} AND c.status = 'held'`, [value]);
  return Number(n) > 0;
}

/**
 * A page of the threads of `scope`, most recent activity first; with filters `f`, those with at
 * least one message passing all of them.
 */
export async function listThreadPage(db: Db, scope: ListScope, f: MatchFilters | undefined, limit: number, offset: number): Promise<RowPage<ThreadRow>> {
  const [match, value] = scopeCondition(scope);
  let where = match('t');
  const params: unknown[] = [value];
  if (f) {
    // matchMessages leaves held mail out unless the filter asks for it.
    const m = matchMessages(scope, f, dialectOf(db));
    where += ` AND t.id IN (SELECT ${m.threadColumn} FROM ${m.from} WHERE ${m.where})`;
    params.push(...m.params);
  } else if (await hasHeld(db, scope)) {
    // A thread of held mail only is not listed (its subject is the held message's); asked only
    // while the scope holds any, from the counters (src/domain/screening/hold.ts).
    where += ` AND EXISTS (SELECT 1 FROM messages hm WHERE hm.thread_id = t.id AND hm.status <> 'held')`;
  }
  const rows = await rawRows<ThreadTuple>(db, `SELECT ${THREAD_COLUMNS} FROM threads t WHERE ${where} ORDER BY t.last_message_at DESC, t.id DESC LIMIT ? OFFSET ?`, [...params, limit, offset]);
  const [[total]] = await rawRows<[number]>(db, `SELECT count(*) FROM threads t WHERE ${where}`, params);
  return { rows: rows.map(threadRow), total };
}

// ---- labels and read state ----------------------------------------------------------------------

// Pages read labels on every list: prepared once, ids passed as one JSON array.
const labelsOfIds = (db: Db) =>
  preparedRows<[string], [string, string]>(db, 'SELECT message_id, label FROM message_labels WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY message_id, label');
const threadLabelsOfIds = (db: Db) =>
  preparedRows<[string], [string, string]>(db, 'SELECT DISTINCT thread_id, label FROM message_labels WHERE thread_id IN (SELECT value FROM json_each(?)) ORDER BY thread_id, label');
const unreadOfThreads = (db: Db) =>
  preparedRows<[string], [string, number]>(db, 'SELECT thread_id, count(*) FROM messages WHERE thread_id IN (SELECT value FROM json_each(?)) AND unread = 1 GROUP BY thread_id');

/** (message id, label) of every label of the messages `ids`, by message then label. */
export function listLabelsOfMessages(db: Db, ids: string[]): Promise<Array<[messageId: string, label: string]>> {
  return preparedQuery(db, labelsOfIds).all(JSON.stringify(ids));
}

/** (thread id, label) of every label any message of the threads `ids` has, once each, by thread then label. */
export function listLabelsOfThreads(db: Db, ids: string[]): Promise<Array<[threadId: string, label: string]>> {
  return preparedQuery(db, threadLabelsOfIds).all(JSON.stringify(ids));
}

/** (thread id, unread messages) of the threads `ids` with an unread message. */
export function countUnreadOfThreads(db: Db, ids: string[]): Promise<Array<[threadId: string, unread: number]>> {
  return preparedQuery(db, unreadOfThreads).all(JSON.stringify(ids));
}

/**
 * Which messages a change applies to: message `id`, every message of thread `id`, or the
 * messages whose ids are the JSON array `id` ('messages': a part of a thread, ./labels.ts).
 */
export type MarkScope = 'message' | 'thread' | 'messages';

// The scope's messages, in `messages` (column prefix `t`) and in `message_labels`; `?` is its id.
const SCOPE: Record<MarkScope, { messages: (t: string) => string; labels: string }> = {
  message: { messages: (t) => `${t}id = ?`, labels: 'message_id = ?' },
  thread: { messages: (t) => `${t}thread_id = ?`, labels: 'thread_id = ?' },
  messages: { messages: (t) => `${t}id IN (SELECT value FROM json_each(?))`, labels: 'message_id IN (SELECT value FROM json_each(?))' },
};

// One statement per scope and kind of change, whatever the number of messages and labels (the
// labels are one JSON array): set-based, never one statement per message or label.
const MARK_SQL = {
  unread: (scope: MarkScope) => `UPDATE messages SET unread = ? WHERE ${SCOPE[scope].messages('')}`,
  add: (scope: MarkScope) =>
    `INSERT INTO message_labels (message_id, label, account_id, inbox_id, thread_id, created_at)
       SELECT m.id, l.value, m.account_id, m.inbox_id, m.thread_id, m.created_at FROM messages m, json_each(?) l WHERE ${SCOPE[scope].messages('m.')} ON CONFLICT DO NOTHING`,
  remove: (scope: MarkScope) => `DELETE FROM message_labels WHERE ${SCOPE[scope].labels} AND label IN (SELECT value FROM json_each(?))`,
  // The message of the scope with the most labels other than `?` (a JSON array), and how many.
  most: (scope: MarkScope) =>
    `SELECT message_id, count(*) FROM message_labels WHERE ${SCOPE[scope].labels} AND label NOT IN (SELECT value FROM json_each(?))
       GROUP BY message_id ORDER BY count(*) DESC LIMIT 1`,
};

export async function updateMessagesUnread(db: Db, scope: MarkScope, id: string, unread: boolean): Promise<void> {
  await rawRun(db, MARK_SQL.unread(scope), [unread ? 1 : 0, id]);
}

/** Gives the messages `labels` (a message that has one already keeps it as it was). */
export async function insertMessagesLabels(db: Db, scope: MarkScope, id: string, labels: string[]): Promise<void> {
  await rawRun(db, MARK_SQL.add(scope), [JSON.stringify(labels), id]);
}

export async function deleteMessagesLabels(db: Db, scope: MarkScope, id: string, labels: string[]): Promise<void> {
  await rawRun(db, MARK_SQL.remove(scope), [id, JSON.stringify(labels)]);
}

/** Of the messages, the one with the most labels besides `except`, and their number; undefined when none has any. */
export async function findMostLabelled(db: Db, scope: MarkScope, id: string, except: string[]): Promise<{ messageId: string; labels: number } | undefined> {
  const [row] = await rawRows<[string, number]>(db, MARK_SQL.most(scope), [id, JSON.stringify(except)]);
  return row && { messageId: row[0], labels: Number(row[1]) };
}

/** Up to `limit` ids of thread `threadId`'s messages after `after` (an id, '' for the first), in id order. */
export async function listMessageIdsOfThread(db: Db, threadId: string, after: string, limit: number): Promise<string[]> {
  const rows = await rawRows<[string]>(db, 'SELECT id FROM messages WHERE thread_id = ? AND id > ? ORDER BY id LIMIT ?', [threadId, after, limit]);
  return rows.map((r) => r[0]);
}

/**
 * The bodies of these messages by id: stored events leave them to the message row (see
 * src/domain/events/events.ts), and readers put them back from here, one statement per page.
 * Planned for each run on PostgreSQL (PLAN_EACH_TIME): a generic plan made while the table was
 * small joins the id list by hash against a sequential scan of every message, kept as the table
 * grows (bench (o), 10,000 messages into a fresh database: 1.9 ms a run, once per webhook).
 */
export type MessageBodies = { bodyText: string | null; bodyHtml: string | null };

export async function listMessageBodies(db: Db, ids: string[]): Promise<Map<string, MessageBodies>> {
  const rows = await rawRows<[string, string | null, string | null]>(db, `${PLAN_EACH_TIME}SELECT id, body_text, body_html FROM messages WHERE id IN (SELECT value FROM json_each(?))`, [
    JSON.stringify(ids),
  ]);
  return new Map(rows.map(([id, bodyText, bodyHtml]) => [id, { bodyText, bodyHtml }]));
}

/**
 * Moves message `id` from status `from` to `to` (a held message released): false when its status
 * was not `from` (released by another request meanwhile), so only one release wins.
 */
export async function updateMessageStatusIf(db: Db, id: string, from: string, to: string, at: string): Promise<boolean> {
  const done = await db
    .update(messages)
    .set({ status: to, updatedAt: at })
    .where(and(eq(messages.id, id), eq(messages.status, from)))
    .returning({ id: messages.id });
  return done.length > 0;
}
