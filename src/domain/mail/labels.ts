// Read state and labels of messages: the label rule, reading the labels (and unread counts) a
// page of messages or threads shows, and applying a PATCH's marks to a set of messages in the
// caller's transaction. Labels live in message_labels (src/db/schema.ts says why), read and
// written by src/store/repo/messages.ts.
import type { Db } from '../../db/client.ts';
import type { AppContext } from '../../context.ts';
import { AppError } from '../errors.ts';
import {
  countUnreadOfThreads,
  deleteMessagesLabels,
  findMostLabelled,
  insertMessagesLabels,
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
 * Applies `marks` to message `id` (scope 'message') or to every message of thread `id`
 * (scope 'thread'), a constant number of statements however many messages and labels. Run
 * inside the caller's transaction (statements run on `db`'s connection). A message may carry
 * at most `maxLabels` (`[limits] labels_per_message`): past it, 400 VALIDATION_ERROR naming
 * `addLabels`, checked before anything is written. Read state and labels are the reader's
 * bookkeeping, not the message's: updatedAt stays.
 */
export async function applyMarks(db: Db, scope: MarkScope, id: string, marks: Marks, maxLabels: number): Promise<void> {
  if (marks.unread !== undefined) await updateMessagesUnread(db, scope, id, marks.unread);
  // checkMarks refused a label both added and removed: removing first changes nothing but the count.
  if (marks.removeLabels?.length) await deleteMessagesLabels(db, scope, id, marks.removeLabels);
  const add = [...new Set(marks.addLabels ?? [])];
  if (!add.length) return;
  const most = await findMostLabelled(db, scope, id, add);
  const after = (most?.labels ?? 0) + add.length;
  if (after > maxLabels) {
    const which = most && scope === 'thread' ? ` (message ${most.messageId})` : '';
    throw new AppError('VALIDATION_ERROR', `\`addLabels\`: a message carries at most ${maxLabels} labels ([limits] labels_per_message); this would give${which} ${after}`);
  }
  await insertMessagesLabels(db, scope, id, add);
}
