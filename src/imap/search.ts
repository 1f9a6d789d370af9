// SEARCH (RFC 9051 §6.4.4) over a folder: the criteria become a tree; flags, sizes, dates and
// sets are judged here on each message's row, and the text criteria (TEXT, BODY, SUBJECT, FROM,
// TO, CC) are asked of the API's full-text index (src/domain/mail/search.ts), within its search
// budgets, a hundred messages at a time. HEADER of another field reads the message's header.
import type { AppContext } from '../context.ts';
import { AppError } from '../domain/errors.ts';
import { FLAGGED_LABEL, flagsOf, messagesByUid, rawSource, type ImapMessageRow, type ImapUser } from '../domain/imap/mailboxes.ts';
import { idsMatching } from '../domain/mail/message-wait.ts';
import { parseMime } from './mime.ts';
import { resolveSet } from './sequence.ts';
import { utf8, type ImapNode } from './wire.ts';

/** Messages judged per step (rows held at once). */
const BATCH = 100;
/**
 * Deepest nesting of NOT, OR and parentheses: what a command line (imap.max_line_bytes) could
 * nest would overflow the stack of the recursive parse and judgement; real clients nest a few.
 */
const MAX_NESTING = 100;

type Criterion =
  | { k: 'and'; of: Criterion[] }
  | { k: 'or'; a: Criterion; b: Criterion }
  | { k: 'not'; c: Criterion }
  | { k: 'const'; value: boolean }
  | { k: 'flag'; flag: string }
  | { k: 'size'; larger: boolean; n: number }
  | { k: 'date'; op: 'BEFORE' | 'ON' | 'SINCE'; day: string }
  | { k: 'set'; uid: boolean; set: string }
  | { k: 'text'; q: string }
  | { k: 'header'; name: string; value: string };

const bad = (what: string): never => {
  throw new AppError('VALIDATION_ERROR', what);
};

const setOrBad = (named: number[] | string): number[] => (typeof named === 'string' ? bad(named) : named);

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];

/** "1-Feb-2026" → "2026-02-01". */
function day(text: string): string {
  const m = /^"?(\d{1,2})-([A-Za-z]{3})-(\d{4})"?$/.exec(text);
  const month = m ? MONTHS.indexOf(m[2].toUpperCase()) : -1;
  if (!m || month === -1) return bad(`not a date: ${text}`);
  return `${m[3]}-${String(month + 1).padStart(2, '0')}-${m[1].padStart(2, '0')}`;
}

/** A search string as a `q` term of the API's query language: a field operator, a word prefix or a phrase. */
function term(op: string | null, value: string): string {
  const v = value.trim();
  if (!v) return '';
  const plain = /^[\p{L}\p{N}]+$/u.test(v);
  return `${op ? `${op}:` : ''}${plain ? v : `"${v.replace(/"/g, ' ')}"`}`;
}

const TEXT_FIELDS: Record<string, string | null> = { TEXT: null, BODY: null, SUBJECT: 'subject', FROM: 'from', TO: 'to', CC: 'cc' };
const HEADER_FIELDS: Record<string, string> = { subject: 'subject', from: 'from', to: 'to', cc: 'cc' };

/** Reads criteria from `nodes` (consumed from the front) until it is empty: their AND. */
export function parseCriteria(nodes: ImapNode[], depth = 0): Criterion {
  if (depth > MAX_NESTING) bad(`SEARCH criteria nest deeper than ${MAX_NESTING}`);
  const queue = [...nodes];
  const of: Criterion[] = [];
  // CHARSET UTF-8 / US-ASCII may open the criteria.
  const first = queue[0];
  if (first && !Array.isArray(first) && first.value?.toUpperCase() === 'CHARSET') {
    queue.shift();
    const cs = String((queue.shift() as { value?: string } | null)?.value ?? '').toUpperCase();
    if (cs !== 'UTF-8' && cs !== 'US-ASCII') throw new AppError('VALIDATION_ERROR', `[BADCHARSET (UTF-8 US-ASCII)] charset ${cs} is not supported`);
  }
  while (queue.length) of.push(one(queue, depth));
  if (!of.length) bad('SEARCH needs a criterion');
  return of.length === 1 ? of[0] : { k: 'and', of };
}

function one(queue: ImapNode[], depth: number): Criterion {
  if (depth > MAX_NESTING) bad(`SEARCH criteria nest deeper than ${MAX_NESTING}`);
  const node = queue.shift();
  if (Array.isArray(node)) return parseCriteria(node, depth + 1);
  if (!node) return bad('unexpected NIL in SEARCH');
  const arg = (): string => {
    const n = queue.shift();
    if (!n || Array.isArray(n)) return bad('SEARCH criterion without its argument');
    return utf8(String(n.value));
  };
  const key = String(node.value).toUpperCase();
  if (node.type === 'SEQUENCE' || /^[\d*][\d*:,]*$/.test(key) || key === '$') return { k: 'set', uid: key === '$', set: key };
  if (key in TEXT_FIELDS) return { k: 'text', q: term(TEXT_FIELDS[key], arg()) };
  switch (key) {
    case 'ALL':
    case 'OLD':
    case 'UNANSWERED':
    case 'UNDRAFT':
      return { k: 'const', value: true };
    case 'ANSWERED':
    case 'DRAFT':
    case 'RECENT':
      return { k: 'const', value: false };
    case 'NEW':
      return { k: 'const', value: false };
    case 'SEEN':
      return { k: 'flag', flag: '\\Seen' };
    case 'UNSEEN':
      return { k: 'not', c: { k: 'flag', flag: '\\Seen' } };
    case 'FLAGGED':
      return { k: 'flag', flag: '\\Flagged' };
    case 'UNFLAGGED':
      return { k: 'not', c: { k: 'flag', flag: '\\Flagged' } };
    case 'DELETED':
      return { k: 'flag', flag: '\\Deleted' };
    case 'UNDELETED':
      return { k: 'not', c: { k: 'flag', flag: '\\Deleted' } };
    case 'KEYWORD':
      return { k: 'flag', flag: keyword(arg()) };
    case 'UNKEYWORD':
      return { k: 'not', c: { k: 'flag', flag: keyword(arg()) } };
    case 'LARGER':
    case 'SMALLER': {
      const n = Number(arg());
      return Number.isSafeInteger(n) ? { k: 'size', larger: key === 'LARGER', n } : bad(`${key} needs a number`);
    }
    case 'BEFORE':
    case 'ON':
    case 'SINCE':
    case 'SENTBEFORE':
    case 'SENTON':
    case 'SENTSINCE':
      return { k: 'date', op: key.replace('SENT', '') as 'BEFORE' | 'ON' | 'SINCE', day: day(arg()) };
    case 'UID':
      return { k: 'set', uid: true, set: arg() };
    case 'NOT':
      return { k: 'not', c: one(queue, depth + 1) };
    case 'OR': {
      const a = one(queue, depth + 1);
      return { k: 'or', a, b: one(queue, depth + 1) };
    }
    case 'BCC':
      return { k: 'header', name: 'bcc', value: arg() };
    case 'HEADER': {
      const name = arg().toLowerCase();
      const value = arg();
      return name in HEADER_FIELDS && value.trim() ? { k: 'text', q: term(HEADER_FIELDS[name], value) } : { k: 'header', name, value };
    }
  }
  return bad(`unknown SEARCH criterion ${key}`);
}

/** `\Flagged` is stored as a label; other keywords are labels of their lowercased names. */
const keyword = (k: string): string => (k.toLowerCase() === FLAGGED_LABEL ? FLAGGED_LABEL : k.toLowerCase());

function textQueries(c: Criterion, out: Set<string>): Set<string> {
  if (c.k === 'text' && c.q) out.add(c.q);
  else if (c.k === 'and') c.of.forEach((x) => textQueries(x, out));
  else if (c.k === 'or') (textQueries(c.a, out), textQueries(c.b, out));
  else if (c.k === 'not') textQueries(c.c, out);
  return out;
}

const needsHeader = (c: Criterion): boolean =>
  c.k === 'header' || (c.k === 'and' && c.of.some(needsHeader)) || (c.k === 'or' && (needsHeader(c.a) || needsHeader(c.b))) || (c.k === 'not' && needsHeader(c.c));

interface Judged {
  row: ImapMessageRow;
  flags: string[];
  text: Map<string, boolean>;
  header?: Array<[string, string]>;
}

/** The UIDs each sequence-set criterion names, resolved once per search. */
type Sets = Map<Criterion, Set<number>>;

function test(c: Criterion, m: Judged, uids: readonly number[], sets: Sets, saved: readonly number[]): boolean {
  switch (c.k) {
    case 'and':
      return c.of.every((x) => test(x, m, uids, sets, saved));
    case 'or':
      return test(c.a, m, uids, sets, saved) || test(c.b, m, uids, sets, saved);
    case 'not':
      return !test(c.c, m, uids, sets, saved);
    case 'const':
      return c.value;
    case 'flag':
      return m.flags.some((f) => f.toLowerCase() === c.flag.toLowerCase());
    case 'size':
      return c.larger ? m.row.size > c.n : m.row.size < c.n;
    case 'date': {
      const d = m.row.createdAt.slice(0, 10);
      return c.op === 'BEFORE' ? d < c.day : c.op === 'ON' ? d === c.day : d >= c.day;
    }
    case 'set': {
      let named = sets.get(c);
      if (!named) sets.set(c, (named = new Set(c.set === '$' ? saved : setOrBad(resolveSet(c.set, uids, c.uid)))));
      return named.has(m.row.uid);
    }
    case 'text':
      // An empty string matches every message (RFC 9051: a substring of any text).
      return c.q === '' || m.text.get(c.q) === true;
    case 'header': {
      const want = c.value.toLowerCase();
      return (m.header ?? []).some(([name, value]) => name === c.name && value.toLowerCase().includes(want));
    }
  }
}

/**
 * The UIDs (of `uids`, the session's view of the folder, ascending) of the messages matching
 * `criteria`. Text criteria run through the full-text index within the API's search budgets.
 */
export async function searchFolder(
  ctx: AppContext,
  who: ImapUser,
  folder: string,
  uids: readonly number[],
  deleted: ReadonlySet<number>,
  criteria: ImapNode[],
  /** The UIDs `$` names (SEARCHRES). */
  saved: readonly number[] = [],
): Promise<number[]> {
  const tree = parseCriteria(criteria);
  const texts = [...textQueries(tree, new Set())];
  const headers = needsHeader(tree);
  const found: number[] = [];
  const sets: Sets = new Map();
  for (let i = 0; i < uids.length; i += BATCH) {
    const rows = await messagesByUid(ctx, who, folder, uids.slice(i, i + BATCH));
    if (!rows.length) continue;
    const flags = await flagsOf(ctx, rows);
    const matches = new Map<string, Set<string>>();
    for (const q of texts)
      matches.set(
        q,
        await idsMatching(
          ctx,
          who.accountId,
          who.inboxId,
          q,
          rows.map((r) => r.id),
        ),
      );
    for (const row of rows) {
      const m: Judged = {
        row,
        flags: deleted.has(row.uid) ? [...(flags.get(row.id) ?? []), '\\Deleted'] : (flags.get(row.id) ?? []),
        text: new Map(texts.map((q) => [q, matches.get(q)!.has(row.id)])),
      };
      if (headers) {
        const source = await rawSource(ctx, row);
        m.header = source ? parseMime(source).fields : [];
      }
      if (test(tree, m, uids, sets, saved)) found.push(row.uid);
    }
  }
  return found;
}
