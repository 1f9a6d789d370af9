// The filters of the message and thread lists (q, label, unread, direction, status), per inbox
// or account-wide, turned into one SQL match over messages. A thread matches when one of its
// messages matches every filter given.
import type { Db } from '../db/client.ts';
import { FILENAME_MATCH, FILENAME_MESSAGES, parseSearch } from './search.ts';

export const DIRECTIONS = ['inbound', 'outbound'] as const;

export interface MessageFilters {
  /** A search query (src/domain/search.ts). */
  q?: string;
  label?: string;
  unread?: boolean;
  direction?: (typeof DIRECTIONS)[number];
  status?: string;
}

/** Whose messages: one inbox's, or every inbox's of an account. */
export type ListScope = { inboxId: string } | { accountId: string };

export interface MessageMatch {
  /** FROM clause; messages are `m`, labels `l`. */
  from: string;
  where: string;
  params: unknown[];
  /** Newest first (with words in `q`: best match first), in the order the driving index gives. */
  order: string;
  /** The column naming each matching message's thread. */
  threadColumn: string;
}

export const hasFilters = (f: MessageFilters) => f.q !== undefined || f.label !== undefined || f.unread !== undefined || f.direction !== undefined || f.status !== undefined;

/**
 * The messages of `scope` that pass `f`. With a label the match is driven by message_labels'
 * (inbox_id | account_id, label, created_at) index; without one by messages' own indexes —
 * `unread = 1` is written literally so SQLite can use the partial unread indexes. With words
 * in `q` the FTS5 index drives it and orders by relevance (bm25), then newest.
 */
export function matchMessages(scope: ListScope, f: MessageFilters): MessageMatch {
  const [column, value] = 'inboxId' in scope ? ['inbox_id', scope.inboxId] : ['account_id', scope.accountId];
  const search = f.q !== undefined ? parseSearch(f.q) : undefined;
  const where: string[] = [];
  const params: unknown[] = [value];
  let from = '';
  let order = '';
  let threadColumn = 'm.thread_id';
  if (search?.match && search.words.length) {
    // Words may match in the text or in attachment filenames: the candidates are the messages
    // matching every term in the text (ranked) and those with a filename matching any word
    // (unranked, after the ranked ones); each word is then checked on its own. CROSS JOIN makes
    // SQLite start from the few matching attachments, not scan the inbox's messages.
    const anyWord = search.words.map((w) => w.file).join(' OR ');
    from = `(SELECT r, min(rank) AS rank FROM (
        SELECT rowid AS r, rank FROM messages_fts WHERE messages_fts MATCH ?
        UNION ALL SELECT fm.rowid, NULL FROM (${FILENAME_MESSAGES}) fx CROSS JOIN messages fm ON fm.id = fx.message_id WHERE fm.${column} = ?
      ) GROUP BY r) f JOIN messages m ON m.rowid = f.r`;
    where.push(`m.${column} = ?`);
    params.unshift(search.match, anyWord, anyWord, value);
    for (const w of search.words) {
      where.push(`(f.rank IS NOT NULL OR m.rowid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?) OR ${FILENAME_MATCH})`);
      params.push(w.fts, w.file, w.file);
    }
    if (search.opsMatch) {
      where.push('(f.rank IS NOT NULL OR m.rowid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?))');
      params.push(search.opsMatch);
    }
    order = 'f.rank IS NULL, f.rank, m.created_at DESC, m.id DESC';
  } else if (search?.match) {
    from = 'messages_fts f JOIN messages m ON m.rowid = f.rowid';
    where.push('f.messages_fts MATCH ?', `m.${column} = ?`);
    params.unshift(search.match);
    order = 'f.rank, m.created_at DESC, m.id DESC';
  }
  if (search?.match) {
    if (f.label !== undefined) {
      where.push('EXISTS (SELECT 1 FROM message_labels fl WHERE fl.message_id = m.id AND fl.label = ?)');
      params.push(f.label);
    }
  } else if (f.label !== undefined) {
    from = 'message_labels l JOIN messages m ON m.id = l.message_id';
    where.push(`l.${column} = ?`, 'l.label = ?');
    params.push(f.label);
    order = 'l.created_at DESC, l.message_id DESC';
    threadColumn = 'l.thread_id';
  } else {
    from = 'messages m';
    where.push(`m.${column} = ?`);
    order = 'm.created_at DESC, m.id DESC';
    threadColumn = 'm.thread_id';
  }
  if (f.unread !== undefined) where.push(f.unread ? 'm.unread = 1' : 'm.unread = 0');
  if (f.direction !== undefined) {
    where.push('m.direction = ?');
    params.push(f.direction);
  }
  if (f.status !== undefined) {
    where.push('m.status = ?');
    params.push(f.status);
  }
  if (search) {
    for (const c of search.where) where.push(`(${c})`);
    params.push(...search.params);
    for (const x of search.exclude) {
      where.push('m.rowid NOT IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)');
      params.push(x);
    }
  }
  return { from, where: where.join(' AND '), params, order, threadColumn };
}

/** Rows of `source` as arrays (the connection caches the statement by its text, src/db/client.ts). */
export function rawRows<R extends unknown[]>(db: Db, source: string, params: unknown[]): R[] {
  return db.$client.prepare(source).raw(true).all(...params) as R[];
}
