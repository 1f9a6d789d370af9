// Threads: a conversation in one inbox. A message whose In-Reply-To/References names a stored
// Message-ID of the same inbox joins that message's thread; any other message starts one.
// The thread row keeps its message count and last activity so listings need no aggregation.
import type { AppContext } from '../../context.ts';
import type { Db, Tx } from '../../store/client.ts';
import { newId } from '../../ids.ts';
import {
  countMessagesOfThread,
  deleteThreadById,
  findThreadById,
  findThreadIdOfParents,
  insertThread,
  listThreadPage,
  updateThreadCounts,
  updateThreadWithMessage,
  type ThreadRow,
} from '../../store/repo/messages.ts';
import { AppError } from '../errors.ts';
import { hasFilters, listScope, matchFilters, type InboxSelection, type MessageFilters } from './filters.ts';
import { marksOfThreads } from './labels.ts';
import { runSearch } from './search.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import type { Page, PageResult } from '../pagination.ts';
import { sendAlong } from '../../store/store.ts';

export type { ThreadRow };

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
  const marks = await marksOfThreads(
    ctx,
    rows.map((r) => r.id),
  );
  return rows.map((r) => threadView(r, marks.get(r.id)));
}

/**
 * Most Message-IDs kept of one message's parents. RFC 5322 §3.6.4 builds References by
 * appending, so a long thread's grows without end; mail clients trim it (keeping the first, the
 * thread's root, and the newest), and so does this. A hostile message can carry hundreds of
 * thousands: each is stored, matched and looked up, so they are bounded here, once.
 */
export const MAX_PARENT_IDS = 100;

/**
 * Message-IDs (`<…>`) found in In-Reply-To / References header values, in order, deduplicated;
 * past MAX_PARENT_IDS the first and the newest. Linear in the input (a Set, not a scan per id:
 * 30,000 ids in one References field held the event loop for 1.9 s).
 */
export function messageIdsIn(...values: Array<string | string[] | null | undefined>): string[] {
  const seen = new Set<string>();
  for (const v of values.flat()) {
    if (!v) continue;
    for (const m of v.matchAll(/<[^<>\s]{1,900}>/g)) seen.add(m[0]);
  }
  const ids = [...seen];
  return ids.length > MAX_PARENT_IDS ? [ids[0], ...ids.slice(ids.length - MAX_PARENT_IDS + 1)] : ids;
}

/**
 * The thread a new message of `inboxId` belongs to (RFC 5322 §3.6.4: In-Reply-To and References
 * name the parents), creating one when no parent is stored. Counts the message on the thread.
 * Run inside the transaction that inserts the message (the statements run on `db`'s one
 * connection, so in that transaction).
 */
export async function threadForMessage(db: Db, input: { accountId: string; inboxId: string; parents: string[]; subject: string; at: string; threadId?: string }): Promise<string> {
  let threadId = input.threadId;
  if (!threadId && input.parents.length) {
    threadId = await findThreadIdOfParents(db, input.accountId, input.inboxId, input.parents.slice(-MAX_PARENT_IDS));
  }
  // Sent along (src/store/store.ts): the message row that names the thread follows it.
  if (threadId) {
    sendAlong(updateThreadWithMessage(db, threadId, input.at));
    return threadId;
  }
  const id = newId('thr');
  sendAlong(insertThread(db, { id, accountId: input.accountId, inboxId: input.inboxId, subject: input.subject.slice(0, 998), at: input.at }));
  return id;
}

/**
 * After a message of `threadId` was deleted: the thread goes when it has no message left
 * (api-spec: deleting the only message deletes the thread), else its counters are recomputed.
 */
export async function afterMessageRemoved(tx: Tx, threadId: string): Promise<void> {
  const left = await countMessagesOfThread(tx, threadId);
  if (left.n === 0) await deleteThreadById(tx, threadId);
  else await updateThreadCounts(tx, threadId, left.n, left.last!);
}

export async function findThreadRow(ctx: AppContext, accountId: string, id: string, db: Db = ctx.db): Promise<ThreadRow> {
  const row = await findThreadById(db, id);
  if (!row || row.accountId !== accountId) throw new AppError('THREAD_NOT_FOUND', `thread ${id} not found`);
  return row;
}

/**
 * Threads of an inbox (or, `inboxId` null, of the whole account, most recent activity first; with
 * filters, those with at least one message passing all of them (src/domain/mail/filters.ts).
 */
export async function listThreads(ctx: AppContext, accountId: string, inboxes: InboxSelection, opts: Page & MessageFilters): Promise<PageResult<Thread>> {
  const { limit, offset, ...filters } = opts;
  if (typeof inboxes === 'string') await findInboxRow(ctx, accountId, inboxes);
  const scope = listScope(accountId, inboxes);
  const f = hasFilters(filters) ? matchFilters(filters, ctx.config.limits.search_terms) : undefined;
  const list = (db: Db) => listThreadPage(db, scope, f, limit, offset);
  // A search runs within the search budgets (src/domain/mail/search.ts).
  const { rows, total } = await (f?.search ? runSearch(ctx, accountId, list) : list(ctx.db));
  return { data: await threadViews(ctx, rows), total, limit, offset };
}
