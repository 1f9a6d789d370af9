// drizzle's SQLite dialect writes `?` placeholders; PostgreSQL wants `$1, $2, …`. The rewrite
// skips quoted text ('…', "…") and comments, where a `?` is not a placeholder. Results are
// kept per SQL text: the same few hundred statements run all day.

const cache = new Map<string, string>();
const CACHE_SIZE = 1000;

export function toNumberedPlaceholders(source: string): string {
  const hit = cache.get(source);
  if (hit !== undefined) return hit;
  let out = '';
  let n = 0;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === "'" || c === '"') {
      const end = closing(source, i, c);
      out += source.slice(i, end + 1);
      i = end;
    } else if (c === '-' && source[i + 1] === '-') {
      const end = source.indexOf('\n', i);
      const stop = end === -1 ? source.length - 1 : end;
      out += source.slice(i, stop + 1);
      i = stop;
    } else if (c === '?') {
      out += `$${++n}`;
    } else {
      out += c;
    }
  }
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
  cache.set(source, out);
  return out;
}

/** Index of the quote closing the one at `start` (a doubled quote is an escaped one). */
function closing(source: string, start: number, quote: string): number {
  let i = start + 1;
  while (i < source.length) {
    if (source[i] === quote) {
      if (source[i + 1] === quote) i += 2;
      else return i;
    } else i++;
  }
  return source.length - 1;
}
