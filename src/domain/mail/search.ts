// Search: the Gmail-style query language of `q` (PRODUCT.md "Reading state, labels, search"),
// parsed into SQL over the FTS5 index messages_fts (migration 0008) and plain columns.
//
//   words (all must match, as word prefixes)   "a phrase"   -term (negation, also -op:value)
//   from:  to: (To or Cc)  cc:  subject:  label:  is:unread  is:read  has:attachment
//   in:inbound  in:outbound  before:YYYY-MM-DD (earlier days)  after:YYYY-MM-DD (that day on)
//   filename: (an attachment's filename, word prefixes)
//
// Plain words and phrases also match attachment filenames (PRODUCT.md: full-text over … attachment
// filenames): a word is found in the message index OR in the filename index attachments_fts
// (migration 0011) of the message's attachments, its own or, when sent, the uploads it carries.
//
// Words are never spliced into SQL or into FTS syntax: each becomes an FTS5 string ("…",
// quotes doubled) and every value is a bound parameter. Errors are 400 INVALID_QUERY naming the
// position (1-based character) and what was expected there.
import { AppError } from '../errors.ts';
import { LABEL_PATTERN, LABEL_RULE } from './labels.ts';

/** A word or phrase of the query, to find in the message text (or one field of it). */
export interface TextTerm {
  value: string;
  /** A quoted phrase matches exactly; a word matches as a word prefix. */
  quoted: boolean;
  /** from: to: cc: subject:, or null for the whole text. */
  op: 'from' | 'to' | 'cc' | 'subject' | null;
}

/**
 * One parsed query. Text terms stay terms: each engine's full-text index words them its own way
 * (SQLite FTS5, PostgreSQL tsvector: src/domain/mail/filters.ts); everything else is SQL on `m`.
 */
export interface ParsedQuery {
  /** Every positive text term: the messages matching them all in their text (ranked). */
  positive: TextTerm[];
  /** The positive plain words and phrases: each may match in an attachment filename instead. */
  words: TextTerm[];
  /** Text terms no result may match. */
  exclude: TextTerm[];
  /** filename: terms, and the filename side of a negated plain word (none may match then). */
  filenames: Array<{ value: string; quoted: boolean; negated: boolean }>;
  /** SQL conditions on messages `m` (the same on both engines), with their parameters in order. */
  where: string[];
  params: unknown[];
}

/** What the SQLite engine runs: FTS5 MATCH expressions. */
export interface Fts5Query {
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

/** Longest `q` accepted (characters). */
export const MAX_QUERY_LENGTH = 1000;

const FTS_COLUMNS: Record<string, string> = {
  from: '{from_address from_name}',
  to: '{to_addresses cc_addresses}',
  cc: '{cc_addresses}',
  subject: '{subject}',
};

const invalid = (pos: number, expected: string, found: string) =>
  new AppError('INVALID_QUERY', `\`q\` at position ${pos + 1}: expected ${expected}, found ${found}`);

/** An FTS5 string for a word or phrase; `prefix` lets the last word match as a prefix. */
const ftsString = (text: string, prefix: boolean) => `"${text.replaceAll('"', '""')}"${prefix ? '*' : ''}`;

/** True when the text has something the FTS tokenizer keeps (letters or digits). */
const hasToken = (text: string) => /[\p{L}\p{N}]/u.test(text);

function isDate(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().startsWith(s);
}

interface Term {
  pos: number;
  negated: boolean;
  op: string | null;
  value: string;
  quoted: boolean;
  /** Where the value starts (for errors about it). */
  valuePos: number;
}

/** Splits the query into terms: [-][op:](word | "phrase"). */
function tokenize(q: string): Term[] {
  const terms: Term[] = [];
  let i = 0;
  const readValue = (start: number): { value: string; quoted: boolean; end: number } => {
    if (q[start] === '"') {
      const close = q.indexOf('"', start + 1);
      if (close === -1) throw invalid(q.length, 'a closing `"`', 'the end of the query');
      return { value: q.slice(start + 1, close), quoted: true, end: close + 1 };
    }
    let end = start;
    while (end < q.length && !/\s/.test(q[end])) end++;
    return { value: q.slice(start, end), quoted: false, end };
  };
  while (i < q.length) {
    if (/\s/.test(q[i])) {
      i++;
      continue;
    }
    const pos = i;
    let negated = false;
    if (q[i] === '-') {
      negated = true;
      i++;
      if (i >= q.length || /\s/.test(q[i])) throw invalid(i, 'a term after `-`', i >= q.length ? 'the end of the query' : 'a space');
    }
    const op = /^([a-z]+):/i.exec(q.slice(i));
    if (op && (op[1].toLowerCase() in FTS_COLUMNS || ['label', 'is', 'has', 'in', 'before', 'after', 'filename'].includes(op[1].toLowerCase()))) {
      const valuePos = i + op[0].length;
      if (valuePos >= q.length || /\s/.test(q[valuePos])) throw invalid(valuePos, `a value after \`${op[0]}\``, valuePos >= q.length ? 'the end of the query' : 'a space');
      const v = readValue(valuePos);
      terms.push({ pos, negated, op: op[1].toLowerCase(), value: v.value, quoted: v.quoted, valuePos });
      i = v.end;
      continue;
    }
    // Anything else (unknown `word:` included) is text, as in Gmail.
    const v = readValue(i);
    terms.push({ pos, negated, op: null, value: v.value, quoted: v.quoted, valuePos: i });
    i = v.end;
  }
  return terms;
}

// --- attachment filenames ------------------------------------------------------------------

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
export const FILENAME_MESSAGES =
  'SELECT qa.message_id FROM attachments_fts qt JOIN attachments qa ON qa.rowid = qt.rowid WHERE attachments_fts MATCH ? AND qa.message_id IS NOT NULL ' +
  'UNION ALL SELECT qm.message_id FROM attachments_fts qt JOIN attachments qf ON qf.rowid = qt.rowid JOIN message_attachments qm ON qm.attachment_id = qf.id WHERE attachments_fts MATCH ?';

/** A message (`m`) with an attachment whose filename matches the term (two parameters: the term, twice). */
export const FILENAME_MATCH = `m.id IN (${FILENAME_MESSAGES})`;

/** Parses `q`; throws 400 INVALID_QUERY with the position and what was expected. */
export function parseSearch(q: string): ParsedQuery {
  if (q.length > MAX_QUERY_LENGTH) throw invalid(MAX_QUERY_LENGTH, `at most ${MAX_QUERY_LENGTH} characters`, `${q.length}`);
  const out: ParsedQuery = { positive: [], words: [], exclude: [], filenames: [], where: [], params: [] };
  const cond = (negated: boolean, sql: string, ...params: unknown[]) => {
    out.where.push(negated ? `NOT (${sql})` : sql);
    out.params.push(...params);
  };
  const terms = tokenize(q);
  if (!terms.length) throw invalid(0, 'a search term', 'an empty query');
  for (const t of terms) {
    const found = JSON.stringify(t.value);
    switch (t.op) {
      case null:
      case 'from':
      case 'to':
      case 'cc':
      case 'subject': {
        if (!hasToken(t.value)) {
          // Punctuation alone is no word to the tokenizer: skipped like Gmail does, except where
          // it was asked for explicitly (a phrase, an operator's value).
          if (!t.quoted && !t.op) continue;
          throw invalid(t.valuePos, 'a word or a "phrase" with letters or digits', t.value ? found : 'an empty phrase');
        }
        // Words match as prefixes; a quoted phrase matches exactly.
        const term: TextTerm = { value: t.value, quoted: t.quoted, op: t.op };
        (t.negated ? out.exclude : out.positive).push(term);
        if (!t.op) {
          // …or in an attachment's filename: -word excludes those too.
          if (t.negated) out.filenames.push({ value: t.value, quoted: t.quoted, negated: true });
          else out.words.push(term);
        }
        break;
      }
      case 'filename': {
        if (!hasToken(t.value)) throw invalid(t.valuePos, 'a filename word with letters or digits', t.value ? found : 'an empty phrase');
        out.filenames.push({ value: t.value, quoted: t.quoted, negated: t.negated });
        break;
      }
      case 'label': {
        const label = t.value.toLowerCase();
        if (!LABEL_PATTERN.test(label)) throw invalid(t.valuePos, `a label (${LABEL_RULE})`, found);
        cond(t.negated, 'EXISTS (SELECT 1 FROM message_labels ql WHERE ql.message_id = m.id AND ql.label = ?)', label);
        break;
      }
      case 'is': {
        const v = t.value.toLowerCase();
        if (v !== 'unread' && v !== 'read') throw invalid(t.valuePos, '`unread` or `read` after `is:`', found);
        cond(t.negated, v === 'unread' ? 'm.unread = 1' : 'm.unread = 0');
        break;
      }
      case 'has': {
        if (t.value.toLowerCase() !== 'attachment') throw invalid(t.valuePos, '`attachment` after `has:`', found);
        cond(
          t.negated,
          'EXISTS (SELECT 1 FROM attachments qa WHERE qa.message_id = m.id) OR EXISTS (SELECT 1 FROM message_attachments qm WHERE qm.message_id = m.id)',
        );
        break;
      }
      case 'in': {
        const v = t.value.toLowerCase();
        if (v !== 'inbound' && v !== 'outbound') throw invalid(t.valuePos, '`inbound` or `outbound` after `in:`', found);
        cond(t.negated, 'm.direction = ?', v);
        break;
      }
      case 'before':
      case 'after': {
        if (!isDate(t.value)) throw invalid(t.valuePos, `a date YYYY-MM-DD after \`${t.op}:\``, found);
        // created_at is ISO 8601 UTC: a day compares as the prefix of its timestamps.
        cond(t.negated, t.op === 'before' ? 'm.created_at < ?' : 'm.created_at >= ?', t.value);
        break;
      }
    }
  }
  if (!out.positive.length && !out.exclude.length && !out.filenames.length && !out.where.length) {
    throw invalid(0, 'a search term with letters or digits', JSON.stringify(q.trim()));
  }
  return out;
}

/** An FTS5 expression for a text term (column filter included). */
const fts5 = (t: TextTerm) => {
  const s = ftsString(t.value, !t.quoted);
  return t.op ? `${FTS_COLUMNS[t.op]} : ${s}` : s;
};

/** The query as FTS5 expressions over messages_fts and attachments_fts (the SQLite engine). */
export function toFts5(p: ParsedQuery): Fts5Query {
  const ops = p.positive.filter((t) => t.op);
  const where = [...p.where];
  const params = [...p.params];
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

// --- PostgreSQL ---------------------------------------------------------------------------------
//
// The PostgreSQL schema (migrations/pg 0004) keeps a tsvector per message, `fts`: subject
// (weight A), from (B), to and cc (C), body (D); `fts_cc` the cc addresses alone; and `fts` of
// each attachment's filename. Text is split at every character that is no letter or digit, as
// FTS5's unicode61 tokenizer does, and accents are removed (unaccent), so both engines find the
// same messages. A term becomes a tsquery: its words in a row (<->), the last one a prefix (:*)
// unless the term is a quoted phrase, restricted to the weights of its field.

const TS_WEIGHTS: Record<NonNullable<TextTerm['op']>, string> = { subject: 'A', from: 'B', to: 'C', cc: '' };

/** A tsquery for a term, or null when it has no word; `weights` restricts it to fields. */
export function tsquery(value: string, quoted: boolean, weights = ''): string | null {
  const words = value.match(/[\p{L}\p{N}]+/gu);
  if (!words) return null;
  return words.map((w, i) => `'${w.replaceAll("'", "''")}'${i === words.length - 1 && !quoted ? ':*' : ':'}${weights}`.replace(/:$/, '')).join(' <-> ');
}

/** The SQL condition a text term puts on `m`, and its parameter. */
export function tsCondition(t: TextTerm): { sql: string; param: string } {
  const column = t.op === 'cc' ? 'm.fts_cc' : 'm.fts';
  return { sql: `${column} @@ to_tsquery('mailroom', ?)`, param: tsquery(t.value, t.quoted, t.op ? TS_WEIGHTS[t.op] : '')! };
}

/** Messages (`m`) with an attachment whose filename matches (two parameters: the tsquery, twice). */
export const PG_FILENAME_MATCH =
  "m.id IN (SELECT qa.message_id FROM attachments qa WHERE qa.fts @@ to_tsquery('mailroom', ?) AND qa.message_id IS NOT NULL " +
  "UNION ALL SELECT qm.message_id FROM attachments qf JOIN message_attachments qm ON qm.attachment_id = qf.id WHERE qf.fts @@ to_tsquery('mailroom', ?))";

