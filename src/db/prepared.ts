// Prepared drizzle queries, built once per database handle. drizzle's query builder costs far
// more than SQLite's work for the point reads on every request and every inbound message
// (bench/: one inbox by id 120–190 µs built per call, 8 µs prepared), so hot paths define
// their query once with sql.placeholder() values and run it through preparedQuery().
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
