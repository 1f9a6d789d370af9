// Storage of events: reads and writes the `events` table for src/domain/events/events.ts, and
// deletes old webhook delivery logs (`webhook_attempts`) in the same hourly sweep. What events
// exist and what they carry is decided in the domain; this module stores and reads them.
import { and, asc, eq, gt, inArray, lt, sql, type SQL } from 'drizzle-orm';
import { preparedQuery, preparedRows } from '../prepared.ts';
import { events, webhookAttempts } from '../schema.ts';
import { PLAN_EACH_TIME, changes, dialectOf, insertRows, rawRows, type Db } from '../store.ts';
import type { MessageBodies } from './messages.ts';

export type EventRow = typeof events.$inferSelect;

/** An event row as written: `data` is the payload's JSON; `messageId` is set for message.* events. */
export interface EventInsert {
  id: string;
  accountId: string;
  type: string;
  data: string;
  messageId: string | null;
  createdAt: string;
}

/** An event row as read (payload as JSON text). */
export interface StoredEvent {
  id: string;
  type: string;
  createdAt: string;
  data: string;
}

/** Which of an account's events a reader wants. */
export interface EventFilter {
  /** Only events after this event's position. */
  after?: string;
  types?: string[];
  /** Only events whose payload's `inboxId` is this. */
  inboxId?: string;
  /** Only events whose payload's `inboxId` is one of these. */
  inboxIds?: readonly string[];
  limit: number;
}

// One per inbound message and per send outcome: prepared once (src/store/prepared.ts); run on the
// connection's open transaction like any statement of `tx`.
const insertEventQuery = (db: Db) =>
  db
    .insert(events)
    .values({
      id: sql.placeholder('id'),
      accountId: sql.placeholder('accountId'),
      type: sql.placeholder('type'),
      data: sql.placeholder('data'),
      messageId: sql.placeholder('messageId'),
      createdAt: sql.placeholder('createdAt'),
    })
    .prepare();

/** Inserts events, in their order; one alone by the statement prepared once. */
export async function insertEvents(db: Db, rows: EventInsert[]): Promise<void> {
  if (rows.length === 1) return void (await preparedQuery(db, insertEventQuery).run({ ...rows[0] }));
  await insertRows(
    db,
    'events',
    ['id', 'account_id', 'type', 'data', 'message_id', 'created_at'],
    rows.map((e) => [e.id, e.accountId, e.type, e.data, e.messageId, e.createdAt]),
  );
}

/**
 * Events of the account after `filter.after`, in the order they became visible. Embedded
 * SQLite: an event's id is made inside the transaction that records it and transactions commit
 * one at a time, so ids grow in commit order. PostgreSQL: nodes commit in any order, so events
 * are read by commit position (listEventsShared). Either way a reader that continues after the
 * last event it saw misses nothing.
 */
export async function listEventsOfAccount(db: Db, accountId: string, filter: EventFilter): Promise<StoredEvent[]> {
  if (dialectOf(db) === 'postgres') return listEventsShared(db, accountId, filter);
  const conds: SQL[] = [eq(events.accountId, accountId)];
  if (filter.after) conds.push(gt(events.id, filter.after));
  if (filter.types) conds.push(inArray(events.type, filter.types));
  if (filter.inboxId) conds.push(sql`json_extract(${events.data}, '$.inboxId') = ${filter.inboxId}`);
  if (filter.inboxIds) conds.push(sql`json_extract(${events.data}, '$.inboxId') IN (SELECT value FROM json_each(${JSON.stringify(filter.inboxIds)}))`);
  return db
    .select({ id: events.id, type: events.type, createdAt: events.createdAt, data: events.data })
    .from(events)
    .where(and(...conds))
    .orderBy(asc(events.id))
    .limit(filter.limit);
}

/**
 * On a shared database: events of transactions older than every one still running, by
 * (tx, seq) (migrations/pg 0006), after the position of the `after` event; after its id when
 * it is no longer kept.
 */
async function listEventsShared(db: Db, accountId: string, filter: EventFilter, heldBackToo = false): Promise<StoredEvent[]> {
  const conds = ['account_id = ?', ...(heldBackToo ? [] : ['tx < pg_snapshot_xmin(pg_current_snapshot())'])];
  const params: unknown[] = [accountId];
  if (filter.after) {
    const [at] = await rawRows<[string, number]>(db, 'SELECT tx::text, seq FROM events WHERE id = ?', [filter.after]);
    if (at) conds.push('(tx, seq) > (?::xid8, ?::bigint)');
    else conds.push('id > ?');
    params.push(...(at ?? [filter.after]));
  }
  if (filter.types) {
    conds.push('type IN (SELECT value FROM json_each(?))');
    params.push(JSON.stringify(filter.types));
  }
  if (filter.inboxId) {
    conds.push(`json_extract(data, '$.inboxId') = ?`);
    params.push(filter.inboxId);
  }
  if (filter.inboxIds) {
    conds.push(`json_extract(data, '$.inboxId') IN (SELECT value FROM json_each(?))`);
    params.push(JSON.stringify(filter.inboxIds));
  }
  const rows = await rawRows<[string, string, string, string]>(db, `SELECT id, type, created_at, data FROM events WHERE ${conds.join(' AND ')} ORDER BY tx, seq LIMIT ?`, [...params, filter.limit]);
  return rows.map(([id, type, createdAt, data]) => ({ id, type, createdAt, data }));
}

/**
 * Whether an event matching `filter` comes after `filter.after` that listEventsOfAccount does not
 * give yet: on a shared database, one committed while an older transaction is still open (read
 * with the others once that one ends, which may record no event and so wake no reader). Never on
 * embedded SQLite, where every commit is readable at once.
 */
export async function hasEventsHeldBack(db: Db, accountId: string, filter: EventFilter): Promise<boolean> {
  if (dialectOf(db) !== 'postgres') return false;
  return (await listEventsShared(db, accountId, { ...filter, limit: 1 }, true)).length > 0;
}

/** The id of the newest event visible in that order (listEventsOfAccount), of every account. */
export async function findLatestEventId(db: Db): Promise<string | undefined> {
  if (dialectOf(db) === 'postgres') {
    const [row] = await rawRows<[string]>(db, 'SELECT id FROM events WHERE tx < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY tx DESC, seq DESC LIMIT 1');
    return row?.[0];
  }
  return (
    (
      await db
        .select({ id: sql<string | null>`max(${events.id})` })
        .from(events)
        .get()
    )?.id ?? undefined
  );
}

/** Deletes the events created before `cutoff`; answers how many. */
export async function deleteEventsCreatedBefore(db: Db, cutoff: string): Promise<number> {
  return changes(await db.delete(events).where(lt(events.createdAt, cutoff)).run());
}

/** Deletes the webhook delivery attempts logged before `cutoff`; answers how many. */
export async function deleteWebhookAttemptsCreatedBefore(db: Db, cutoff: string): Promise<number> {
  return changes(await db.delete(webhookAttempts).where(lt(webhookAttempts.createdAt, cutoff)).run());
}

/** When event `id` was recorded, while it is kept. */
export async function findEventCreatedAt(db: Db, id: string): Promise<string | undefined> {
  return (await db.select({ createdAt: events.createdAt }).from(events).where(eq(events.id, id)).get())?.createdAt;
}

/**
 * The first `chars` characters of these messages' bodies by id, and whether each is longer: what
 * an event list or stream frame carries (src/domain/events/events.ts). Cut here, so a 14 MB body
 * never becomes a string in the server for each stream that reads its event.
 */
export async function listMessageBodyHeads(db: Db, ids: string[], chars: number): Promise<Map<string, MessageBodies & { longer: boolean }>> {
  const rows = await preparedRows<[number, number, number, number, string], [string, string | null, unknown, string | null, unknown]>(
    db,
    // Planned for each run on PostgreSQL, as listMessageBodies (src/store/repo/messages.ts) is.
    `${PLAN_EACH_TIME}SELECT id, substr(body_text, 1, ?), length(body_text) > ?, substr(body_html, 1, ?), length(body_html) > ? FROM messages WHERE id IN (SELECT value FROM json_each(?))`,
  ).all(chars, chars, chars, chars, JSON.stringify(ids));
  // SQLite answers 0/1 (NULL for a NULL body), PostgreSQL booleans.
  return new Map(rows.map(([id, bodyText, textLonger, bodyHtml, htmlLonger]) => [id, { bodyText, bodyHtml, longer: Boolean(textLonger) || Boolean(htmlLonger) }]));
}
