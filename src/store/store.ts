// The storage port: what the rest of mailroom sees of the database, whichever engine holds it.
//
// Every query lives in a repository (src/store/repo/, one module per aggregate), written once
// with drizzle's SQLite query builder or as raw SQL of the portable subset both engines run
// (double-quoted identifiers, `?` placeholders that the PostgreSQL adapter numbers, RETURNING,
// ON CONFLICT; two JSON functions it translates, placeholders.ts); the few statements that
// differ per engine are chosen in the repository with dialectOf(). drizzle's proxy driver runs
// each built query through the adapter's executor, so every call is async on both engines and
// rows come back mapped to the schema's field names. The domain (src/domain/) holds the rules
// and the transactions, and no SQL.
import { AsyncLocalStorage } from 'node:async_hooks';
import { drizzle, type SqliteRemoteDatabase } from 'drizzle-orm/sqlite-proxy';

/**
 * A database handle as src/store sees it: drizzle's, by its public members (a class type with
 * private ones could not be given a Tx below).
 */
export type Db = Pick<SqliteRemoteDatabase, keyof SqliteRemoteDatabase>;

/**
 * The same handle as everything outside src/store sees it (the domain holds transactions, not
 * SQL): every drizzle member is `never`, so calling one is a compile error, while a Tx is still
 * a Db to the repository function it is handed to. A type only: no wrapper at run time.
 */
export type Tx = { readonly [K in keyof Db]: never };

export type Dialect = 'sqlite' | 'postgres';

export type Method = 'run' | 'all' | 'values' | 'get';

/** One connection's (or transaction's) way to run a statement, with `?` placeholders. */
export interface Executor {
  /** The engine the statements run on (repositories write the few engine-specific statements per engine). */
  readonly dialect: Dialect;
  /** `all`/`values`: every row as an array; `get`: the first row or undefined; `run`: changes. */
  exec(source: string, params: unknown[], method: Method): Promise<{ rows: unknown; changes?: number }>;
}

export interface Store {
  readonly dialect: Dialect;
  /** The handle for work outside a transaction (each statement commits by itself). */
  readonly db: Tx;
  /**
   * Runs `work` in one transaction on one connection and commits when it resolves (rolls back
   * when it throws). Every statement made in the work's call chain runs in the transaction,
   * whether on `tx` or on the store's own handle (`db`): a read helper called from inside a
   * transaction sees, and locks, what the transaction does. Called from inside another
   * transaction, it joins that one: a function that needs atomicity can ask for it without
   * knowing whether its caller already holds a transaction.
   */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Like transaction(), for the writes of many concurrent callers (inbound mail on 50 SMTP
   * sessions): SQLite runs a moment's callers in one transaction, one savepoint each, and
   * fsyncs once; PostgreSQL runs each in its own transaction (the server groups the commits).
   * Resolves once the work is durable; a callback that throws rolls back only its own rows.
   */
  grouped<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /** Raw SQL for what the query builder cannot say; `?` placeholders; rows as arrays. */
  rows<R extends unknown[]>(db: Db, source: string, params?: unknown[]): Promise<R[]>;
  /** Raw SQL without rows; answers the number of rows changed. */
  run(db: Db, source: string, params?: unknown[]): Promise<number>;
  /**
   * Inside a transaction: waits until no other transaction holds `key`, then holds it until
   * this one ends. For decisions that read then write (numbering a replay): SQLite's one
   * writer at a time holds every key already; PostgreSQL takes an advisory lock.
   */
  lock(tx: Db, key: string): Promise<void>;
  /**
   * Runs `work` unless another process of this database is running work of the same `name`
   * (then answers undefined): schedules (sweeps, domain re-checks) run on one node at a time.
   * PostgreSQL: a session advisory lock held for the work's duration; SQLite: always runs.
   */
  exclusive<T>(name: string, work: () => Promise<T>): Promise<T | undefined>;
  /**
   * A probe answering true when another process (a CLI command, another node) may have
   * committed since its previous call, so waiting work is looked for again.
   */
  externalCommits(): () => boolean;
  /**
   * Tells the other processes on this database that `signal` happened ('jobs': work was
   * queued; 'events': an event was recorded), so they wake without polling. PostgreSQL: a
   * NOTIFY, batched per turn of the event loop; SQLite: nothing (one serving process; the CLI
   * is noticed through externalCommits).
   */
  announce(signal: string): void;
  /** Calls `fn` with every signal another process announces (PostgreSQL: LISTEN). */
  listen(fn: (signal: string) => void): void;
  /** Drops what deleted rows may have left behind (SQLite: the write-ahead log's copies). */
  checkpoint(): Promise<void>;
  /** Answers when the database answers (the health check). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

const executors = new WeakMap<Db, Executor>();

/** A drizzle handle whose queries run on `executor`. */
export function handleFor(executor: Executor): Db {
  const db = drizzle(async (source, params, method) => {
    const r = await executor.exec(source, params, method);
    return r as { rows: unknown[] };
  });
  // drizzle's own transaction() would send BEGIN through the executor, outside the store's
  // bookkeeping (on the one SQLite connection, or any pooled PostgreSQL one).
  db.transaction = () => {
    throw new Error('use Store.transaction');
  };
  executors.set(db, executor);
  return db;
}

/** The engine a handle's statements run on. */
export const dialectOf = (db: Db): Dialect => executorOf(db).dialect;

export function executorOf(db: Db): Executor {
  const e = executors.get(db);
  if (!e) throw new Error('not a store handle');
  return e;
}

/**
 * Text never holds NUL: PostgreSQL cannot store it in text, so on both engines a NUL in a
 * string parameter becomes U+FFFD (a body with NULs reads back with replacement characters; the
 * raw source, a blob, keeps every byte). Answers `params` itself when nothing changes.
 */
export function withoutNul(params: unknown[]): unknown[] {
  let out: unknown[] | undefined;
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    if (typeof p === 'string' && p.includes('\0')) (out ??= [...params])[i] = p.replaceAll('\0', '\uFFFD');
  }
  return out ?? params;
}

/** Rows changed by a query builder's `.run()` (the adapters report them beside `rows`). */
export function changes(result: unknown): number {
  return (result as { changes?: number }).changes ?? 0;
}

/** One open transaction, as the async call chain of its work sees it. */
export interface TxFrame<C = unknown> {
  /** The store whose transaction it is. */
  readonly owner: object;
  readonly db: Tx;
  /** The PostgreSQL connection it holds. */
  readonly client?: C;
  /** Run after the commit (afterCommit). */
  readonly hooks: Array<() => void>;
  /** Writes started and not waited for (sendAlong): the work ends when they have. */
  readonly pending: Array<Promise<unknown>>;
  /**
   * Rows kept for the end of the work, by kind, each kind's written in one statement
   * (sendAlongRow): on PostgreSQL, whose adapter sets it. Undefined once they are written.
   */
  rowBatches?: Map<string, RowBatch>;
  /** Reads made once for the whole transaction, by key (readOnce): on PostgreSQL, whose adapter sets it. */
  readonly reads?: Map<string, Promise<unknown>>;
  /** False once the work is over: a call chain it left running no longer joins it. */
  open: boolean;
}

/**
 * Work done for an API client (an HTTP request, an IMAP session) rather than for mail (SMTP, the
 * job runner): on PostgreSQL its statements take connections of a pool of their own
 * (`database.api_connections`), so a flood of reads cannot leave mail waiting for a connection,
 * nor mail the API. SQLite has one connection, and ignores it.
 */
const apiLane = new AsyncLocalStorage<true>();

/** Runs `fn`, and what its call chain starts, as work for an API client (see apiLane). */
export const asApiWork = <T>(fn: () => T): T => apiLane.run(true, fn);

/** Runs `fn`, and what its call chain starts, as work for mail: the job runner, woken by a request. */
export const asMailWork = <T>(fn: () => T): T => apiLane.exit(fn);

/** Whether the current call chain is work for an API client. */
export const isApiWork = (): boolean => apiLane.getStore() === true;

/** The transaction the current async call chain runs in, if any (see Store.transaction). */
export const currentTransaction = new AsyncLocalStorage<TxFrame>();

/** The open transaction of `owner` the current call chain runs in, if any. */
export function openFrame<C>(owner: object): TxFrame<C> | undefined {
  const f = currentTransaction.getStore();
  return f?.open && f.owner === owner ? (f as TxFrame<C>) : undefined;
}

/**
 * Runs `fn` once the transaction the caller is in has committed (never, if it rolls back);
 * outside a transaction, in a microtask. For notifications that others may now read a change.
 */
export function afterCommit(fn: () => void): void {
  const f = currentTransaction.getStore();
  if (f?.open) f.hooks.push(fn);
  else queueMicrotask(fn);
}

/**
 * Inside a transaction: a write whose answer the caller does not need, started now and not
 * waited for. On PostgreSQL the statements that follow it go out in the same write instead of
 * a round trip each (pipeline mode, src/store/postgres.ts), and the server runs them in the
 * order they were started; on SQLite it has run already. The transaction's work ends when its
 * writes have (before the COMMIT, or a grouped writer's RELEASE), and fails with the first
 * one's error: the statements after a failed one fail only because of it.
 */
export function sendAlong(write: Promise<unknown>): void {
  const f = currentTransaction.getStore();
  if (!f?.open) throw new Error('sendAlong outside a transaction');
  // Handled here, so a failure met before the work ends is no unhandled rejection; runWork reports it.
  write.catch(() => undefined);
  f.pending.push(write);
}

/** Rows of one kind kept for the end of a transaction's work, and how to write several at once. */
export interface RowBatch {
  rows: unknown[];
  write: (db: Db, rows: never[]) => Promise<unknown>;
}

/**
 * Inside a transaction: a row whose insert the caller does not need to wait for, and which
 * nothing in the transaction reads back. Where the adapter keeps such rows (PostgreSQL), the
 * rows of each `kind` are written together at the end of the work, in one statement
 * (`write`, with every row), in the order their kinds were first met: the events, delivery
 * jobs and delivery log rows of a batch of spooled messages or webhook outcomes, one statement
 * each instead of one a message (a statement costs both sides ~0.1 ms of CPU; bench (o)).
 * Elsewhere (SQLite, where a statement costs microseconds) it is sent along at once, alone.
 */
export function sendAlongRow<R>(db: Db, kind: string, row: R, write: (db: Db, rows: R[]) => Promise<unknown>): void {
  const f = currentTransaction.getStore();
  const batches = f?.open ? f.rowBatches : undefined;
  if (!batches) return sendAlong(write(db, [row]));
  const batch = batches.get(kind);
  if (batch) batch.rows.push(row);
  else batches.set(kind, { rows: [row], write: write as RowBatch['write'] });
}

/**
 * Inside a transaction: `read`, made once for the whole transaction where the adapter keeps
 * such reads (PostgreSQL); later calls with the same `key` get the first one's answer. For reads
 * of what the transaction does not change, repeated by each outcome of a batch (spooled mail
 * finished together: an inbox still there, the account's webhooks), one statement instead of
 * one a message. Elsewhere, and outside a transaction, each call reads.
 */
export function readOnce<T>(key: string, read: () => Promise<T>): Promise<T> {
  const f = currentTransaction.getStore();
  const reads = f?.open ? f.reads : undefined;
  if (!reads) return read();
  let answer = reads.get(key) as Promise<T> | undefined;
  if (!answer) reads.set(key, (answer = read()));
  return answer;
}

/**
 * A read by key that the callers of one turn of the event loop share: the keys asked for before
 * the turn ends go to `readMany` together (each once), and each caller gets its key's value
 * (undefined when `readMany` has none). For reads outside a transaction that several jobs make
 * at once (the spooled messages a claim hands out: their bytes, their inboxes), one statement
 * instead of one a job. Should the read fail, every caller of that turn gets its error.
 */
export function sharedReads<K, V>(readMany: (keys: K[]) => Promise<Map<K, V>>): (key: K) => Promise<V | undefined> {
  let waiting: Map<K, Array<{ resolve: (v: V | undefined) => void; reject: (err: unknown) => void }>> | undefined;
  return (key) =>
    new Promise((resolve, reject) => {
      if (!waiting) {
        const batch = (waiting = new Map());
        // After the microtasks then queued have run (the awaits between a job's start and its
        // read), not after the loop's next poll for I/O: a job's read waits for no one's I/O.
        process.nextTick(() => {
          waiting = undefined;
          readMany([...batch.keys()]).then(
            (values) => {
              for (const [k, callers] of batch) for (const c of callers) c.resolve(values.get(k));
            },
            (err: unknown) => {
              for (const callers of batch.values()) for (const c of callers) c.reject(err);
            },
          );
        });
      }
      const callers = waiting.get(key);
      if (callers) callers.push({ resolve, reject });
      else waiting.set(key, [{ resolve, reject }]);
    });
}

/** Two ids as one key of sharedReads (ids hold no space), and back. */
export const pairKey = (a: string, b: string): string => `${a} ${b}`;
export const pairOf = (key: string): [string, string] => key.split(' ') as [string, string];

/**
 * sharedReads for each owner (a server's context): `readMany` gets the owner and the turn's
 * keys. Made once at module level; each owner gets its own batches.
 */
export function sharedReadsOf<O extends object, K, V>(readMany: (owner: O, keys: K[]) => Promise<Map<K, V>>): (owner: O, key: K) => Promise<V | undefined> {
  const byOwner = new WeakMap<O, (key: K) => Promise<V | undefined>>();
  return (owner, key) => {
    let read = byOwner.get(owner);
    if (!read) byOwner.set(owner, (read = sharedReads((keys: K[]) => readMany(owner, keys))));
    return read(key);
  };
}

/**
 * For the adapters: runs one transaction's `work` in `frame`; the frame closes when it ends.
 * Its writes sent along may still be under way: settleWrites before the COMMIT is known good.
 */
export async function runWork<T>(frame: TxFrame, work: (tx: Tx) => Promise<T>): Promise<T> {
  try {
    return await currentTransaction.run(frame, async () => {
      const result = await work(frame.db);
      // The rows kept for the end, still in the frame (on its connection); any a call chain
      // left running adds later go out alone.
      const batches = frame.rowBatches;
      frame.rowBatches = undefined;
      for (const batch of batches?.values() ?? []) sendAlong(batch.write(frame.db, batch.rows as never[]));
      return result;
    });
  } catch (err) {
    await settleWrites(frame);
    throw err;
  } finally {
    frame.open = false;
  }
}

/**
 * For the adapters: waits for the writes the work sent along, and throws the first one's error
 * if one failed (the cause: a statement after it may have failed only because of it).
 */
export async function settleWrites(frame: TxFrame): Promise<void> {
  for (const write of frame.pending) await write;
}

/** For the adapters: runs the hooks of a committed transaction. */
export function runHooks(frame: TxFrame): void {
  for (const fn of frame.hooks) queueMicrotask(fn);
}

export async function rawRows<R extends unknown[]>(db: Db, source: string, params: unknown[] = []): Promise<R[]> {
  return (await executorOf(db).exec(source, params, 'all')).rows as R[];
}

export async function rawRun(db: Db, source: string, params: unknown[] = []): Promise<number> {
  return (await executorOf(db).exec(source, params, 'run')).changes ?? 0;
}

/** Texts of insertRows' statements, by table and number of rows. */
const insertTexts = new Map<string, string>();
/** Parameters of one statement at most (PostgreSQL takes 65,535). */
const MAX_PARAMETERS = 30_000;

/**
 * Inserts `rows` (each its values in the order of `columns`) into `table` in one statement (a
 * statement per 30,000 values), each text made once per table and number of rows (and prepared
 * once per connection on PostgreSQL).
 */
export async function insertRows(db: Db, table: string, columns: readonly string[], rows: unknown[][]): Promise<void> {
  const most = Math.max(1, Math.floor(MAX_PARAMETERS / columns.length));
  const statements: Array<Promise<number>> = [];
  // All issued at once, in order: a transaction's rows kept for its end are written as its work
  // ends (sendAlongRow), and a statement issued after an await would find the work over.
  for (let at = 0; at < rows.length; at += most) {
    const part = rows.slice(at, at + most);
    const key = `${table}\u0000${part.length}`;
    let source = insertTexts.get(key);
    if (!source) {
      const one = `(${columns.map(() => '?').join(', ')})`;
      source = `INSERT INTO ${table} (${columns.map((c) => `"${c}"`).join(', ')}) VALUES ${Array.from({ length: part.length }, () => one).join(', ')}`;
      if (insertTexts.size >= 1000) insertTexts.clear();
      insertTexts.set(key, source);
    }
    statements.push(rawRun(db, source, part.flat()));
  }
  await Promise.all(statements);
}

/**
 * Starts a statement whose best plan depends on its values (a search: how common a word is). On
 * PostgreSQL it runs unnamed, planned for its values every time: a named statement may settle,
 * after five runs, on a generic plan made without them (for `fts @@ $1`, a default selectivity
 * that sorts every match of a common word). SQLite reads it as a comment.
 */
export const PLAN_EACH_TIME = '/* plan each time */ ';

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

/**
 * True when the database, not the request, failed in a way that passes: a statement cancelled
 * (PostgreSQL statement_timeout, 57014), a lost or refused connection (class 08, 57P01-57P03,
 * too many connections 53300, a socket error or a pool connect timeout, a deadlock or serialization
 * failure still there after the store's retries), or SQLite busy or
 * locked past its busy timeout. The API answers these 503 with Retry-After, not 500.
 */
export function isStorageUnavailable(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown; message?: unknown } | undefined; e; e = e.cause as typeof e) {
    const code = typeof e.code === 'string' ? e.code : '';
    if (code === '57014' || code === '53300' || code === '40P01' || code === '40001' || /^08/.test(code) || /^57P0[123]$/.test(code)) return true;
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code.startsWith('SQLITE_BUSY_')) return true;
    if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EPIPE') return true;
    if (typeof e.message === 'string' && /^(Connection terminated|timeout exceeded when trying to connect)/.test(e.message)) return true;
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
