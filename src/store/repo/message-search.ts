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
 * Where a message stands in the order messages were stored, newest first, and its id: on SQLite
 * its rowid (one writer at a time: the insert order), on PostgreSQL its created_at (the ids'
 * order too: ids are time-ordered), the id breaking ties.
 */
export type MatchKey = [position: number | string, id: string];

/**
 * The ranked part of a search with more matches than the cap: the `cap` newest matches. SQLite
 * bounds the full-text scan with the oldest one's rowid (FTS5 seeks to it); PostgreSQL, whose
 * GIN index gives no order, is given their ids.
 */
export interface SearchWindow {
  oldest: MatchKey;
  ids: string[];
}

/**
 * The messages of `scope` that pass `f`. With a label the match is driven by message_labels'
 * (inbox_id | account_id, label, created_at) index; without one by messages' own indexes —
 * `unread = 1` is written literally so SQLite can use the partial unread indexes. With words
 * in `q` the full-text index drives it and orders by relevance, then newest: FTS5's bm25 on
 * SQLite, ts_rank on PostgreSQL; with `window`, only the messages of the window.
 */
export function matchMessages(scope: ListScope, f: MatchFilters, dialect: Dialect, window?: SearchWindow): MessageMatch {
  const [column, value] = scopeColumn(scope);
  const parsed = f.search;
  const rest = restOf(f, dialect, isRanked(f));
  if (parsed && isRanked(f)) {
    const text = dialect === 'sqlite' ? textSqlite(parsed, column, value, window?.oldest[0]) : textPostgres(parsed, column, value, window?.ids);
    return { from: text.from, where: [...text.where, ...rest.where].join(' AND '), params: [...text.params, ...rest.params], order: text.order, threadColumn: 'm.thread_id' };
  }
  if (f.label !== undefined) {
    return {
      from: 'message_labels l JOIN messages m ON m.id = l.message_id',
      where: [`l.${column} = ?`, 'l.label = ?', ...rest.where].join(' AND '),
      params: [value, f.label, ...rest.params],
      order: 'l.created_at DESC, l.message_id DESC',
      threadColumn: 'l.thread_id',
    };
  }
  return { from: 'messages m', where: [`m.${column} = ?`, ...rest.where].join(' AND '), params: [value, ...rest.params], order: 'm.created_at DESC, m.id DESC', threadColumn: 'm.thread_id' };
}

/** A search with text terms: ordered by relevance, and so bounded by the cap (listSearchBound). */
export const isRanked = (f: MatchFilters) => (f.search?.positive.length ?? 0) > 0;

const scopeColumn = (scope: ListScope): [column: string, value: string] => ('inboxId' in scope ? ['inbox_id', scope.inboxId] : ['account_id', scope.accountId]);

/** Every condition of `f` but the text terms and the scope, on `m`: the same for every way of matching. */
function restOf(f: MatchFilters, dialect: Dialect, ranked: boolean): { where: string[]; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  // Unranked, a label drives the match (matchMessages); ranked, the text does and the label is checked.
  if (ranked && f.label !== undefined) {
    where.push('EXISTS (SELECT 1 FROM message_labels fl WHERE fl.message_id = m.id AND fl.label = ?)');
    params.push(f.label);
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
  const p = f.search;
  if (!p) return { where, params };
  const conditions = conditionsSql(p.conditions);
  where.push(...conditions.where.map((c) => `(${c})`));
  params.push(...conditions.params);
  for (const fl of p.filenames) {
    const file = dialect === 'sqlite' ? filenameTerm(fl.value, !fl.quoted) : tsquery(fl.value, fl.quoted);
    const match = dialect === 'sqlite' ? FILENAME_MATCH : PG_FILENAME_MATCH;
    where.push(fl.negated ? `NOT (${match})` : match);
    params.push(file, file);
  }
  for (const t of p.exclude) {
    if (dialect === 'sqlite') {
      where.push('m.rowid NOT IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)');
      params.push(fts5(t));
    } else {
      const c = tsCondition(t);
      where.push(`NOT (${c.sql})`);
      params.push(c.param);
    }
  }
  return { where, params };
}

// --- bounded searches -------------------------------------------------------------------------
//
// Ranking and counting every match costs what the matches number: a common word in a million
// messages is a hundred thousand rows to rank and count. A search with text terms therefore
// ranks only its `cap` newest matches, and counts up to cap + 1 (docs/api.md, "Search at
// scale"). The newest matches are found newest first through the full-text index — FTS5 walks
// a term's rowids in descending order and stops at the limit — from "arms", each a query whose
// rows all match and whose union is every match: the messages matching every term in their
// text, and, when the query has plain words, those with a filename matching one of them.

/** One way of reaching matches: every row it gives matches; `key` orders it newest first. */
interface Arm {
  from: string;
  where: string[];
  params: unknown[];
  /** SQLite: the rowid column the arm's order follows (the FTS5 table's own, so FTS5 gives the order). */
  rowid: string;
}

/** The arms of a ranked search. */
function armsOf(scope: ListScope, f: MatchFilters, dialect: Dialect): Arm[] {
  const [column, value] = scopeColumn(scope);
  const p = f.search!;
  const rest = restOf(f, dialect, true);
  const arm = (from: string, where: string[], params: unknown[], rowid = 'm.rowid'): Arm => ({ from, where: [...where, ...rest.where], params: [...params, ...rest.params], rowid });
  if (dialect === 'sqlite') {
    const q = toFts5(p);
    // CROSS JOIN keeps FTS5 the outer loop, so its descending rowid order needs no sort.
    const arms = [arm('messages_fts f CROSS JOIN messages m ON m.rowid = f.rowid', ['f.messages_fts MATCH ?', `m.${column} = ?`], [q.match, value], 'f.rowid')];
    if (q.words.length) {
      const anyWord = q.words.map((w) => w.file).join(' OR ');
      const where = [`m.${column} = ?`];
      const params: unknown[] = [anyWord, anyWord, value];
      for (const w of q.words) {
        where.push(`(EXISTS (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? AND rowid = m.rowid) OR ${FILENAME_MATCH})`);
        params.push(w.fts, w.file, w.file);
      }
      if (q.opsMatch) {
        where.push('EXISTS (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? AND rowid = m.rowid)');
        params.push(q.opsMatch);
      }
      arms.push(arm(`(SELECT DISTINCT message_id FROM (${FILENAME_MESSAGES})) fx CROSS JOIN messages m ON m.id = fx.message_id`, where, params));
    }
    return arms;
  }
  const inText = p.positive.map(tsCondition);
  const arms = [arm('messages m', [`m.${column} = ?`, ...inText.map((c) => c.sql)], [value, ...inText.map((c) => c.param)])];
  const plain = p.positive.filter((t) => !t.op);
  if (plain.length) {
    const text = textPostgres(p, column, value);
    const anyWord = plain.map((t) => `(${tsquery(t.value, t.quoted)})`).join(' | ');
    // textPostgres' first parameter is the ranking tsquery of its FROM, unused here.
    arms.push(arm('messages m', [PG_FILENAME_MATCH, ...text.where], [anyWord, anyWord, ...text.params.slice(1)]));
  }
  return arms;
}

const byNewest = (a: MatchKey, b: MatchKey) => (a[0] === b[0] ? (a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : 0) : a[0] < b[0] ? 1 : -1);

/** The keys of the `n` newest matches of a ranked search, older than `below` when given, newest first. */
export async function listNewestMatches(db: Db, scope: ListScope, f: MatchFilters, n: number, below?: MatchKey): Promise<MatchKey[]> {
  const dialect = dialectOf(db);
  const found = new Map<string, MatchKey>();
  for (const a of armsOf(scope, f, dialect)) {
    const where = [...a.where];
    const params = [...a.params];
    if (below) {
      where.push(dialect === 'sqlite' ? `${a.rowid} < ?` : '(m.created_at, m.id) < (?, ?)');
      params.push(...(dialect === 'sqlite' ? [below[0]] : below));
    }
    const [key, order] = dialect === 'sqlite' ? [`${a.rowid}, m.id`, `${a.rowid} DESC`] : ['m.created_at, m.id', 'm.created_at DESC, m.id DESC'];
    for (const k of await rawRows<MatchKey>(db, `SELECT ${key} FROM ${a.from} WHERE ${where.join(' AND ')} ORDER BY ${order} LIMIT ?`, [...params, n])) found.set(k[1], k);
  }
  return [...found.values()].sort(byNewest).slice(0, n);
}

/** How many messages a search finds, up to the cap, and for a ranked one past it the window ranked. */
export interface SearchBound {
  /** Exact up to `cap`; `cap` when more match. */
  total: number;
  /** More than `cap` match. */
  more: boolean;
  window?: SearchWindow;
}

/**
 * Counts the matches of a search up to `cap` + 1. A ranked search takes the keys of its newest
 * matches (the window, when there are more than `cap`); an unranked one, already newest first,
 * counts the rows its list would read, stopping there.
 */
export async function boundSearch(db: Db, scope: ListScope, f: MatchFilters, cap: number): Promise<SearchBound> {
  if (isRanked(f)) {
    const keys = await listNewestMatches(db, scope, f, cap + 1);
    if (keys.length <= cap) return { total: keys.length, more: false };
    return { total: cap, more: true, window: { oldest: keys[cap - 1], ids: keys.slice(0, cap).map((k) => k[1]) } };
  }
  const m = matchMessages(scope, f, dialectOf(db));
  const [[n]] = await rawRows<[number | string]>(db, `SELECT count(*) FROM (SELECT 1 FROM ${m.from} WHERE ${m.where} LIMIT ?) c`, [...m.params, cap + 1]);
  return Number(n) > cap ? { total: cap, more: true } : { total: Number(n), more: false };
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
  /** FTS5 MATCH expression of every positive text term. */
  match: string;
  /** The positive plain words: each as an FTS5 expression (`fts`) and an attachments_fts one (`file`). */
  words: Array<{ fts: string; file: string }>;
  /** FTS5 expression of the positive operator terms (from:, subject:, …), or null. */
  opsMatch: string | null;
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

/** The positive text terms as FTS5 expressions over messages_fts and attachments_fts (the SQLite engine). */
function toFts5(p: SearchQuery): Fts5Query {
  const ops = p.positive.filter((t) => t.op);
  return {
    match: p.positive.map(fts5).join(' AND '),
    words: p.words.map((t) => ({ fts: fts5(t), file: filenameTerm(t.value, !t.quoted) })),
    opsMatch: ops.length ? ops.map(fts5).join(' AND ') : null,
  };
}

/**
 * The text part of a search on SQLite, ranked by FTS5's bm25 (`rank`), then newest; from rowid
 * `since` on when given (FTS5 seeks there: the older matches are not read).
 */
function textSqlite(p: SearchQuery, column: string, value: unknown, since?: number | string): { from: string; order: string; where: string[]; params: unknown[] } {
  const search = toFts5(p);
  const bounded = (sql: string) => (since === undefined ? '' : ` AND ${sql} >= ?`);
  const from = since === undefined ? [] : [since];
  if (!search.words.length) {
    return {
      from: 'messages_fts f JOIN messages m ON m.rowid = f.rowid',
      where: [`f.messages_fts MATCH ?${bounded('f.rowid')}`, `m.${column} = ?`],
      params: [search.match, ...from, value],
      order: 'f.rank, m.created_at DESC, m.id DESC',
    };
  }
  // Words may match in the text or in attachment filenames: the candidates are the messages
  // matching every term in the text (ranked) and those with a filename matching any word
  // (unranked, after the ranked ones); each word is then checked on its own. CROSS JOIN makes
  // SQLite start from the few matching attachments, not scan the inbox's messages.
  const anyWord = search.words.map((w) => w.file).join(' OR ');
  const where = [`m.${column} = ?`];
  const params: unknown[] = [search.match, ...from, anyWord, anyWord, value, ...from, value];
  for (const w of search.words) {
    where.push(`(f.rank IS NOT NULL OR m.rowid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?) OR ${FILENAME_MATCH})`);
    params.push(w.fts, w.file, w.file);
  }
  if (search.opsMatch) {
    where.push('(f.rank IS NOT NULL OR m.rowid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?))');
    params.push(search.opsMatch);
  }
  return {
    from: `(SELECT r, min(rank) AS rank FROM (
        SELECT rowid AS r, rank FROM messages_fts WHERE messages_fts MATCH ?${bounded('rowid')}
        UNION ALL SELECT fm.rowid, NULL FROM (${FILENAME_MESSAGES}) fx CROSS JOIN messages fm ON fm.id = fx.message_id WHERE fm.${column} = ?${bounded('fm.rowid')}
      ) GROUP BY r) f JOIN messages m ON m.rowid = f.r`,
    where,
    params,
    order: 'f.rank IS NULL, f.rank, m.created_at DESC, m.id DESC',
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
function textPostgres(p: SearchQuery, column: string, value: unknown, ids?: string[]): { from: string; order: string; where: string[]; params: unknown[] } {
  const plain = p.positive.filter((t) => !t.op).map((t) => `(${tsquery(t.value, t.quoted)})`);
  const where = [`m.${column} = ?`];
  const params: unknown[] = plain.length ? [plain.join(' & '), value] : [value];
  if (ids) {
    // The window's messages are known to match: ranking them is all that is left.
    where.push("m.id = ANY(string_to_array(?, ','))");
    params.push(ids.join(','));
    return { from: plain.length ? RANKED_FROM : 'messages m', order: plain.length ? RANKED_ORDER : NEWEST, where, params };
  }
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
  if (!plain.length) return { from: 'messages m', order: NEWEST, where, params };
  return { from: RANKED_FROM, order: RANKED_ORDER, where, params };
}

const NEWEST = 'm.created_at DESC, m.id DESC';
const RANKED_FROM = "(SELECT to_tsquery('mailroom', ?) AS q) fq CROSS JOIN messages m";
// Every field counts alike (FTS5's bm25 does not weigh columns either); the weights only tell
// the fields apart for from: to: subject:.
const RANKED_ORDER = `(m.fts @@ fq.q) DESC, ts_rank('{1,1,1,1}', m.fts, fq.q) DESC, ${NEWEST}`;
