// Storage of message searches: the SQL that finds the messages passing the filters of a message
// or thread list (src/domain/mail/filters.ts) and a parsed search query `q`
// (src/domain/mail/search.ts), on either engine. Reads messages, message_labels, attachments,
// message_attachments and the full-text indexes: on SQLite the FTS5 tables messages_fts
// (migration 0008) and attachments_fts (migration 0011), on PostgreSQL the tsvector columns of
// migrations/pg 0004. Writes nothing. The query language's rules (what a term means, what is a
// valid query) are the domain's; this module only words a parsed query for each engine.
//
// Words are never spliced into SQL or into FTS syntax: each becomes an FTS5 string ("…", quotes
// doubled) or a tsquery lexeme ('…', quotes doubled), and every value is a bound parameter.
import { dialectOf, rawRows, type Db, type Dialect } from '../store.ts';

/** A word or phrase of a query, to find in the message text (or one field of it). */
export interface TextTerm {
  value: string;
  /** A quoted phrase matches exactly; a word matches as a word prefix. */
  quoted: boolean;
  /** from: to: (To or Cc) cc: subject:, or null for the whole text. */
  op: 'from' | 'to' | 'cc' | 'subject' | null;
}

/** A condition of a query on a message's own columns and links, not on its text. */
export type SearchCondition = { negated: boolean } & (
  | { on: 'label'; label: string }
  | { on: 'unread'; unread: boolean }
  | { on: 'attachment' }
  | { on: 'direction'; direction: string }
  /** Created before the day, or from the day on (YYYY-MM-DD). */
  | { on: 'before' | 'after'; day: string }
);

/**
 * A parsed query. Text terms stay terms: each engine's full-text index words them its own way
 * (SQLite FTS5, PostgreSQL tsvector); the conditions are the same SQL on both engines.
 */
export interface SearchQuery {
  /** Every positive text term: the messages matching them all in their text (ranked). */
  positive: TextTerm[];
  /** The positive plain words and phrases: each may match in an attachment filename instead. */
  words: TextTerm[];
  /** Text terms no result may match. */
  exclude: TextTerm[];
  /** filename: terms, and the filename side of a negated plain word (none may match then). */
  filenames: Array<{ value: string; quoted: boolean; negated: boolean }>;
  conditions: SearchCondition[];
}

/** What a list asks of its messages: a parsed query and the list's own filters; absent ones pass all. */
export interface MatchFilters {
  search?: SearchQuery;
  label?: string;
  unread?: boolean;
  direction?: string;
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

/** Of `ids` (messages of `scope`), the ones passing `f`. */
export async function listMatchingMessageIds(db: Db, scope: ListScope, f: MatchFilters, ids: string[]): Promise<string[]> {
  const m = matchMessages(scope, f, dialectOf(db));
  const rows = await rawRows<[string]>(db, `SELECT m.id FROM ${m.from} WHERE ${m.where} AND m.id IN (${ids.map(() => '?').join(', ')})`, [...m.params, ...ids]);
  return rows.map(([id]) => id);
}

/**
 * The messages of `scope` that pass `f`. With a label the match is driven by message_labels'
 * (inbox_id | account_id, label, created_at) index; without one by messages' own indexes —
 * `unread = 1` is written literally so SQLite can use the partial unread indexes. With words
 * in `q` the full-text index drives it and orders by relevance, then newest: FTS5's bm25 on
 * SQLite, ts_rank on PostgreSQL.
 */
export function matchMessages(scope: ListScope, f: MatchFilters, dialect: Dialect): MessageMatch {
  const [column, value] = 'inboxId' in scope ? ['inbox_id', scope.inboxId] : ['account_id', scope.accountId];
  const parsed = f.search;
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
    const conditions = conditionsSql(parsed.conditions);
    for (const c of conditions.where) where.push(`(${c})`);
    params.push(...conditions.params);
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

// --- the conditions (both engines) ------------------------------------------------------------

/** The SQL of one condition on messages `m`, and its parameters. */
function conditionSql(c: SearchCondition): [sql: string, ...params: unknown[]] {
  switch (c.on) {
    case 'label':
      return ['EXISTS (SELECT 1 FROM message_labels ql WHERE ql.message_id = m.id AND ql.label = ?)', c.label];
    case 'unread':
      return [c.unread ? 'm.unread = 1' : 'm.unread = 0'];
    case 'attachment':
      return ['EXISTS (SELECT 1 FROM attachments qa WHERE qa.message_id = m.id) OR EXISTS (SELECT 1 FROM message_attachments qm WHERE qm.message_id = m.id)'];
    case 'direction':
      return ['m.direction = ?', c.direction];
    // created_at is ISO 8601 UTC: a day compares as the prefix of its timestamps.
    case 'before':
      return ['m.created_at < ?', c.day];
    case 'after':
      return ['m.created_at >= ?', c.day];
  }
}

/** The conditions as SQL on `m` (a negated one inside NOT (…)), with their parameters in order. */
function conditionsSql(conditions: SearchCondition[]): { where: string[]; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  for (const c of conditions) {
    const [sql, ...values] = conditionSql(c);
    where.push(c.negated ? `NOT (${sql})` : sql);
    params.push(...values);
  }
  return { where, params };
}

// --- SQLite: FTS5 ------------------------------------------------------------------------------

/** What the SQLite engine runs: FTS5 MATCH expressions. */
interface Fts5Query {
  /** FTS5 MATCH expression of every positive text term, or null. */
  match: string | null;
  /** The positive plain words: each as an FTS5 expression (`fts`) and an attachments_fts one (`file`). */
  words: Array<{ fts: string; file: string }>;
  /** FTS5 expression of the positive operator terms (from:, subject:, …), or null. */
  opsMatch: string | null;
  /** FTS5 expressions no result may satisfy. */
  exclude: string[];
  /** SQL conditions on `m` (filename conditions included), with their parameters in order. */
  where: string[];
  params: unknown[];
}

const FTS_COLUMNS: Record<NonNullable<TextTerm['op']>, string> = {
  from: '{from_address from_name}',
  to: '{to_addresses cc_addresses}',
  cc: '{cc_addresses}',
  subject: '{subject}',
};

/** An FTS5 string for a word or phrase; `prefix` lets the last word match as a prefix. */
const ftsString = (text: string, prefix: boolean) => `"${text.replaceAll('"', '""')}"${prefix ? '*' : ''}`;

/** Words of a text as the FTS tokenizer sees them: letter and digit runs, lowercased, accents removed. */
function filenameWords(text: string): string[] {
  return text.normalize('NFD').replace(/\p{M}+/gu, '').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * An attachments_fts expression for a term: its words as one phrase (consecutive in the
 * filename), the last one as a prefix when `prefix` ("report" matches "Q3-Report_final.pdf",
 * "q3 rep" too, "port" does not).
 */
const filenameTerm = (value: string, prefix: boolean) => `"${filenameWords(value).join(' ')}"${prefix ? '*' : ''}`;

/** Messages with an attachment whose filename matches: their own, or uploads linked when sent. */
const FILENAME_MESSAGES =
  'SELECT qa.message_id FROM attachments_fts qt JOIN attachments qa ON qa.rowid = qt.rowid WHERE attachments_fts MATCH ? AND qa.message_id IS NOT NULL ' +
  'UNION ALL SELECT qm.message_id FROM attachments_fts qt JOIN attachments qf ON qf.rowid = qt.rowid JOIN message_attachments qm ON qm.attachment_id = qf.id WHERE attachments_fts MATCH ?';

/** A message (`m`) with an attachment whose filename matches the term (two parameters: the term, twice). */
const FILENAME_MATCH = `m.id IN (${FILENAME_MESSAGES})`;

/** An FTS5 expression for a text term (column filter included). */
const fts5 = (t: TextTerm) => {
  const s = ftsString(t.value, !t.quoted);
  return t.op ? `${FTS_COLUMNS[t.op]} : ${s}` : s;
};

/** The query as FTS5 expressions over messages_fts and attachments_fts (the SQLite engine). */
function toFts5(p: SearchQuery): Fts5Query {
  const ops = p.positive.filter((t) => t.op);
  const { where, params } = conditionsSql(p.conditions);
  for (const f of p.filenames) {
    const file = filenameTerm(f.value, !f.quoted);
    where.push(f.negated ? `NOT (${FILENAME_MATCH})` : FILENAME_MATCH);
    params.push(file, file);
  }
  return {
    match: p.positive.length ? p.positive.map(fts5).join(' AND ') : null,
    words: p.words.map((t) => ({ fts: fts5(t), file: filenameTerm(t.value, !t.quoted) })),
    opsMatch: ops.length ? ops.map(fts5).join(' AND ') : null,
    exclude: p.exclude.map(fts5),
    where,
    params,
  };
}

// --- PostgreSQL: tsvector ----------------------------------------------------------------------
//
// The PostgreSQL schema (migrations/pg 0004) keeps a tsvector per message, `fts`: subject
// (weight A), from (B), to and cc (C), body (D); `fts_cc` the cc addresses alone; and `fts` of
// each attachment's filename. Text is split at every character that is no letter or digit, as
// FTS5's unicode61 tokenizer does, and accents are removed (unaccent), so both engines find the
// same messages. A term becomes a tsquery: its words in a row (<->), the last one a prefix (:*)
// unless the term is a quoted phrase, restricted to the weights of its field.

const TS_WEIGHTS: Record<NonNullable<TextTerm['op']>, string> = { subject: 'A', from: 'B', to: 'C', cc: '' };

/** A tsquery for a term, or null when it has no word; `weights` restricts it to fields. */
function tsquery(value: string, quoted: boolean, weights = ''): string | null {
  const words = value.match(/[\p{L}\p{N}]+/gu);
  if (!words) return null;
  return words.map((w, i) => `'${w.replaceAll("'", "''")}'${i === words.length - 1 && !quoted ? ':*' : ':'}${weights}`.replace(/:$/, '')).join(' <-> ');
}

/** The SQL condition a text term puts on `m`, and its parameter. */
function tsCondition(t: TextTerm): { sql: string; param: string } {
  const column = t.op === 'cc' ? 'm.fts_cc' : 'm.fts';
  return { sql: `${column} @@ to_tsquery('mailroom', ?)`, param: tsquery(t.value, t.quoted, t.op ? TS_WEIGHTS[t.op] : '')! };
}

/** Messages (`m`) with an attachment whose filename matches (two parameters: the tsquery, twice). */
const PG_FILENAME_MATCH =
  "m.id IN (SELECT qa.message_id FROM attachments qa WHERE qa.fts @@ to_tsquery('mailroom', ?) AND qa.message_id IS NOT NULL " +
  "UNION ALL SELECT qm.message_id FROM attachments qf JOIN message_attachments qm ON qm.attachment_id = qf.id WHERE qf.fts @@ to_tsquery('mailroom', ?))";

/**
 * The text part of a search on PostgreSQL: every positive term a condition on `m`, a plain word
 * met in an attachment filename too; ranked by ts_rank of the plain words, messages found
 * through a filename alone after the others. Undefined when the query has no positive text term.
 */
function textPostgres(p: SearchQuery, column: string, value: unknown): { from: string; order: string; where: string[]; params: unknown[] } | undefined {
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
