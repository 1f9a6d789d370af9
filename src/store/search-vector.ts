// The search column of a PostgreSQL message row (`messages.fts`, migrations/pg/0004 and 0023),
// built here when the row's text is ASCII, instead of by the server's text parser: to_tsvector
// took 0.45-1.4 ms of the database's CPU for a 10 KB body, on the two cores the server shares
// with mailroom (docs/performance.md, "PostgreSQL: the search column built by mailroom").
//
// What the server computes (mailroom_message_fts(), migration pg/0023, for rows that come
// without it):
//   setweight(to_tsvector('mailroom', mailroom_words(subject)), 'A') ||
//   setweight(to_tsvector('mailroom', mailroom_words(from_address) || ' ' || mailroom_words(from_name)), 'B') ||
//   setweight(to_tsvector('mailroom', mailroom_words(to_addresses) || ' ' || mailroom_words(cc_addresses)), 'C') ||
//   setweight(to_tsvector('mailroom', left(mailroom_words(body_text), 262144)), 'D')
// On ASCII text that is, word for word:
//   - mailroom_words turns the 32 ASCII punctuation characters into spaces, so the parser sees
//     runs of letters and digits between blanks: each run is a word, numbered from 1 within its
//     field, lower-cased by the `mailroom` configuration (unaccent, then simple). A run of 2,048
//     bytes or more is skipped and takes no number (the parser's "word is too long"); one of
//     2,047 the server keeps, but a literal cannot hold (tsvectorin takes 2,046): null.
//   - In one field a word keeps at most 255 numbers, none above 16,383 (later ones become 16,383
//     once). `||` adds the largest number so far to the next field's numbers and appends them,
//     up to 256 a word, none after one that reached 16,383.
// Text with any other character (a letter outside ASCII, where unaccent and the locale's case
// rules decide), or more than SEARCH_VECTOR_MAX_CHARS of it, gets null too: the server computes
// the column. test/e2e/search-words.test.ts
// compares the two on generated and hostile text.

/** What the search column is made of: the row's columns, as stored. */
export interface SearchFields {
  subject: string;
  fromAddress: string;
  fromName: string | null;
  toAddresses: string;
  ccAddresses: string;
  bodyText: string | null;
}

/** The weight letters of the fields, in order; D (the body) is the default and is not written. */
const WEIGHTS = ['A', 'B', 'C', ''];
/**
 * Text built here at most, all fields together, so a message's main thread time is bounded:
 * 3.5 ms for 64 KiB of varied words, 0.6 ms for 10 KB (`node bench/store-costs.ts` part 10,
 * AMD EPYC). Past it the server computes the column.
 */
export const SEARCH_VECTOR_MAX_CHARS = 65_536;
/** PostgreSQL's MAXSTRLEN: a word this long or longer is not indexed. */
const WORD_TOO_LONG = 2_048;
/** MAXENTRYPOS - 1: the largest word number. */
const LAST_POS = 16_383;
/** MAXNUMPOS: the numbers a word keeps after a concatenation; to_tsvector keeps one fewer. */
const MAX_POSITIONS = 256;

/** Whether the character at `i` (a letter or digit) is a digit. */
const isDigitAt = (text: string, i: number) => text.charCodeAt(i) <= 57;

/**
 * Whether the word text[start, end) (letters and digits) begins with digits then e or E then a
 * digit: where PostgreSQL's parser sees a number in scientific notation. Read in place: a
 * copy and a regular expression for every word that starts with a digit cost bench (o)'s
 * lines, each led by its number, more than the rest of the word's handling.
 */
function exponentAt(text: string, start: number, end: number): boolean {
  let i = start;
  while (i < end && isDigitAt(text, i)) i++;
  if (i === start || i + 1 >= end) return false;
  const e = text.charCodeAt(i);
  return (e === 101 || e === 69) && isDigitAt(text, i + 1);
}

/** A word's numbers so far, each times 4 plus its field's index (its weight). */
type Entry = number[];

/**
 * The tsvector literal of the row's search column, or null when any of its text is not ASCII
 * (the server computes the column then).
 */
export function searchVector(f: SearchFields): string | null {
  // Within the limit the body is shorter than the 262,144 characters the server's left() keeps.
  const fields = [f.subject, `${f.fromAddress} ${f.fromName ?? ''}`, `${f.toAddresses} ${f.ccAddresses}`, f.bodyText ?? ''];
  if (fields.reduce((n, text) => n + text.length, 0) > SEARCH_VECTOR_MAX_CHARS) return null;
  const words = new Map<string, Entry>();
  let maxPos = 0;
  for (let k = 0; k < fields.length; k++) {
    const text = fields[k]!;
    // to_tsvector of the field: each word's numbers, ascending.
    const field = new Map<string, number[]>();
    let pos = 0;
    let start = -1;
    for (let i = 0, n = text.length; i <= n; i++) {
      const c = i < n ? text.charCodeAt(i) : 32;
      if (c > 127) return null;
      if ((c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)) {
        if (start < 0) start = i;
        continue;
      }
      if (start < 0) continue;
      const length = i - start;
      // One byte short of the limit: the server indexes the word, but a literal cannot hold it.
      // Digits then an exponent (3e5beta): the parser reads a number (3e5) and splits there.
      if (length === WORD_TOO_LONG - 1 || exponentAt(text, start, i)) return null;
      const word = length < WORD_TOO_LONG ? text.slice(start, i).toLowerCase() : '';
      start = -1;
      if (!word) continue;
      const at = ++pos < LAST_POS ? pos : LAST_POS;
      const list = field.get(word);
      if (!list) field.set(word, [at]);
      else if (list.length < MAX_POSITIONS - 1 && list[list.length - 1] !== at) list.push(at);
    }
    // ||: appended to the word's numbers so far, moved past the largest number so far.
    let fieldMax = maxPos;
    for (const [word, list] of field) {
      let entry = words.get(word);
      if (!entry) words.set(word, (entry = []));
      for (const p of list) {
        const n = entry.length;
        if (n >= MAX_POSITIONS || (n && entry[n - 1]! >> 2 === LAST_POS)) break;
        const moved = p + maxPos < LAST_POS ? p + maxPos : LAST_POS;
        entry.push((moved << 2) | k);
        if (moved > fieldMax) fieldMax = moved;
      }
    }
    maxPos = fieldMax;
  }
  const out: string[] = [];
  for (const [word, entry] of words) {
    let positions = '';
    for (const p of entry) positions += `${positions ? ',' : ''}${p >> 2}${WEIGHTS[p & 3]}`;
    out.push(`${word}:${positions}`);
  }
  return out.join(' ');
}
