// SQL functions mailroom registers on every SQLite connection (src/db/client.ts). Pure code with
// no imports of the domain, so the database layer does not depend on the rules that use them.

/** Words of a text as the FTS index sees them: letter and digit runs, lowercased, accents removed. */
export function filenameWords(text: string): string[] {
  return text.normalize('NFD').replace(/\p{M}+/gu, '').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

const termCache = new Map<string, { words: string[]; prefix: boolean }[]>();
/** Every search scans the attachments' filenames: their words are worked out once (bounded). */
const wordsOfFilename = new Map<string, string[]>();

/**
 * filename_matches(filename, terms): 1 when one of the terms (separated by newlines) occurs in
 * the filename as consecutive words, the last one as a prefix when the term ends with "*"
 * ("report" matches "Q3-Report_final.pdf", "q3 rep*" too, "port" does not).
 */
export function filenameMatches(filename: unknown, terms: unknown): 0 | 1 {
  if (typeof filename !== 'string' || typeof terms !== 'string') return 0;
  let compiled = termCache.get(terms);
  if (!compiled) {
    compiled = terms.split('\n').map((t) => ({ words: t.replace(/\*$/, '').split(' ').filter(Boolean), prefix: t.endsWith('*') }));
    if (termCache.size > 1000) termCache.clear();
    termCache.set(terms, compiled);
  }
  let words = wordsOfFilename.get(filename);
  if (!words) {
    words = filenameWords(filename);
    if (wordsOfFilename.size >= 100_000) wordsOfFilename.clear();
    wordsOfFilename.set(filename, words);
  }
  for (const { words: want, prefix } of compiled) {
    if (!want.length) continue;
    for (let i = 0; i + want.length <= words.length; i++) {
      let ok = true;
      for (let j = 0; ok && j < want.length; j++) {
        const last = j === want.length - 1;
        ok = last && prefix ? words[i + j].startsWith(want[j]) : words[i + j] === want[j];
      }
      if (ok) return 1;
    }
  }
  return 0;
}
