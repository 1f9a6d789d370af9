// Storage of message searches: the SQL that finds the messages passing the filters of a message
// or thread list (src/domain/mail/filters.ts) and a parsed search query `q`
// (src/domain/mail/search.ts), on either engine. Reads messages, message_labels, attachments,
// message_attachments and the full-text indexes: on SQLite the FTS5 tables messages_fts
// (migration 0008) and attachments_fts (migration 0011), on PostgreSQL the tsvector columns of
// migrations/pg 0004. Writes nothing. The query language's rules (what a term means, what is a
// valid query) are the domain's; this module only words a parsed query for each engine, and
// keeps a search's cost to a bound however many messages match ("bounded searches" below).
//
// Words are never spliced into SQL or into FTS syntax: each becomes an FTS5 string ("…", quotes
// doubled) or a tsquery lexeme ('…', quotes doubled), and every value is a bound parameter.
import { PLAN_EACH_TIME, dialectOf, rawRows, type Db, type Dialect } from '../store.ts';

/** A word or phrase of a query, to find in the message text (or one field of it). */
export interface TextTerm {
  value: string;
  /** A quoted phrase matches exactly; a word matches as a word prefix. */
  quoted: boolean;
  /** from: to: (To or Cc) cc: subject:, or null for the whole text. */
  op: 'from' | 'to' | 'cc' | 'subject' | null;
}

/** Text terms joined by OR: a message matches when it matches one of them. */
export interface AnyOf {
  any: TextTerm[];
}

/** What every match meets in its text: a term, or terms joined by OR. */
export type TextClause = TextTerm | AnyOf;

/** The terms of a clause, one of which must match. */
const alternatives = (c: TextClause): TextTerm[] => ('any' in c ? c.any : [c]);

/** A condition of a query on a message's own columns and links, not on its text. */
export type SearchCondition = { negated: boolean } & (
  | { on: 'label'; label: string }
  | { on: 'unread'; unread: boolean }
  | { on: 'attachment' }
  | { on: 'direction'; direction: string }
  /** Created before the day, or from the day on (YYYY-MM-DD). */
  | { on: 'before' | 'after'; day: string }
  /** Conditions joined by OR: one of them. */
  | { on: 'any'; of: SearchCondition[] }
);

/**
 * A parsed query. Text terms stay terms: each engine's full-text index words them its own way
 * (SQLite FTS5, PostgreSQL tsvector); the conditions are the same SQL on both engines.
 */
export interface SearchQuery {
  /** Every positive text clause: the messages matching them all in their text (ranked). */
  positive: TextClause[];
  /** The positive clauses with plain words and phrases: each may match in an attachment filename instead. */
  words: TextClause[];
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
/** One inbox, the whole account, or the inboxes of a key limited to several. */
export type ListScope = { inboxId: string } | { accountId: string } | { inboxIds: readonly string[] };

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
  const [column, value] = scopeCondition(scope);
  const parsed = f.search;
  const rest = restOf(f, dialect, isRanked(f));
  if (parsed && isRanked(f)) {
    const text = dialect === 'sqlite' ? textSqlite(parsed, column, value) : textPostgres(parsed, column, value);
    return { from: text.from, where: [...text.where, ...rest.where].join(' AND '), params: [...text.params, ...rest.params], order: text.order, threadColumn: 'm.thread_id' };
  }
  if (f.label !== undefined) {
    return {
      from: 'message_labels l JOIN messages m ON m.id = l.message_id',
      where: [column('l'), 'l.label = ?', ...rest.where].join(' AND '),
      params: [value, f.label, ...rest.params],
      order: 'l.created_at DESC, l.message_id DESC',
      threadColumn: 'l.thread_id',
    };
  }
  return { from: 'messages m', where: [column('m'), ...rest.where].join(' AND '), params: [value, ...rest.params], order: 'm.created_at DESC, m.id DESC', threadColumn: 'm.thread_id' };
}

/** A search with text terms: ordered by relevance, and so bounded by the cap (listSearchBound). */
export const isRanked = (f: MatchFilters) => (f.search?.positive.length ?? 0) > 0;

/** The scope's condition on a table aliased `t` (one `?`), and its parameter; several inboxes are one JSON array. */
type ScopeMatch = (t: string) => string;
export function scopeCondition(scope: ListScope): [match: ScopeMatch, value: string] {
  if ('inboxIds' in scope) return [(t) => `${t}.inbox_id IN (SELECT value FROM json_each(?))`, JSON.stringify(scope.inboxIds)];
  return 'inboxId' in scope ? [(t) => `${t}.inbox_id = ?`, scope.inboxId] : [(t) => `${t}.account_id = ?`, scope.accountId];
}

/** Every condition of `f` but the text terms and the scope, on `m`: the same for every way of matching. */
function restOf(f: MatchFilters, dialect: Dialect, ranked: boolean, excludes = true): { where: string[]; params: unknown[] } {
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
  } else {
    // Held mail is listed only when asked for (src/domain/screening/hold.ts).
    where.push(`m.status <> 'held'`);
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
  for (const t of excludes ? p.exclude : []) {
    if (dialect === 'sqlite') {
      where.push('m.rowid NOT IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)');
      params.push(fts5(t));
    } else {
      const c = tsCondition(t);
      where.push(`NOT (${c.sql})`);
      params.push(...c.params);
    }
  }
  return { where, params };
}

// --- bounded searches -------------------------------------------------------------------------
//
// Ranking and counting every match costs what the matches number: a common word in a million
// messages is a hundred thousand rows to rank and count. A search with text terms therefore
// takes its `cap` + 1 newest matches, newest first, with their rank, and no more: FTS5 walks a
// term's rowids in descending order and stops at the limit (PostgreSQL walks messages by
// created_at, or sorts the GIN index's matches). Up to `cap` it ranks them all, as before; past
// it the `cap` newest are ranked and the older follow newest first (docs/api.md "Search at
// scale"). The matches come from "arms", each a query every row of which matches and whose
// union is every match: the messages matching every term in their text, and, when the query
// has plain words, those with a filename matching one of them.

/**
 * Where a message stands in the order messages were stored, and its id: on SQLite its rowid
 * (one writer at a time: the insert order), on PostgreSQL its created_at, the id breaking ties.
 */
type MatchKey = [position: number | string, id: string];

/** A match: where it stands newest first, its id, and what orders it in a ranked list. */
interface Match {
  key: MatchKey;
  createdAt: string;
  /** 0: every term is in the text; 1: a word only in a filename (those come after). */
  group: number;
  /** Lower first: FTS5's bm25 on SQLite, minus ts_rank on PostgreSQL (0 without plain words). */
  rank: number | null;
}

type MatchTuple = [position: number | string, id: string, createdAt: string, group: number, rank: number | null];

/** Descending: the greater first. */
const desc = (x: number | string, y: number | string) => (x === y ? 0 : x < y ? 1 : -1);
const byNewest = (a: Match, b: Match) => desc(a.key[0], b.key[0]) || desc(a.key[1], b.key[1]);
/** The order of a ranked list (matchMessages' `order`): text matches first, best rank, then newest. */
const byRank = (a: Match, b: Match) => a.group - b.group || (a.rank ?? 0) - (b.rank ?? 0) || desc(a.createdAt, b.createdAt) || desc(a.key[1], b.key[1]);

/**
 * One arm as SQL: its newest `n` matches older than `below` (when given), newest first, as
 * MatchTuples. With `prefetch`, its rows are read first and the arm's first parameter is their
 * first column, comma-separated (none: the arm has no match).
 */
type ArmSql = ((n: number, below?: MatchKey) => { sql: string; params: unknown[] }) & { prefetch?: { sql: string; params: unknown[] } };

function armsOf(scope: ListScope, f: MatchFilters, dialect: Dialect): ArmSql[] {
  const [column, value] = scopeCondition(scope);
  const p = f.search!;
  const rest = restOf(f, dialect, true);
  if (dialect === 'sqlite') {
    const q = toFts5(p);
    const arm =
      (select: string, from: string, rowid: string, where: string[], params: unknown[], others = rest): ArmSql =>
      (n, below) => ({
        sql: `SELECT ${select} FROM ${from} WHERE ${[...where, ...others.where, ...(below ? [`${rowid} < ?`] : [])].join(' AND ')} ORDER BY ${rowid} DESC LIMIT ?`,
        params: [...params, ...others.params, ...(below ? [below[0]] : []), n],
      });
    // CROSS JOIN keeps FTS5 the outer loop: its descending rowid order needs no sort, and bm25
    // is computed for the rows taken only. Excluded terms go into the MATCH (FTS5's NOT steps
    // through both lists together) rather than a NOT IN that reads the excluded term's whole
    // list; they add nothing to bm25 (no hits), so the rank is the same.
    const match = [`(${q.match})`, ...p.exclude.map((t) => `(${fts5(t)})`)].join(' NOT ');
    const arms = [
      arm(
        'f.rowid, m.id, m.created_at, 0, f.rank',
        'messages_fts f CROSS JOIN messages m ON m.rowid = f.rowid',
        'f.rowid',
        ['f.messages_fts MATCH ?', column('m')],
        [match, value],
        restOf(f, dialect, true, false),
      ),
    ];
    if (q.words.length) {
      const anyWord = q.words.map((w) => w.file).join(' OR ');
      const where = [column('m')];
      const params: unknown[] = [anyWord, anyWord, value];
      // Per row, not per query: FTS5 seeks the rowid in the term's list.
      const inText = 'EXISTS (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? AND rowid = m.rowid)';
      for (const w of q.words) {
        where.push(`(${inText} OR ${FILENAME_MATCH})`);
        params.push(w.fts, w.file, w.file);
      }
      if (q.opsMatch) {
        where.push(inText);
        params.push(q.opsMatch);
      }
      arms.push(arm('DISTINCT m.rowid, m.id, m.created_at, 1, NULL', `(${FILENAME_MESSAGES}) fx CROSS JOIN messages m ON m.id = fx.message_id`, 'm.rowid', where, params));
    }
    return arms;
  }
  const plain = plainTsquery(p);
  // The rank is computed on the rows taken, outside the ordered scan.
  const arm =
    (where: string[], params: unknown[]): ArmSql =>
    (n, below) => ({
      sql: `${PLAN_EACH_TIME}SELECT m.created_at, m.id, m.created_at, ${plain ? `CASE WHEN m.fts @@ fq.q THEN 0 ELSE 1 END, -${PG_RANK}` : '0, 0'}
        FROM (SELECT m.id FROM messages m WHERE ${[...where, ...rest.where, ...(below ? ['(m.created_at, m.id) < (?, ?)'] : [])].join(' AND ')} ORDER BY m.created_at DESC, m.id DESC LIMIT ?) s
        JOIN messages m ON m.id = s.id${plain ? " CROSS JOIN (SELECT to_tsquery('mailroom', ?) AS q) fq" : ''}`,
      params: [...params, ...rest.params, ...(below ?? []), n, ...(plain ? [plain] : [])],
    });
  const inText = p.positive.map(tsCondition);
  const arms = [arm([column('m'), ...inText.map((c) => c.sql)], [value, ...inText.flatMap((c) => c.params)])];
  if (plain) {
    const text = textPostgres(p, column, value);
    const anyWord = p.words.map((c) => `(${tsPlain(c)})`).join(' | ');
    // The messages with a matching filename are looked up first and given by id: in one
    // statement, PostgreSQL's planner hashes them against a scan of every message of the scope.
    // textPostgres' first parameter is the ranking tsquery of its FROM, not used here.
    const byFilename: ArmSql = arm(["m.id = ANY(string_to_array(?, ','))", ...text.where], text.params.slice(1));
    byFilename.prefetch = { sql: `SELECT DISTINCT x.message_id FROM (${PG_FILENAME_MESSAGES}) x`, params: [anyWord, anyWord] };
    arms.push(byFilename);
  }
  return arms;
}

/** The `n` newest matches of a ranked search, older than `below` when given, newest first. */
async function listNewestMatches(db: Db, scope: ListScope, f: MatchFilters, n: number, below?: MatchKey): Promise<Match[]> {
  const found = new Map<string, Match>();
  for (const arm of armsOf(scope, f, dialectOf(db))) {
    const lead: unknown[] = [];
    if (arm.prefetch) {
      const ids = await rawRows<[string]>(db, arm.prefetch.sql, arm.prefetch.params);
      if (!ids.length) continue;
      lead.push(ids.map(([id]) => id).join(','));
    }
    const { sql, params } = arm(n, below);
    for (const [position, id, createdAt, group, rank] of await rawRows<MatchTuple>(db, sql, [...lead, ...params])) {
      // A message in both arms keeps the first (text) arm's rank.
      if (!found.has(id)) found.set(id, { key: [position, id], createdAt, group: Number(group), rank: rank === null ? null : Number(rank) });
    }
  }
  return [...found.values()].sort(byNewest).slice(0, n);
}

/** A page of a search's message ids, and how many match: exactly up to `cap`, else `cap` and `more`. */
export interface SearchPage {
  ids: string[];
  total: number;
  more: boolean;
}

/**
 * A page of a ranked search (isRanked): its `cap` newest matches by rank (matchMessages' order),
 * then, past `cap`, the older ones newest first.
 */
export async function listRankedSearchPage(db: Db, scope: ListScope, f: MatchFilters, limit: number, offset: number, cap: number): Promise<SearchPage> {
  const found = await listNewestMatches(db, scope, f, cap + 1);
  const more = found.length > cap;
  const ranked = found.slice(0, cap).sort(byRank);
  const ids = ranked.slice(offset, offset + limit).map((m) => m.key[1]);
  if (more && offset + limit > cap) {
    const older = await listNewestMatches(db, scope, f, offset + limit - cap, found[cap - 1].key);
    ids.push(...older.slice(Math.max(0, offset - cap)).map((m) => m.key[1]));
  }
  return { ids, total: more ? cap : found.length, more };
}

/** How many messages of `scope` pass `f`, counted up to `cap` + 1: the count, or `cap` and `more`. */
export async function countMatchesUpTo(db: Db, scope: ListScope, f: MatchFilters, cap: number): Promise<{ total: number; more: boolean }> {
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
    case 'any': {
      const { where, params } = conditionsSql(c.of);
      return [where.map((sql) => `(${sql})`).join(' OR '), ...params];
    }
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
  /** The positive clauses with plain words: each as an FTS5 expression (`fts`) and an attachments_fts one of its plain words (`file`). */
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
  return (
    text
      .normalize('NFD')
      .replace(/\p{M}+/gu, '')
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? []
  );
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

/** An FTS5 expression for a text clause: its terms joined by OR. */
function fts5Clause(c: TextClause): string {
  const terms = alternatives(c);
  return terms.length === 1 ? fts5(terms[0]) : `(${terms.map((t) => `(${fts5(t)})`).join(' OR ')})`;
}

/** An attachments_fts expression for the plain words and phrases of a clause, joined by OR. */
const filenameClause = (c: TextClause) =>
  alternatives(c)
    .filter((t) => !t.op)
    .map((t) => filenameTerm(t.value, !t.quoted))
    .join(' OR ');

/** The positive text clauses as FTS5 expressions over messages_fts and attachments_fts (the SQLite engine). */
function toFts5(p: SearchQuery): Fts5Query {
  const ops = p.positive.filter((c) => !p.words.includes(c));
  return {
    match: p.positive.map(fts5Clause).join(' AND '),
    words: p.words.map((c) => ({ fts: fts5Clause(c), file: filenameClause(c) })),
    opsMatch: ops.length ? ops.map(fts5Clause).join(' AND ') : null,
  };
}

/** The text part of a search on SQLite, ranked by FTS5's bm25 (`rank`), then newest. */
function textSqlite(p: SearchQuery, column: ScopeMatch, value: unknown): { from: string; order: string; where: string[]; params: unknown[] } {
  const search = toFts5(p);
  if (!search.words.length) {
    return {
      from: 'messages_fts f JOIN messages m ON m.rowid = f.rowid',
      where: ['f.messages_fts MATCH ?', column('m')],
      params: [search.match, value],
      order: 'f.rank, m.created_at DESC, m.id DESC',
    };
  }
  // Words may match in the text or in attachment filenames: the candidates are the messages
  // matching every term in the text (ranked) and those with a filename matching any word
  // (unranked, after the ranked ones); each word is then checked on its own. CROSS JOIN makes
  // SQLite start from the few matching attachments, not scan the inbox's messages.
  const anyWord = search.words.map((w) => w.file).join(' OR ');
  const where = [column('m')];
  const params: unknown[] = [search.match, anyWord, anyWord, value, value];
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
        SELECT rowid AS r, rank FROM messages_fts WHERE messages_fts MATCH ?
        UNION ALL SELECT fm.rowid, NULL FROM (${FILENAME_MESSAGES}) fx CROSS JOIN messages fm ON fm.id = fx.message_id WHERE ${column('fm')}
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

/** Tsqueries joined by OR (|). */
const tsAny = (queries: string[]) => (queries.length === 1 ? queries[0] : queries.map((q) => `(${q})`).join(' | '));

/** The SQL condition a text clause puts on `m`, and its parameters: one tsquery per column (fts, fts_cc) its terms are in. */
function tsCondition(c: TextClause): { sql: string; params: string[] } {
  const parts: string[] = [];
  const params: string[] = [];
  for (const [column, terms] of [
    ['m.fts', alternatives(c).filter((t) => t.op !== 'cc')],
    ['m.fts_cc', alternatives(c).filter((t) => t.op === 'cc')],
  ] as const) {
    if (!terms.length) continue;
    parts.push(`${column} @@ to_tsquery('mailroom', ?)`);
    params.push(tsAny(terms.map((t) => tsquery(t.value, t.quoted, t.op ? TS_WEIGHTS[t.op] : '')!)));
  }
  return { sql: parts.length === 1 ? parts[0] : `(${parts.join(' OR ')})`, params };
}

/** The tsquery of the plain words and phrases of a clause (what may match a filename). */
const tsPlain = (c: TextClause) => tsAny(alternatives(c).flatMap((t) => (t.op ? [] : [tsquery(t.value, t.quoted)!])));

/** Messages (`m`) with an attachment whose filename matches (two parameters: the tsquery, twice). */
const PG_FILENAME_MESSAGES =
  "SELECT qa.message_id FROM attachments qa WHERE qa.fts @@ to_tsquery('mailroom', ?) AND qa.message_id IS NOT NULL " +
  "UNION ALL SELECT qm.message_id FROM attachments qf JOIN message_attachments qm ON qm.attachment_id = qf.id WHERE qf.fts @@ to_tsquery('mailroom', ?)";
const PG_FILENAME_MATCH = `m.id IN (${PG_FILENAME_MESSAGES})`;

/**
 * The text part of a search on PostgreSQL: every positive term a condition on `m`, a plain word
 * met in an attachment filename too; ranked by ts_rank of the plain words, messages found
 * through a filename alone after the others. Undefined when the query has no positive text term.
 */
function textPostgres(p: SearchQuery, column: ScopeMatch, value: unknown): { from: string; order: string; where: string[]; params: unknown[] } {
  const plain = plainTsquery(p);
  const where = [column('m')];
  const params: unknown[] = plain ? [plain, value] : [value];
  for (const t of p.positive) {
    const c = tsCondition(t);
    if (!p.words.includes(t)) {
      where.push(c.sql);
      params.push(...c.params);
    } else {
      const file = tsPlain(t);
      where.push(`(${c.sql} OR ${PG_FILENAME_MATCH})`);
      params.push(...c.params, file, file);
    }
  }
  if (!plain) return { from: 'messages m', order: 'm.created_at DESC, m.id DESC', where, params };
  return {
    from: "(SELECT to_tsquery('mailroom', ?) AS q) fq CROSS JOIN messages m",
    order: `(m.fts @@ fq.q) DESC, ${PG_RANK} DESC, m.created_at DESC, m.id DESC`,
    where,
    params,
  };
}

/**
 * The tsquery of the clauses with plain words (what ranks), or null when there are none. An
 * OR's operator terms rank by their field's weight (cc: as To and Cc, the weight they share).
 */
function plainTsquery(p: SearchQuery): string | null {
  const rankOf = (t: TextTerm) => tsquery(t.value, t.quoted, t.op ? TS_WEIGHTS[t.op] || 'C' : '')!;
  const plain = p.words.map((c) => `(${tsAny(alternatives(c).map(rankOf))})`);
  return plain.length ? plain.join(' & ') : null;
}

// Every field counts alike (FTS5's bm25 does not weigh columns either); the weights only tell
// the fields apart for from: to: subject:.
const PG_RANK = "ts_rank('{1,1,1,1}', m.fts, fq.q)";
