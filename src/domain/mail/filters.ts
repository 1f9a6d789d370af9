// The filters of the message and thread lists (q, label, unread, direction, status), per inbox
// or account-wide, turned into one SQL match over messages. A thread matches when one of its
// messages matches every filter given.
import type { Dialect } from '../../store/store.ts';
import { FILENAME_MATCH, FILENAME_MESSAGES, parseSearch, PG_FILENAME_MATCH, toFts5, tsCondition, tsquery, type ParsedQuery } from './search.ts';

export const DIRECTIONS = ['inbound', 'outbound'] as const;

export interface MessageFilters {
  /** A search query (src/domain/mail/search.ts). */
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
 * in `q` the full-text index drives it and orders by relevance, then newest: FTS5's bm25 on
 * SQLite, ts_rank on PostgreSQL.
 */
export function matchMessages(scope: ListScope, f: MessageFilters, dialect: Dialect): MessageMatch {
  const [column, value] = 'inboxId' in scope ? ['inbox_id', scope.inboxId] : ['account_id', scope.accountId];
  const parsed = f.q !== undefined ? parseSearch(f.q) : undefined;
  const where: string[] = [];
  const params: unknown[] = [value];
  let from = '';
  let order = '';
  let threadColumn = 'm.thread_id';
  if (parsed && dialect === 'postgres') {
    const text = textPostgres(parsed, column, value);
    if (text) ({ from, order } = text);
    where.push(...(text?.where ?? []));
    params.splice(0, 1, ...(text?.params ?? [value]));
  }
  const search = parsed && dialect === 'sqlite' ? toFts5(parsed) : undefined;
  const texted = parsed ? parsed.positive.length > 0 : false;
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
  if (texted) {
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
  } else if (parsed) {
    for (const c of parsed.where) where.push(`(${c})`);
    params.push(...parsed.params);
    for (const fl of parsed.filenames) {
      const file = tsquery(fl.value, fl.quoted);
      where.push(fl.negated ? `NOT (${PG_FILENAME_MATCH})` : PG_FILENAME_MATCH);
      params.push(file, file);
    }
    for (const t of parsed.exclude) {
      const c = tsCondition(t);
      where.push(`NOT (${c.sql})`);
      params.push(c.param);
    }
  }
  return { from, where: where.join(' AND '), params, order, threadColumn };
}

/**
 * The text part of a search on PostgreSQL (the tsvectors of migrations/pg 0004): every positive
 * term a condition on `m`, a plain word met in an attachment filename too; ranked by ts_rank
 * of the plain words, messages found through a filename alone after the others. Undefined when
 * the query has no positive text term.
 */
function textPostgres(p: ParsedQuery, column: string, value: unknown): { from: string; order: string; where: string[]; params: unknown[] } | undefined {
  if (!p.positive.length) return undefined;
  const plain = p.positive.filter((t) => !t.op).map((t) => `(${tsquery(t.value, t.quoted)})`);
  const where = [`m.${column} = ?`];
  const params: unknown[] = plain.length ? [plain.join(' & '), value] : [value];
  for (const t of p.positive) {
    const c = tsCondition(t);
    if (t.op) {
      where.push(c.sql);
      params.push(c.param);
    } else {
      const file = tsquery(t.value, t.quoted);
      where.push(`(${c.sql} OR ${PG_FILENAME_MATCH})`);
      params.push(c.param, file, file);
    }
  }
  if (!plain.length) return { from: 'messages m', order: 'm.created_at DESC, m.id DESC', where, params };
  return {
    from: "(SELECT to_tsquery('mailroom', ?) AS q) fq CROSS JOIN messages m",
    // Every field counts alike (FTS5's bm25 does not weigh columns either); the weights only
    // tell the fields apart for from: to: subject:.
    order: "(m.fts @@ fq.q) DESC, ts_rank('{1,1,1,1}', m.fts, fq.q) DESC, m.created_at DESC, m.id DESC",
    where,
    params,
  };
}

/** Rows of `source` as arrays (the store caches the statement by its text). */
export { rawRows } from '../../store/store.ts';
