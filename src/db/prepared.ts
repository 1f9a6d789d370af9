// Prepared drizzle queries, built once per database handle. drizzle's query builder costs far
// more than SQLite's work for the point reads on every request and every inbound message
// (bench/: one inbox by id 120–190 µs built per call, 8 µs prepared), so hot paths define
// their query once with sql.placeholder() values and run it through preparedQuery().
import Database, { type Statement } from 'better-sqlite3';
import type { Db } from './client.ts';

const byDb = new WeakMap<Db, Map<(db: Db) => unknown, unknown>>();

/**
 * The query `build` makes for `db`, built on first use and kept for the handle's lifetime.
 * `build` must be a module-level function (it is the cache key) that ends in `.prepare()`.
 * Works inside transactions too: better-sqlite3 runs every statement on the one connection.
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

/**
 * A plain better-sqlite3 statement in raw mode (each row an array, in the SELECT's column
 * order), for the reads on every API request where even a prepared drizzle query costs more
 * than SQLite does: drizzle maps every value through its column decoders into an object, and
 * better-sqlite3's own object rows are built through V8's slow property API (bench/: a 20-row
 * message page 310 µs as objects, 190 µs as arrays turned into views). `R` is the row's tuple
 * type; the caller names the values once, by destructuring. Prepared past the connection's
 * statement cache (src/db/client.ts hands one shared object per SQL text to every caller and
 * resets its mode), so the statement and its mode belong to the caller alone. Call it from a
 * builder passed to preparedQuery() to prepare it once.
 */
export function preparedRows<P extends unknown[], R extends unknown[]>(db: Db, source: string): Statement<P, R> {
  return (Database.prototype.prepare.call(db.$client, source) as Statement<P, R>).raw(true);
}
