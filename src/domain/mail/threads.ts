// Threads: a conversation in one inbox. A message whose In-Reply-To/References names a stored
// Message-ID of the same inbox joins that message's thread; any other message starts one.
// The thread row keeps its message count and last activity so listings need no aggregation.
import { and, count, desc, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db, Tx } from '../../db/client.ts';
import { preparedQuery } from '../../db/prepared.ts';
import { messages, threads } from '../../db/schema.ts';
import { newId } from '../../ids.ts';
import { AppError } from '../errors.ts';
import { hasFilters, matchMessages, rawRows, type ListScope, type MessageFilters } from './filters.ts';
import { marksOfThreads } from './labels.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import type { Page, PageResult } from '../pagination.ts';

export type ThreadRow = typeof threads.$inferSelect;

export interface Thread {
  id: string;
  inboxId: string;
  subject: string;
  messageCount: number;
  /** Messages of the thread still unread. */
  unreadCount: number;
  /** Every label of any of its messages. */
  labels: string[];
  lastMessageAt: string;
  createdAt: string;
}

export const threadView = (row: ThreadRow, marks: { labels: string[]; unreadCount: number } = { labels: [], unreadCount: 0 }): Thread => ({
  id: row.id,
  inboxId: row.inboxId,
  subject: row.subject,
  messageCount: row.messageCount,
  unreadCount: marks.unreadCount,
  labels: marks.labels,
  lastMessageAt: row.lastMessageAt,
  createdAt: row.createdAt,
});

/** Views of thread rows with their labels and unread counts (two queries for the page). */
export async function threadViews(ctx: AppContext, rows: ThreadRow[]): Promise<Thread[]> {
  const marks = await marksOfThreads(ctx, rows.map((r) => r.id));
  return rows.map((r) => threadView(r, marks.get(r.id)));
}

/** Message-IDs (`<…>`) found in In-Reply-To / References header values, in order, deduplicated. */
export function messageIdsIn(...values: Array<string | string[] | null | undefined>): string[] {
  const out: string[] = [];
  for (const v of values.flat()) {
    if (!v) continue;
    for (const m of v.matchAll(/<[^<>\s]{1,900}>/g)) if (!out.includes(m[0])) out.push(m[0]);
  }
  return out;
}

/**
 * The thread a new message of `inboxId` belongs to (RFC 5322 §3.6.4: In-Reply-To and References
 * name the parents), creating one when no parent is stored. Counts the message on the thread.
 * Run inside the transaction that inserts the message (the statements run on `db`'s one
 * connection, so in that transaction).
 */
export async function threadForMessage(
  db: Db,
  input: { accountId: string; inboxId: string; parents: string[]; subject: string; at: string; threadId?: string },
): Promise<string> {
  let threadId = input.threadId;
  if (!threadId && input.parents.length) {
    threadId = (await preparedQuery(db, parentThread).get({ accountId: input.accountId, inboxId: input.inboxId, parents: JSON.stringify(input.parents.slice(-100)) }))?.threadId;
  }
  if (threadId) {
    await preparedQuery(db, countOnThread).run({ id: threadId, at: input.at });
    return threadId;
  }
  const id = newId('thr');
  await preparedQuery(db, insertThread).run({ id, accountId: input.accountId, inboxId: input.inboxId, subject: input.subject.slice(0, 998), at: input.at });
  return id;
}

// Run for every stored message: prepared once (src/db/prepared.ts).
const parentThread = (db: Db) =>
  db
    .select({ threadId: messages.threadId })
    .from(messages)
    .where(
      and(
        eq(messages.accountId, sql.placeholder('accountId')),
        sql`${messages.messageIdHeader} IN (SELECT value FROM json_each(${sql.placeholder('parents')}))`,
        eq(messages.inboxId, sql.placeholder('inboxId')),
      ),
    )
    .orderBy(desc(messages.createdAt))
    .limit(1)
    .prepare();
const countOnThread = (db: Db) =>
  db
    .update(threads)
    .set({ messageCount: sql`${threads.messageCount} + 1`, lastMessageAt: sql`CASE WHEN ${threads.lastMessageAt} > ${sql.placeholder('at')} THEN ${threads.lastMessageAt} ELSE ${sql.placeholder('at')} END` })
    .where(eq(threads.id, sql.placeholder('id')))
    .prepare();
const insertThread = (db: Db) =>
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

/**
 * After a message of `threadId` was deleted: the thread goes when it has no message left
 * (api-spec: deleting the only message deletes the thread), else its counters are recomputed.
 */
export async function afterMessageRemoved(tx: Tx, threadId: string): Promise<void> {
  const left = (await tx
    .select({ n: count(), last: sql<string | null>`max(${messages.createdAt})` })
    .from(messages)
    .where(eq(messages.threadId, threadId))
    .get())!;
  if (left.n === 0) await tx.delete(threads).where(eq(threads.id, threadId)).run();
  else await tx.update(threads).set({ messageCount: left.n, lastMessageAt: left.last! }).where(eq(threads.id, threadId)).run();
}

export async function findThreadRow(ctx: AppContext, accountId: string, id: string, db: Db = ctx.db): Promise<ThreadRow> {
  const row = await db.select().from(threads).where(eq(threads.id, id)).get();
  if (!row || row.accountId !== accountId) throw new AppError('THREAD_NOT_FOUND', `thread ${id} not found`);
  return row;
}

type ThreadTuple = [id: string, accountId: string, inboxId: string, subject: string, messageCount: number, lastMessageAt: string, createdAt: string];
const THREAD_COLUMNS = 't.id, t.account_id, t.inbox_id, t.subject, t.message_count, t.last_message_at, t.created_at';
const threadRow = (r: ThreadTuple): ThreadRow => ({ id: r[0], accountId: r[1], inboxId: r[2], subject: r[3], messageCount: r[4], lastMessageAt: r[5], createdAt: r[6] });

/**
 * Threads of an inbox (or, `inboxId` null, of the whole account, most recent activity first; with
 * filters, those with at least one message passing all of them (src/domain/mail/filters.ts).
 */
export async function listThreads(ctx: AppContext, accountId: string, inboxId: string | null, opts: Page & MessageFilters): Promise<PageResult<Thread>> {
  const { limit, offset, ...filters } = opts;
  if (inboxId !== null) await findInboxRow(ctx, accountId, inboxId);
  const scope: ListScope = inboxId !== null ? { inboxId } : { accountId };
  let where = inboxId !== null ? 't.inbox_id = ?' : 't.account_id = ?';
  const params: unknown[] = [inboxId ?? accountId];
  if (hasFilters(filters)) {
    const m = matchMessages(scope, filters, ctx.store.dialect);
    where += ` AND t.id IN (SELECT ${m.threadColumn} FROM ${m.from} WHERE ${m.where})`;
    params.push(...m.params);
  }
  const rows = await rawRows<ThreadTuple>(ctx.db, `SELECT ${THREAD_COLUMNS} FROM threads t WHERE ${where} ORDER BY t.last_message_at DESC, t.id DESC LIMIT ? OFFSET ?`, [
    ...params,
    limit,
    offset,
  ]);
  const [[total]] = await rawRows<[number]>(ctx.db, `SELECT count(*) FROM threads t WHERE ${where}`, params);
  return { data: await threadViews(ctx, rows.map(threadRow)), total, limit, offset };
}
