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

/**
 * Text built here at most, all fields together, so a message's main thread time is bounded:
 * 1.0 ms for 64 KiB of varied words, 0.22-0.26 ms for 10 KB (`node bench/store-costs.ts` part
 * 10, AMD EPYC). Past it the server computes the column.
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

/** The characters a word number and its weight take at most in the literal: ",16383A". */
const POSITION_CHARS = 7;

/**
 * The words of one text, each kept once: an open-addressing table of word indexes by a hash of
 * the word's lower-cased characters, which the scan computes as it reads them. A word's string
 * is made only the first time it is seen; a word seen again is matched in place. A Map keyed by
 * a new string for every word spent more than half of searchVector's time hashing and
 * comparing those strings, and made most of its garbage. The hash's multiplier is odd and drawn
 * for each process, so no text can be written in advance to give many words one hash.
 */
const HASH_MULTIPLIER = crypto.getRandomValues(new Uint32Array(1))[0]! | 1 | 0;

class WordTable {
  readonly words: string[] = [];
  private readonly hashes: number[] = [];
  /** Word index + 1 by slot; 0 is an empty slot. */
  private readonly slots: Int32Array;
  private readonly mask: number;

  constructor(chars: number) {
    // At most one word in two characters, and a table at least twice the words.
    let size = 256;
    while (size < chars) size *= 2;
    this.slots = new Int32Array(size);
    this.mask = size - 1;
  }

  /** The index of the word text[from, to) (hashed to `hash`), added when new. */
  indexOf(text: string, from: number, to: number, hash: number): number {
    let s = (hash ^ (hash >>> 16)) & this.mask;
    for (let w; (w = this.slots[s]! - 1) >= 0; s = (s + 1) & this.mask) {
      if (this.hashes[w] === hash && sameWord(this.words[w]!, text, from, to)) return w;
    }
    const w = this.words.length;
    this.words.push(text.slice(from, to).toLowerCase());
    this.hashes.push(hash);
    this.slots[s] = w + 1;
    return w;
  }
}

/** Whether `word` (lower case) is text[from, to) lower-cased. */
function sameWord(word: string, text: string, from: number, to: number): boolean {
  if (word.length !== to - from) return false;
  for (let j = 0; j < word.length; j++) if (word.charCodeAt(j) !== (text.charCodeAt(from + j) | 32)) return false;
  return true;
}

/**
 * The tsvector literal of the row's search column, or null when any of its text is not ASCII
 * (the server computes the column then).
 *
 * One pass over the text: each word's numbers are appended as they come, with to_tsvector's
 * limits of the field and `||`'s of the whole kept on the way, and the literal is written into
 * one buffer. Built field by field as maps of number lists, then merged and joined as strings,
 * it allocated a string for every word and for every number written: `node bench/store-costs.ts`
 * part 10 has its time.
 */
export function searchVector(f: SearchFields): string | null {
  // Within the limit the body is shorter than the 262,144 characters the server's left() keeps.
  const fields = [f.subject, `${f.fromAddress} ${f.fromName ?? ''}`, `${f.toAddresses} ${f.ccAddresses}`, f.bodyText ?? ''];
  const total = fields.reduce((n, text) => n + text.length, 0);
  if (total > SEARCH_VECTOR_MAX_CHARS) return null;
  const table = new WordTable(total);
  // Each word's numbers so far (each times 4 plus its field's index, its weight), and what its
  // list in the current field holds: to_tsvector keeps at most MAX_POSITIONS - 1 numbers of a
  // word in a field, one of each.
  const numbers: number[][] = [];
  const fieldOf: number[] = [];
  const inField: number[] = [];
  const lastInField: number[] = [];
  let maxPos = 0;
  for (let k = 0; k < fields.length; k++) {
    const text = fields[k]!;
    // `||` moves this field's numbers past the largest number so far.
    let fieldMax = maxPos;
    let pos = 0;
    let start = -1;
    let hash = 0;
    for (let i = 0, n = text.length; i <= n; i++) {
      const c = i < n ? text.charCodeAt(i) : 32;
      if (c > 127) return null;
      if ((c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)) {
        if (start < 0) ((start = i), (hash = 0));
        // c | 32 is a letter's or digit's lower-case code.
        hash = (Math.imul(hash, HASH_MULTIPLIER) + (c | 32)) | 0;
        continue;
      }
      if (start < 0) continue;
      const length = i - start;
      // One byte short of the limit: the server indexes the word, but a literal cannot hold it.
      // Digits then an exponent (3e5beta): the parser reads a number (3e5) and splits there.
      if (length === WORD_TOO_LONG - 1 || exponentAt(text, start, i)) return null;
      const from = start;
      start = -1;
      if (length >= WORD_TOO_LONG) continue;
      const at = ++pos < LAST_POS ? pos : LAST_POS;
      const w = table.indexOf(text, from, i, hash);
      if (w === numbers.length) {
        numbers.push([]);
        fieldOf.push(k);
        inField.push(0);
        lastInField.push(0);
      } else if (fieldOf[w] !== k) {
        fieldOf[w] = k;
        inField[w] = 0;
      } else if (inField[w]! >= MAX_POSITIONS - 1 || lastInField[w] === at) continue;
      inField[w]!++;
      lastInField[w] = at;
      // `||` keeps MAX_POSITIONS numbers a word, and none after one that reached LAST_POS.
      const list = numbers[w]!;
      const m = list.length;
      if (m >= MAX_POSITIONS || (m && list[m - 1]! >> 2 === LAST_POS)) continue;
      const moved = at + maxPos < LAST_POS ? at + maxPos : LAST_POS;
      list.push((moved << 2) | k);
      if (moved > fieldMax) fieldMax = moved;
    }
    maxPos = fieldMax;
  }
  // "word:1A,2 other:3": ASCII, written byte by byte.
  const words = table.words;
  let size = 0;
  for (let w = 0; w < words.length; w++) size += words[w]!.length + 1 + numbers[w]!.length * POSITION_CHARS;
  const out = Buffer.allocUnsafe(size);
  let o = 0;
  for (let w = 0; w < words.length; w++) {
    if (w) out[o++] = 32;
    o += out.write(words[w]!, o, 'latin1');
    let sep = 58;
    for (const p of numbers[w]!) {
      out[o++] = sep;
      sep = 44;
      o = writeNumber(out, o, p >> 2);
      // A, B or C; D, the body's, is the default and not written.
      const weight = p & 3;
      if (weight < 3) out[o++] = 65 + weight;
    }
  }
  return out.toString('latin1', 0, o);
}

/** Writes `n` (1 to 16,383) in decimal at `o`; answers the offset after it. */
function writeNumber(out: Buffer, o: number, n: number): number {
  const digits = n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : n < 10000 ? 4 : 5;
  for (let d = o + digits - 1; d >= o; d--) {
    out[d] = 48 + (n % 10);
    n = (n / 10) | 0;
  }
  return o + digits;
}
