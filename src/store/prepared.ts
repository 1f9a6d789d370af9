// Prepared queries, built once per database handle. drizzle's query builder costs far more
// than SQLite's work for the point reads on every request and every inbound message (bench/:
// one inbox by id 120–190 µs built per call, 8 µs prepared), so hot paths define their query
// once with sql.placeholder() values and run it through preparedQuery().
import { getTableColumns, type Table } from 'drizzle-orm';
import { rawRows, rawRun, type Db } from './store.ts';

const byDb = new WeakMap<Db, Map<(db: Db) => unknown, unknown>>();

/**
 * The query `build` makes for `db`, built on first use and kept for the handle's lifetime.
 * `build` must be a module-level function (it is the cache key) that ends in `.prepare()`.
 * A store has two handles (its own and the one every transaction runs on, src/store/), so a
 * query is built at most twice.
 */
export function preparedQuery<T>(db: Db, build: (db: Db) => T): T {
  let queries = byDb.get(db);
  if (!queries) byDb.set(db, (queries = new Map()));
  let q = queries.get(build) as T | undefined;
  if (q === undefined) {
    q = build(db);
    queries.set(build, q);
  }
  return q;
}

/** Raw SQL run on one handle: rows as arrays, in the SELECT's column order. */
export interface RawStatement<P extends unknown[], R extends unknown[]> {
  all(...params: P): Promise<R[]>;
  get(...params: P): Promise<R | undefined>;
  /** Answers the number of rows changed. */
  run(...params: P): Promise<number>;
}

/**
 * Raw SQL for the reads on every API request where even a prepared drizzle query costs more
 * than the database does: drizzle maps every value through its column decoders into an object
 * (bench/: a 20-row message page 310 µs as objects, 190 µs as arrays turned into views). `R` is
 * the row's tuple type; the caller names the values once, by destructuring. `?` placeholders.
 */
export function preparedRows<P extends unknown[], R extends unknown[]>(db: Db, source: string): RawStatement<P, R> {
  return {
    all: (...params) => rawRows<R>(db, source, params),
    get: async (...params) => (await rawRows<R>(db, source, params))[0],
    run: (...params) => rawRun(db, source, params),
  };
}

/**
 * A table's columns for raw SQL: as a SELECT or RETURNING lists them (`alias`."name", or bare
 * names without `alias`), how many, and a reader of a row from those values (each through its
 * column's decoder, as drizzle reads it), and of the values an INSERT gives for a row.
 */
export function tableColumns<T>(table: Table, alias?: string) {
  const columns = Object.entries(getTableColumns(table));
  return {
    names: columns.map(([, c]) => c.name),
    list: columns.map(([, c]) => (alias ? `${alias}."${c.name}"` : `"${c.name}"`)).join(', '),
    count: columns.length,
    row: (values: unknown[]) => Object.fromEntries(columns.map(([key, c], i) => [key, values[i] === null ? null : c.mapFromDriverValue(values[i])])) as T,
    values: (row: T) => columns.map(([key, c]) => c.mapToDriverValue((row as Record<string, unknown>)[key])),
  };
}
