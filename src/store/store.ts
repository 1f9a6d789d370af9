// The storage port: what the rest of mailroom sees of the database, whichever engine holds it.
//
// Queries are written once with drizzle's SQLite query builder. Its SQL is the portable subset
// both engines run (double-quoted identifiers, `?` placeholders that the PostgreSQL adapter
// numbers, RETURNING, ON CONFLICT); the few statements that differ per engine live in the
// adapters. drizzle's proxy driver runs each built query through the adapter's executor, so
// every call is async on both engines and rows come back mapped to the schema's field names.
import { AsyncLocalStorage } from 'node:async_hooks';
import { drizzle, type SqliteRemoteDatabase } from 'drizzle-orm/sqlite-proxy';

/** A database handle: the store's own, or the one a transaction callback receives. */
export type Db = SqliteRemoteDatabase;

export type Dialect = 'sqlite' | 'postgres';

export type Method = 'run' | 'all' | 'values' | 'get';

/** One connection's (or transaction's) way to run a statement, with `?` placeholders. */
export interface Executor {
  /** `all`/`values`: every row as an array; `get`: the first row or undefined; `run`: changes. */
  exec(source: string, params: unknown[], method: Method): Promise<{ rows: unknown; changes?: number }>;
}

export interface Store {
  readonly dialect: Dialect;
  /** The handle for work outside a transaction (each statement commits by itself). */
  readonly db: Db;
  /**
   * Runs `work` in one transaction on one connection and commits when it resolves (rolls back
   * when it throws). Every statement of the work must go through `tx`. Called from inside
   * another transaction, it joins that one: a function that needs atomicity can ask for it
   * without knowing whether its caller already holds a transaction.
   */
  transaction<T>(work: (tx: Db) => Promise<T>): Promise<T>;
  /** Raw SQL for what the query builder cannot say; `?` placeholders; rows as arrays. */
  rows<R extends unknown[]>(db: Db, source: string, params?: unknown[]): Promise<R[]>;
  /** Raw SQL without rows; answers the number of rows changed. */
  run(db: Db, source: string, params?: unknown[]): Promise<number>;
  close(): Promise<void>;
}

const executors = new WeakMap<Db, Executor>();

/** A drizzle handle whose queries run on `executor`. */
export function handleFor(executor: Executor): Db {
  const db = drizzle(async (source, params, method) => {
    const r = await executor.exec(source, params, method);
    return r as { rows: unknown[] };
  });
  executors.set(db, executor);
  return db;
}

export function executorOf(db: Db): Executor {
  const e = executors.get(db);
  if (!e) throw new Error('not a store handle');
  return e;
}

/** Rows changed by a query builder's `.run()` (the adapters report them beside `rows`). */
export function changes(result: unknown): number {
  return (result as { changes?: number }).changes ?? 0;
}

/** The transaction the current async call chain runs in, if any (see Store.transaction). */
export const currentTransaction = new AsyncLocalStorage<Db>();

export async function rawRows<R extends unknown[]>(db: Db, source: string, params: unknown[] = []): Promise<R[]> {
  return (await executorOf(db).exec(source, params, 'all')).rows as R[];
}

export async function rawRun(db: Db, source: string, params: unknown[] = []): Promise<number> {
  return (await executorOf(db).exec(source, params, 'run')).changes ?? 0;
}

/**
 * True for a unique or primary-key violation on either engine, whether the driver's error
 * comes bare or wrapped by drizzle (its `cause`).
 */
export function isUniqueViolation(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || e.code === '23505') return true;
  }
  return false;
}

/** What both adapters share: raw SQL runs on whichever handle it is given (store or transaction). */
export abstract class StoreBase {
  rows<R extends unknown[]>(db: Db, source: string, params: unknown[] = []): Promise<R[]> {
    return rawRows<R>(db, source, params);
  }

  run(db: Db, source: string, params: unknown[] = []): Promise<number> {
    return rawRun(db, source, params);
  }
}
