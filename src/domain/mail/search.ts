// Search: the Gmail-style query language of `q` (PRODUCT.md "Reading state, labels, search"),
// parsed into terms and conditions that the repository words for each engine's full-text index
// (src/store/repo/message-search.ts: SQLite FTS5, PostgreSQL tsvector).
//
//   words (all must match, as word prefixes)   "a phrase"   -term (negation, also -op:value)
//   from:  to: (To or Cc)  cc:  subject:  label:  is:unread  is:read  has:attachment
//   in:inbound  in:outbound  before:YYYY-MM-DD (earlier days)  after:YYYY-MM-DD (that day on)
//   filename: (an attachment's filename, word prefixes)
//
// Plain words and phrases also match attachment filenames (PRODUCT.md: full-text over … attachment
// filenames): a word is found in the message text OR in the filenames of the message's
// attachments, its own or, when sent, the uploads it carries.
//
// Errors are 400 INVALID_QUERY naming the position (1-based character) and what was expected there.
import { AppError } from '../errors.ts';
import type { SearchCondition, SearchQuery, TextTerm } from '../../store/repo/message-search.ts';
import { LABEL_PATTERN, LABEL_RULE } from './labels.ts';

/** A parsed query, and its text terms (the repository's types: it words them for each engine). */
export type { SearchQuery as ParsedQuery, TextTerm } from '../../store/repo/message-search.ts';

/** Longest `q` accepted (characters). */
export const MAX_QUERY_LENGTH = 1000;

/** The operators (`op:value`); any other `word:` is text. */
const OPERATORS = ['from', 'to', 'cc', 'subject', 'label', 'is', 'has', 'in', 'before', 'after', 'filename'];

const invalid = (pos: number, expected: string, found: string) =>
  new AppError('INVALID_QUERY', `\`q\` at position ${pos + 1}: expected ${expected}, found ${found}`);

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
    if (op && OPERATORS.includes(op[1].toLowerCase())) {
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

/** Parses `q`; throws 400 INVALID_QUERY with the position and what was expected. */
export function parseSearch(q: string): SearchQuery {
  if (q.length > MAX_QUERY_LENGTH) throw invalid(MAX_QUERY_LENGTH, `at most ${MAX_QUERY_LENGTH} characters`, `${q.length}`);
  const out: SearchQuery = { positive: [], words: [], exclude: [], filenames: [], conditions: [] };
  const cond = (c: SearchCondition) => out.conditions.push(c);
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
        cond({ on: 'label', label, negated: t.negated });
        break;
      }
      case 'is': {
        const v = t.value.toLowerCase();
        if (v !== 'unread' && v !== 'read') throw invalid(t.valuePos, '`unread` or `read` after `is:`', found);
        cond({ on: 'unread', unread: v === 'unread', negated: t.negated });
        break;
      }
      case 'has': {
        if (t.value.toLowerCase() !== 'attachment') throw invalid(t.valuePos, '`attachment` after `has:`', found);
        cond({ on: 'attachment', negated: t.negated });
        break;
      }
      case 'in': {
        const v = t.value.toLowerCase();
        if (v !== 'inbound' && v !== 'outbound') throw invalid(t.valuePos, '`inbound` or `outbound` after `in:`', found);
        cond({ on: 'direction', direction: v, negated: t.negated });
        break;
      }
      case 'before':
      case 'after': {
        if (!isDate(t.value)) throw invalid(t.valuePos, `a date YYYY-MM-DD after \`${t.op}:\``, found);
        cond({ on: t.op, day: t.value, negated: t.negated });
        break;
      }
    }
  }
  if (!out.positive.length && !out.exclude.length && !out.filenames.length && !out.conditions.length) {
    throw invalid(0, 'a search term with letters or digits', JSON.stringify(q.trim()));
  }
  return out;
}
