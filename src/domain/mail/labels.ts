// Read state and labels of messages: the label rule and its bound, reading the labels (and
// unread counts) a page of messages or threads shows, and applying a PATCH's marks to a message
// (in the caller's transaction) or to a thread (a part at a time). Labels live in message_labels
// (src/store/schema.ts says why), read and written by src/store/repo/messages.ts.
import type { Db } from '../../store/client.ts';
import type { AppContext } from '../../context.ts';
import { AppError } from '../errors.ts';
import {
  countUnreadOfThreads,
  deleteMessagesLabels,
  findMostLabelled,
  insertMessagesLabels,
  listMessageIdsOfThread,
  listLabelsOfMessages,
  listLabelsOfThreads,
  updateMessagesUnread,
  type MarkScope,
} from '../../store/repo/messages.ts';

/** PRODUCT.md: lowercase, starts with a letter or digit, at most 64 characters. */
export const LABEL_PATTERN = /^[a-z0-9][a-z0-9_:.-]{0,63}$/;
export const LABEL_RULE = '1 to 64 characters of a-z, 0-9, _ : . - starting with a letter or digit';

/** What a PATCH of a message or a thread changes; absent fields stay as they are. */
export interface Marks {
  unread?: boolean;
  addLabels?: string[];
  removeLabels?: string[];
}

/** Refuses a label given both to add and to remove (which one was meant cannot be known). */
export function checkMarks(marks: Marks): void {
  const both = marks.addLabels?.find((l) => marks.removeLabels?.includes(l));
  if (both !== undefined) throw new AppError('VALIDATION_ERROR', `\`removeLabels\`: label ${JSON.stringify(both)} is also in \`addLabels\``);
}

/** Labels of each message, sorted. */
export async function labelsOfMessages(ctx: AppContext, ids: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (!ids.length) return out;
  for (const [id, label] of await listLabelsOfMessages(ctx.db, ids)) {
    let list = out.get(id);
    if (!list) out.set(id, (list = []));
    list.push(label);
  }
  return out;
}

/** The union of the labels of each thread's messages (sorted) and its number of unread messages. */
export async function marksOfThreads(ctx: AppContext, ids: string[]): Promise<Map<string, { labels: string[]; unreadCount: number }>> {
  const out = new Map(ids.map((id) => [id, { labels: [] as string[], unreadCount: 0 }]));
  if (!ids.length) return out;
  for (const [id, label] of await listLabelsOfThreads(ctx.db, ids)) out.get(id)?.labels.push(label);
  for (const [id, n] of await countUnreadOfThreads(ctx.db, ids)) {
    const m = out.get(id);
    if (m) m.unreadCount = n;
  }
  return out;
}

/**
 * Refuses `marks` when they would give a message of `scope` `id` more than `maxLabels` labels
 * (`[limits] labels_per_message`): 400 VALIDATION_ERROR naming `addLabels`, before any write.
 * Afterwards a message has its labels other than those added or removed, plus those added.
 */
async function checkLabelRoom(db: Db, scope: MarkScope, id: string, marks: Marks, maxLabels: number): Promise<void> {
  const add = new Set(marks.addLabels ?? []);
  if (!add.size) return;
  const most = await findMostLabelled(db, scope, id, [...add, ...(marks.removeLabels ?? [])]);
  const after = (most?.labels ?? 0) + add.size;
  if (after <= maxLabels) return;
  const which = most && scope === 'thread' ? ` (message ${most.messageId})` : '';
  throw new AppError('VALIDATION_ERROR', `\`addLabels\`: a message carries at most ${maxLabels} labels ([limits] labels_per_message); this would give${which} ${after}`);
}

/** The label changes of `marks` on the messages of a scope: two statements at most. */
async function applyLabels(db: Db, scope: MarkScope, id: string, marks: Marks): Promise<void> {
  if (marks.removeLabels?.length) await deleteMessagesLabels(db, scope, id, marks.removeLabels);
  if (marks.addLabels?.length) await insertMessagesLabels(db, scope, id, [...new Set(marks.addLabels)]);
}

/**
 * Applies `marks` to message `id`, inside the caller's transaction (statements run on `db`'s
 * connection). Read state and labels are the reader's bookkeeping, not the message's:
 * updatedAt stays.
 */
export async function markMessage(db: Db, id: string, marks: Marks, maxLabels: number): Promise<void> {
  await checkLabelRoom(db, 'message', id, marks, maxLabels);
  if (marks.unread !== undefined) await updateMessagesUnread(db, 'message', id, marks.unread);
  await applyLabels(db, 'message', id, marks);
}

/**
 * Label rows one transaction of a thread's PATCH writes or deletes at most. 100,000 rows (50
 * labels on 2,001 messages) in one statement held SQLite, and with it the process, for about a
 * second; in transactions of this size each holds it a few tens of milliseconds, and other
 * requests run between them.
 */
const LABEL_ROWS_PER_TRANSACTION = 5_000;

/**
 * Applies `marks` to every message of thread `threadId` (of the caller's account: checked).
 * The bound on labels is checked and read state set in one transaction; labels are then
 * changed a part of the thread at a time (LABEL_ROWS_PER_TRANSACTION), each part set-based in
 * its own transaction: a reader may see the thread half-labelled for that moment, and a PATCH
 * that fails half-way has labelled part of it (repeating it finishes the work).
 */
export async function markThread(ctx: AppContext, threadId: string, marks: Marks): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    await checkLabelRoom(tx, 'thread', threadId, marks, ctx.config.limits.labels_per_message);
    if (marks.unread !== undefined) await updateMessagesUnread(tx, 'thread', threadId, marks.unread);
  });
  const perMessage = Math.max(new Set(marks.addLabels ?? []).size, marks.removeLabels?.length ?? 0);
  if (!perMessage) return;
  const batch = Math.max(1, Math.floor(LABEL_ROWS_PER_TRANSACTION / perMessage));
  for (let after = ''; ;) {
    const ids = await listMessageIdsOfThread(ctx.db, threadId, after, batch);
    if (ids.length) await ctx.store.transaction((tx) => applyLabels(tx, 'messages', JSON.stringify(ids), marks));
    if (ids.length < batch) return;
    after = ids[ids.length - 1];
    // Let the requests that waited meanwhile (on the loop, or for the database) go first.
    await new Promise((resolve) => setImmediate(resolve));
  }
}
