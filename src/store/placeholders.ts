// Statements are written once, in the SQL both engines share (drizzle's SQLite dialect writes
// it); toPostgres() makes the few differences good for PostgreSQL:
//
// - `?` placeholders become `$1, $2, …` (quoted text ('…', "…") and comments skipped);
// - `x IN (SELECT value FROM json_each(?))`, the IN-list of a JSON array, becomes
//   `x = ANY(ARRAY(SELECT json_array_elements_text(?)))`: the planner takes a set-returning
//   function for 100 rows and joined such a list to a table of a few thousand rows by scanning
//   the table (the job claim's lock, bench (o): 2.5 ms a claim on jobs, most of its rows dead),
//   where it takes an array of unknown length for 10 elements and probes the index. Elsewhere
//   (`FROM json_each(?) l`, `NOT IN`) json_each becomes json_array_elements_text (its rows are
//   named `value` too);
// - `json_extract(col, '$.key')` becomes `(col::json ->> 'key')` (json, not jsonb: it takes
//   any JSON text, \u0000 escapes included);
// - the columns of an `on conflict (…)` target lose their table name (drizzle's SQLite dialect
//   qualifies them; PostgreSQL takes bare names there).
//
// Results are kept per SQL text: the same few hundred statements run all day.

const cache = new Map<string, string>();
const CACHE_SIZE = 1000;

const JSON_EXTRACT = /json_extract\(((?:"\w+"\.)?"\w+"|\w+(?:\.\w+)?), '\$\.(\w+)'\)/g;

const CONFLICT_TARGET = /on conflict \([^)]*\)/gi;

const IN_JSON_LIST = /(?<!\bnot) in \(select value from json_each\(\?\)\)/gi;

export function toPostgres(source: string): string {
  const hit = cache.get(source);
  if (hit !== undefined) return hit;
  const out = numberPlaceholders(
    source
      .replace(IN_JSON_LIST, ' = ANY(ARRAY(SELECT json_array_elements_text(?)))')
      .replaceAll('json_each(', 'json_array_elements_text(')
      .replace(JSON_EXTRACT, "($1::json ->> '$2')")
      .replace(CONFLICT_TARGET, (target: string) => target.replace(/"\w+"\./g, '')),
  );
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
  cache.set(source, out);
  return out;
}

export function numberPlaceholders(source: string): string {
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
