// Search: the Gmail-style query language of `q` (PRODUCT.md "Reading state, labels, search"),
// parsed into terms and conditions that the repository words for each engine's full-text index
// (src/store/repo/message-search.ts: SQLite FTS5, PostgreSQL tsvector).
//
//   words (all must match, as word prefixes)   "a phrase"   -term (negation, also -op:value)
//   a OR b (one of them)
//   from:  to: (To or Cc)  cc:  subject:  label:  is:unread  is:read  has:attachment
//   in:inbound  in:outbound  before:YYYY-MM-DD (earlier days)  after:YYYY-MM-DD (that day on)
//   filename: (an attachment's filename, word prefixes)
//
// Plain words and phrases also match attachment filenames (PRODUCT.md: full-text over … attachment
// filenames): a word is found in the message text OR in the filenames of the message's
// attachments, its own or, when sent, the uploads it carries.
//
// Errors are 400 INVALID_QUERY naming the position (1-based character) and what was expected there.
//
// Bounded cost (PRODUCT.md "Bounded cost"): at most `[limits] search_terms` terms (a repeated
// term counts once; each word of a phrase, or of a hyphenated word, counts, since each is one
// more index lookup), and a word prefix has at least 2 characters (a one-letter prefix walks a
// good part of the index). An unknown `op:value` (`older_than:7d`) is refused: it would
// otherwise silently find nothing.
//
// `a OR b` (upper case, unquoted): one of them must match; OR binds tighter than the implicit
// AND (`x a OR b` is x and (a or b)). Its sides are all text (words, "phrases", from: to: cc:
// subject:) or all conditions (label: is: has: in: before: after:); every term of every side
// counts towards `search_terms`. A negated side, filename:, a mix, and an `OR` missing a side
// are refused.
import type { AppContext } from '../../context.ts';
import type { Db } from '../../store/client.ts';
import { AppError } from '../errors.ts';
import { SearchTimeoutError, searchReaderOf } from '../../store/search-reader.ts';
import type { SearchCondition, SearchQuery, TextTerm } from '../../store/repo/message-search.ts';
import { LABEL_PATTERN, LABEL_RULE } from './labels.ts';

/** A parsed query, and its text terms (the repository's types: it words them for each engine). */
export type { SearchQuery as ParsedQuery, TextTerm } from '../../store/repo/message-search.ts';

/** Longest `q` accepted (characters). */
export const MAX_QUERY_LENGTH = 1000;

/** The operators (`op:value`); any other `word:` is text. */
const OPERATORS = ['from', 'to', 'cc', 'subject', 'label', 'is', 'has', 'in', 'before', 'after', 'filename'];

/** Shortest word prefix: a one-letter prefix expands to a good part of the index. */
const MIN_PREFIX = 2;

const invalid = (pos: number, expected: string, found: string) => new AppError('INVALID_QUERY', `\`q\` at position ${pos + 1}: expected ${expected}, found ${found}`);

/** True when the text has something the FTS tokenizer keeps (letters or digits). */
const hasToken = (text: string) => /[\p{L}\p{N}]/u.test(text);

function isDate(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().startsWith(s);
}

/** The `op` of an `OR` between two terms (upper case, unquoted, not negated). */
const OR = 'OR';

interface Term {
  pos: number;
  negated: boolean;
  op: string | null;
  value: string;
  quoted: boolean;
  /** Where the value starts (for errors about it). */
  valuePos: number;
}

/**
 * Splits the query into terms: [-][op:](word | "phrase"), and `OR`s; `{a b c}` (Gmail's other
 * way to write OR) as `a OR b OR c`.
 */
function tokenize(q: string): Term[] {
  const terms: Term[] = [];
  let i = 0;
  /** Where an open `{` is, and how many terms it has so far. */
  let brace: { pos: number; terms: number } | null = null;
  const push = (t: Term, closes: boolean) => {
    if (brace && brace.terms++) terms.push({ pos: t.pos, negated: false, op: OR, value: 'OR', quoted: false, valuePos: t.pos });
    terms.push(t);
    if (closes) brace = null;
  };
  /** A value; `closes` when it ends an open `{…}` (its `}` not part of the value). */
  const readValue = (start: number): { value: string; quoted: boolean; end: number; closes: boolean } => {
    if (q[start] === '"') {
      const close = q.indexOf('"', start + 1);
      if (close === -1) throw invalid(q.length, 'a closing `"`', 'the end of the query');
      return { value: q.slice(start + 1, close), quoted: true, end: close + 1, closes: false };
    }
    let end = start;
    while (end < q.length && !/\s/.test(q[end])) end++;
    const closes = brace !== null && q[end - 1] === '}' && end - 1 > start;
    return { value: q.slice(start, closes ? end - 1 : end), quoted: false, end, closes };
  };
  while (i < q.length) {
    if (/\s/.test(q[i])) {
      i++;
      continue;
    }
    const pos = i;
    if (q[i] === '{') {
      if (brace) throw invalid(i, 'a search term or `}` (braces do not nest)', '`{`');
      brace = { pos: i++, terms: 0 };
      continue;
    }
    if (q[i] === '}' && brace) {
      if (!brace.terms) throw invalid(i, 'a search term in `{…}`', '`}`');
      brace = null;
      i++;
      continue;
    }
    let negated = false;
    if (q[i] === '-') {
      negated = true;
      i++;
      if (i >= q.length || /\s/.test(q[i])) throw invalid(i, 'a term after `-`', i >= q.length ? 'the end of the query' : 'a space');
      if (q[i] === '{') throw invalid(i, 'a term after `-` (`-{…}` is not supported: negate each term)', '`{`');
    }
    if (!negated && /^OR(\s|$)/.test(q.slice(i))) {
      // Inside braces every term is an alternative already.
      if (!brace) terms.push({ pos, negated, op: OR, value: 'OR', quoted: false, valuePos: pos });
      i += 2;
      continue;
    }
    const op = /^([a-z][a-z_]*):/i.exec(q.slice(i));
    if (op && !OPERATORS.includes(op[1].toLowerCase()) && i + op[0].length < q.length && !/\s/.test(q[i + op[0].length])) {
      throw invalid(i, `an operator (${OPERATORS.map((o) => `${o}:`).join(' ')}) or a word; "quote" text with a colon`, `\`${op[0]}\``);
    }
    if (op && OPERATORS.includes(op[1].toLowerCase())) {
      const valuePos = i + op[0].length;
      if (valuePos >= q.length || /\s/.test(q[valuePos])) throw invalid(valuePos, `a value after \`${op[0]}\``, valuePos >= q.length ? 'the end of the query' : 'a space');
      const v = readValue(valuePos);
      push({ pos, negated, op: op[1].toLowerCase(), value: v.value, quoted: v.quoted, valuePos }, v.closes);
      i = v.end;
      continue;
    }
    // Anything else (a `word:` followed by a space included) is text.
    const v = readValue(i);
    push({ pos, negated, op: null, value: v.value, quoted: v.quoted, valuePos: i }, v.closes);
    i = v.end;
  }
  if (brace) throw invalid(q.length, `a closing \`}\` for the \`{\` at position ${brace.pos + 1}`, 'the end of the query');
  return terms;
}

/** Words of a value as the FTS tokenizers see them (letter and digit runs). */
const wordsOf = (value: string) => value.match(/[\p{L}\p{N}]+/gu) ?? [];

/**
 * Parses `q`; throws 400 INVALID_QUERY with the position and what was expected. `maxTerms`
 * (`[limits] search_terms`) bounds the distinct terms, each word of a phrase counted.
 */
export function parseSearch(q: string, maxTerms = Infinity): SearchQuery {
  if (q.length > MAX_QUERY_LENGTH) throw invalid(MAX_QUERY_LENGTH, `at most ${MAX_QUERY_LENGTH} characters`, `${q.length}`);
  const out: SearchQuery = { positive: [], words: [], exclude: [], filenames: [], conditions: [] };
  const clauses = orClauses(tokenize(q), q.length);
  if (!clauses.length) throw invalid(0, 'a search term', 'an empty query');
  const seen = new Set<string>();
  let counted = 0;
  for (const alternatives of clauses) {
    // A repeated term (or OR of the same terms) adds nothing to the result: it is dropped, and
    // not counted; so is a repeat within an OR.
    const keys = new Map(alternatives.map((t) => [JSON.stringify([t.negated, t.op, t.quoted, t.value.toLowerCase()]), t]));
    const key = [...keys.keys()].sort().join();
    if (seen.has(key)) continue;
    seen.add(key);
    const clause = [...keys.values()];
    // Every term of every alternative is one more index lookup: each counts.
    for (const t of clause) {
      counted += checkWords(t);
      if (counted > maxTerms) throw invalid(t.pos, `at most ${maxTerms} terms (a repeated term counts once, each word of a phrase and each side of an OR counts)`, `more`);
    }
    if (clause.length > 1) addAlternatives(out, clause);
    else addItem(out, readTerm(clause[0]));
  }
  if (!out.positive.length && !out.exclude.length && !out.filenames.length && !out.conditions.length) {
    throw invalid(0, 'a search term with letters or digits', JSON.stringify(q.trim()));
  }
  return out;
}

/**
 * Groups the terms into clauses, all of which must match: a term alone, or terms joined by
 * `OR`, one of which must match (OR binds tighter than the implicit AND: `x a OR b` is x and
 * (a or b)). An `OR` with no term on one side is refused.
 */
function orClauses(terms: Term[], end: number): Term[][] {
  const clauses: Term[][] = [];
  terms.forEach((t, i) => {
    const prev = terms[i - 1];
    if (t.op !== OR) {
      if (prev?.op === OR) clauses.at(-1)!.push(t);
      else clauses.push([t]);
      return;
    }
    const next = terms[i + 1];
    if (!prev) throw invalid(t.pos, 'a search term before `OR` (`OR` joins two terms: `a OR b`)', '`OR`');
    if (!next || next.op === OR) throw invalid(next ? next.pos : end, 'a search term after `OR` (`OR` joins two terms: `a OR b`)', next ? '`OR`' : 'the end of the query');
    // Parentheses are no grouping here: `(a b) OR c` would silently be a and (b or c).
    const parens = 'a side of `OR` not in parentheses with other terms (they do not group: write `a OR b OR c` or `{a b c}`)';
    if (!prev.quoted && /\)$/.test(prev.value) && !prev.value.startsWith('(')) throw invalid(prev.valuePos + prev.value.length - 1, parens, '`)`');
    if (!next.quoted && next.value.startsWith('(') && !/\)$/.test(next.value)) throw invalid(next.valuePos, parens, '`(`');
  });
  return clauses;
}

/** The number of terms `t` counts for (each word of a text value); applies the prefix rule. */
function checkWords(t: Term): number {
  const isText = t.op === null || ['from', 'to', 'cc', 'subject', 'filename'].includes(t.op);
  const words = isText ? wordsOf(t.value) : [t.value];
  const prefix = words.at(-1);
  if (isText && !t.quoted && prefix !== undefined && [...prefix].length < MIN_PREFIX) {
    // After other words (search-x, j.doe), a short last word is matched whole, not as a prefix.
    if (words.length === 1) throw invalid(t.valuePos, `a word prefix of at least ${MIN_PREFIX} characters (a "quoted" word matches whole)`, JSON.stringify(t.value));
    t.quoted = true;
  }
  return words.length;
}

/** What one term asks for, checked; null for punctuation alone (skipped, as Gmail does). */
type Item = { kind: 'text'; term: TextTerm; negated: boolean } | { kind: 'filename'; value: string; quoted: boolean; negated: boolean } | { kind: 'condition'; condition: SearchCondition };

function readTerm(t: Term): Item | null {
  const found = JSON.stringify(t.value);
  const condition = (c: SearchCondition): Item => ({ kind: 'condition', condition: c });
  switch (t.op) {
    case 'filename':
      if (!hasToken(t.value)) throw invalid(t.valuePos, 'a filename word with letters or digits', t.value ? found : 'an empty phrase');
      return { kind: 'filename', value: t.value, quoted: t.quoted, negated: t.negated };
    case 'label': {
      const label = t.value.toLowerCase();
      if (!LABEL_PATTERN.test(label)) throw invalid(t.valuePos, `a label (${LABEL_RULE})`, found);
      return condition({ on: 'label', label, negated: t.negated });
    }
    case 'is': {
      const v = t.value.toLowerCase();
      if (v !== 'unread' && v !== 'read') throw invalid(t.valuePos, '`unread` or `read` after `is:`', found);
      return condition({ on: 'unread', unread: v === 'unread', negated: t.negated });
    }
    case 'has':
      if (t.value.toLowerCase() !== 'attachment') throw invalid(t.valuePos, '`attachment` after `has:`', found);
      return condition({ on: 'attachment', negated: t.negated });
    case 'in': {
      const v = t.value.toLowerCase();
      if (v !== 'inbound' && v !== 'outbound') throw invalid(t.valuePos, '`inbound` or `outbound` after `in:`', found);
      return condition({ on: 'direction', direction: v, negated: t.negated });
    }
    case 'before':
    case 'after':
      if (!isDate(t.value)) throw invalid(t.valuePos, `a date YYYY-MM-DD after \`${t.op}:\``, found);
      return condition({ on: t.op, day: t.value, negated: t.negated });
    default: {
      // Plain text, from: to: cc: subject:.
      if (!hasToken(t.value)) {
        // Punctuation alone is no word to the tokenizer: skipped like Gmail does, except where
        // it was asked for explicitly (a phrase, an operator's value).
        if (!t.quoted && !t.op) return null;
        throw invalid(t.valuePos, 'a word or a "phrase" with letters or digits', t.value ? found : 'an empty phrase');
      }
      // Words match as prefixes; a quoted phrase matches exactly.
      return { kind: 'text', term: { value: t.value, quoted: t.quoted, op: t.op as TextTerm['op'] }, negated: t.negated };
    }
  }
}

/** Adds a term alone (not in an OR) to the query. */
function addItem(out: SearchQuery, item: Item | null) {
  if (!item) return;
  if (item.kind === 'condition') out.conditions.push(item.condition);
  else if (item.kind === 'filename') out.filenames.push({ value: item.value, quoted: item.quoted, negated: item.negated });
  else {
    const { term, negated } = item;
    (negated ? out.exclude : out.positive).push(term);
    if (!term.op) {
      // …or in an attachment's filename: -word excludes those too.
      if (negated) out.filenames.push({ value: term.value, quoted: term.quoted, negated: true });
      else out.words.push(term);
    }
  }
}

/**
 * Adds terms joined by OR: text terms (words, phrases, from: to: cc: subject:) as one text
 * clause, or conditions (label: is: has: in: before: after:) as one condition. Refused: a
 * negated term, filename:, a mix of text and conditions, punctuation alone. Those would each
 * need a query of their own beside the full-text index's, which drives a search with words.
 */
function addAlternatives(out: SearchQuery, clause: Term[]) {
  const items = clause.map((t) => {
    if (t.negated) throw invalid(t.pos, 'a term that is not negated on either side of `OR` (or in `{…}`)', JSON.stringify(`-${t.op ? `${t.op}:` : ''}${t.value}`));
    if (t.op === 'filename') throw invalid(t.pos, 'a word, a "phrase", from: to: cc: subject: label: is: has: in: before: or after: on either side of `OR` (or in `{…}`)', '`filename:`');
    const item = readTerm(t);
    if (!item) throw invalid(t.valuePos, 'a word or a "phrase" with letters or digits on either side of `OR` (or in `{…}`)', JSON.stringify(t.value));
    return item;
  });
  const texts = items.flatMap((item) => (item.kind === 'text' ? [item.term] : []));
  const conditions = items.flatMap((item) => (item.kind === 'condition' ? [item.condition] : []));
  if (texts.length && conditions.length) {
    const t = clause[items.findIndex((item) => item.kind !== items[0].kind)];
    throw invalid(
      t.pos,
      'on either side of `OR` (or in `{…}`) text (words, "phrases", from: to: cc: subject:) or conditions (label: is: has: in: before: after:), not both',
      JSON.stringify(`${t.op ? `${t.op}:` : ''}${t.value}`),
    );
  }
  if (conditions.length) {
    out.conditions.push({ on: 'any', of: conditions, negated: false });
    return;
  }
  const alternatives = { any: texts };
  out.positive.push(alternatives);
  // Plain words and phrases may match in an attachment filename too.
  if (texts.some((t) => !t.op)) out.words.push(alternatives);
}

// --- running a search under its budgets -------------------------------------------------------

/** Searches running per account, per store (one process may serve several in tests). */
const running = new WeakMap<object, Map<string, number>>();

/**
 * Runs the read-only `work` of one search of `accountId` within the search budgets (PRODUCT.md
 * "Bounded cost", docs/security.md): at most `[limits] searches_per_account` at once for the
 * account (the next: 429 RATE_LIMITED), in one of `[limits] concurrent_searches` slots, off the
 * event loop on SQLite, and within `[limits] search_timeout` (past it: 503 SEARCH_TIMEOUT). A
 * search abandoned past its budget counts for its account until its statement has ended, so
 * an account's abandoned searches never hold more than its share of the slots.
 */
export async function runSearch<T>(ctx: AppContext, accountId: string, work: (db: Db) => Promise<T>): Promise<T> {
  const { searches_per_account: perAccount, search_timeout: budget, concurrent_searches: slots } = ctx.config.limits;
  let counts = running.get(ctx.store);
  if (!counts) running.set(ctx.store, (counts = new Map()));
  const now = counts.get(accountId) ?? 0;
  if (now >= perAccount) {
    throw new AppError('RATE_LIMITED', `at most ${perAccount} searches of an account run at once; retry when one has ended`, { retryAfter: 1 });
  }
  counts.set(accountId, now + 1);
  const freed = () => {
    const left = counts.get(accountId)! - 1;
    if (left) counts.set(accountId, left);
    else counts.delete(accountId);
  };
  try {
    return await searchReaderOf(ctx.store, slots).run(Date.now() + budget, work, freed);
  } catch (err) {
    if (!(err instanceof SearchTimeoutError)) throw err;
    const seconds = Math.max(1, Math.ceil(budget / 1000));
    throw new AppError('SEARCH_TIMEOUT', `the search ran past its time budget of ${budget} ms; narrow it (fewer or longer words, a label:, before:/after:) or retry later`, { retryAfter: seconds });
  }
}
