// Read state and labels of messages: the label rule, reading the labels (and unread counts) a
// page of messages or threads shows, and applying a PATCH's marks to a set of messages in the
// caller's transaction. Labels live in message_labels (src/db/schema.ts says why).
import type { Db } from '../../db/client.ts';
import type { AppContext } from '../../context.ts';
import { preparedQuery, preparedRows } from '../../db/prepared.ts';
import { AppError } from '../errors.ts';
import { rawRun } from '../../store/store.ts';

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

// Pages read labels on every list: prepared once, ids passed as one JSON array.
const labelsOfIds = (db: Db) =>
  preparedRows<[string], [string, string]>(
    db,
    'SELECT message_id, label FROM message_labels WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY message_id, label',
  );
const threadLabelsOfIds = (db: Db) =>
  preparedRows<[string], [string, string]>(
    db,
    'SELECT DISTINCT thread_id, label FROM message_labels WHERE thread_id IN (SELECT value FROM json_each(?)) ORDER BY thread_id, label',
  );
const unreadOfThreads = (db: Db) =>
  preparedRows<[string], [string, number]>(
    db,
    'SELECT thread_id, count(*) FROM messages WHERE thread_id IN (SELECT value FROM json_each(?)) AND unread = 1 GROUP BY thread_id',
  );

/** Labels of each message, sorted. */
export async function labelsOfMessages(ctx: AppContext, ids: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (!ids.length) return out;
  for (const [id, label] of await preparedQuery(ctx.db, labelsOfIds).all(JSON.stringify(ids))) {
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
  const json = JSON.stringify(ids);
  for (const [id, label] of await preparedQuery(ctx.db, threadLabelsOfIds).all(json)) out.get(id)?.labels.push(label);
  for (const [id, n] of await preparedQuery(ctx.db, unreadOfThreads).all(json)) {
    const m = out.get(id);
    if (m) m.unreadCount = n;
  }
  return out;
}

// One statement per scope (one message, or every message of a thread) and change.
const MARK_SQL = {
  unread: (scope: string) => `UPDATE messages SET unread = ? WHERE ${scope} = ?`,
  add: (scope: string) =>
    `INSERT INTO message_labels (message_id, label, account_id, inbox_id, thread_id, created_at)
       SELECT id, ?, account_id, inbox_id, thread_id, created_at FROM messages WHERE ${scope} = ? ON CONFLICT DO NOTHING`,
  remove: (scope: string) => `DELETE FROM message_labels WHERE ${scope === 'id' ? 'message_id' : 'thread_id'} = ? AND label IN (SELECT value FROM json_each(?))`,
};

/**
 * Applies `marks` to message `id` (scope 'message') or to every message of thread `id`
 * (scope 'thread'). Run inside the caller's transaction (statements run on `db`'s connection).
 * Read state and labels are the reader's bookkeeping, not the message's: updatedAt stays.
 */
export async function applyMarks(db: Db, scope: 'message' | 'thread', id: string, marks: Marks): Promise<void> {
  const column = scope === 'message' ? 'id' : 'thread_id';
  if (marks.unread !== undefined) await rawRun(db, MARK_SQL.unread(column), [marks.unread ? 1 : 0, id]);
  for (const label of new Set(marks.addLabels ?? [])) await rawRun(db, MARK_SQL.add(column), [label, id]);
  if (marks.removeLabels?.length) await rawRun(db, MARK_SQL.remove(column), [id, JSON.stringify(marks.removeLabels)]);
}
