// The embedded SQLite adapter: one better-sqlite3 connection per process. Statements run
// synchronously inside their promise, so a query costs what it cost before the port plus one
// resolved promise. A transaction holds a gate: statements from outside it wait until it
// commits instead of landing in it (they would, on the one connection).
import type Database from 'better-sqlite3';
import { promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { handleFor, openFrame, withoutNul, runHooks, runWork, settleWrites, type Tx, type TxFrame, type Executor, type Method, type Store, StoreBase } from './store.ts';

/** Distinct SQL texts kept compiled; `IN (?, ?, …)` lists of varying length make new texts. */
const STATEMENT_CACHE_SIZE = 500;

/** What became of one writer of a batch. */
type Outcome = { ok: true; value: unknown; frame: TxFrame } | { ok: false; err: unknown };

/** Most writers in one grouped transaction: bounds how long one batch holds the connection. */
const MAX_BATCH = 256;

interface Pending {
  work: (tx: Tx) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

class Gate {
  private waiting: Array<() => void> = [];
  held = false;

  async enter(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  leave(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }
}

export class SqliteStore extends StoreBase implements Store {
  readonly dialect = 'sqlite' as const;
  readonly db: Tx;
  private readonly gate = new Gate();
  private readonly statements = new Map<string, Database.Statement>();
  /** The transaction holding the gate, if any. */
  private active: TxFrame | null = null;
  private readonly txDb: Tx;

  /**
   * Set once the WAL could not be fsynced: every later write is refused with it. After a failed
   * fsync the kernel may have dropped the dirty pages and cleared the error, so a retry on a new
   * descriptor can succeed while earlier commits are not on disk (PostgreSQL's "fsyncgate",
   * 2018): nothing may be answered as stored again until a restart has recovered from the file.
   */
  private broken: Error | undefined;

  /**
   * @param fatal called once when the WAL cannot be fsynced; the process (src/context.ts) logs
   *   and exits non-zero there, as PostgreSQL panics. Writes are refused from that moment on.
   */
  readonly client: Database.Database;
  private readonly fatal: (err: Error) => void;

  constructor(client: Database.Database, fatal: (err: Error) => void = () => undefined) {
    super();
    this.client = client;
    this.fatal = fatal;
    const inTransaction: Executor = {
      dialect: 'sqlite',
      exec: async (source, params, method) => {
        if (!this.active || openFrame(this) !== this.active) throw new Error('a transaction handle used outside its transaction');
        return this.execute(source, params, method);
      },
    };
    const outside: Executor = {
      dialect: 'sqlite',
      exec: async (source, params, method) => {
        if (!this.gate.held) return this.execute(source, params, method);
        // Inside a transaction's call chain the store's handle is the transaction's (Store.transaction).
        if (this.active && openFrame(this) === this.active) return this.execute(source, params, method);
        await this.gate.enter();
        try {
          return this.execute(source, params, method);
        } finally {
          this.gate.leave();
        }
      },
    };
    this.db = handleFor(outside) as Tx;
    this.txDb = handleFor(inTransaction) as Tx;
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const joined = openFrame(this);
    if (joined && joined === this.active) return work(joined.db);
    if (this.broken) throw this.broken;
    await this.gate.enter();
    const frame = this.frame();
    this.active = frame;
    try {
      this.statement('BEGIN IMMEDIATE').run();
      let result: T;
      try {
        result = await runWork(frame, work);
        await settleWrites(frame);
      } catch (err) {
        if (this.client.inTransaction) this.statement('ROLLBACK').run();
        throw err;
      }
      this.statement('COMMIT').run();
      runHooks(frame);
      return result;
    } finally {
      this.active = null;
      this.gate.leave();
    }
  }

  grouped<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const joined = openFrame(this);
    if (joined && joined === this.active) return work(joined.db);
    if (this.broken) return Promise.reject(this.broken);
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (v: unknown) => void, reject });
      this.scheduleBatch();
    });
  }

  externalCommits(): () => boolean {
    // SQLite's data_version changes only for commits made by other connections, so the
    // server's own writes never trip it; one pragma read costs ~1 µs.
    const version = this.client.prepare('PRAGMA data_version').pluck();
    let seen = version.get() as number;
    return () => {
      const now = version.get() as number;
      if (now === seen) return false;
      seen = now;
      return true;
    };
  }

  /** The checkpoint the callers of this turn of the event loop share (deletions in a burst). */
  private checkpointing: Promise<void> | undefined;

  checkpoint(): Promise<void> {
    // The log is copied into the database and truncated to zero bytes, so page images of
    // deleted rows do not linger in it. Best effort: readers in progress may keep some frames.
    // Every deletion asks for one: those asking in the same turn share it.
    return (this.checkpointing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      this.checkpointing = undefined;
      await this.gate.enter();
      try {
        this.client.pragma('wal_checkpoint(TRUNCATE)');
      } finally {
        this.gate.leave();
      }
    }));
  }

  async lock(): Promise<void> {}

  exclusive<T>(_name: string, work: () => Promise<T>): Promise<T> {
    return work();
  }

  announce(): void {}

  listen(): void {}

  async ping(): Promise<void> {
    this.statement('SELECT 1').get();
  }

  private frame(): TxFrame {
    return { owner: this, db: this.txDb, hooks: [], pending: [], open: true };
  }

  /** Run first when the store closes (the search worker threads: ./search-reader.ts). */
  readonly onClose: Array<() => Promise<void>> = [];

  /** The database file, or null in memory (a worker thread can open only a file). */
  get file(): string | null {
    return this.wal ? this.client.name : null;
  }

  async close(): Promise<void> {
    await Promise.all(this.onClose.map((fn) => fn()));
    const handle = this.walHandle;
    this.walHandle = undefined;
    await handle?.then((fh) => fh.close()).catch(() => undefined);
    // Work still under way (a job attempt left running past the shutdown grace) is refused
    // with this error from here on, instead of reaching the closed connection.
    this.broken ??= new Error('the database is closed');
    this.client.close();
  }

  // Group commit: the writers of one moment share one COMMIT and one fsync of the WAL.

  private queue: Pending[] = [];
  private batchScheduled = false;
  private walHandle: Promise<FileHandle> | undefined;

  /** The WAL file this connection commits to ('' for an in-memory database). */
  private get wal(): string {
    const name = this.client.name;
    return this.client.memory || !name || name === ':memory:' ? '' : `${name}-wal`;
  }

  private scheduleBatch(): void {
    if (this.batchScheduled) return;
    this.batchScheduled = true;
    // setImmediate runs after the current poll phase, so every writer whose files finished
    // in the same turn of the event loop joins this batch; while a batch commits the next one
    // fills up, so batches grow with the load by themselves.
    setImmediate(() => {
      this.batchScheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue.splice(0, MAX_BATCH);
    if (this.queue.length) this.scheduleBatch();
    if (batch.length === 0) return;
    if (this.broken) return batch.forEach((p) => p.reject(this.broken));
    // The COMMIT skips SQLite's own WAL fsync (synchronous=NORMAL for this one transaction) and
    // the WAL is fsynced in the libuv pool below, so the event loop keeps serving SMTP sessions
    // during the flush. Other writers on the connection keep FULL: their own fsyncs cover these
    // frames too. Checkpoints still sync in NORMAL mode.
    const deferSync = this.wal !== '';
    let outcomes: Outcome[];
    await this.gate.enter();
    try {
      if (deferSync) this.statement('PRAGMA synchronous = NORMAL').run();
      // Without savepoints first: at every SAVEPOINT and RELEASE, FTS5 writes the index entries
      // pending in memory out as a segment of their own, so a savepoint per writer made a
      // segment per stored message, and the merges of those small segments ran in the COMMIT
      // (a spooled burst of 1,000 text and HTML messages: RELEASE 1.3-1.9 ms and COMMIT 2.0-3.6
      // ms of the event loop per message, against none and 1.2 ms without). Only when a writer
      // throws is the batch rolled back and run again with a savepoint each, so that writer is
      // undone alone. A writer is a transaction's work, which may run more than once
      // (PostgreSQL runs it again after a deadlock, too).
      outcomes = (await this.runBatch(batch, false)) ?? (await this.runBatch(batch, true))!;
    } catch (err) {
      if (this.client.inTransaction) this.statement('ROLLBACK').run();
      for (const p of batch) p.reject(err);
      return;
    } finally {
      if (deferSync) this.statement('PRAGMA synchronous = FULL').run();
      this.active = null;
      this.gate.leave();
    }
    const settle = (syncErr?: unknown) =>
      batch.forEach((p, i) => {
        const o = outcomes[i];
        // Committed but not known to be on disk: report failure (the sender retries; a
        // duplicate copy is better than a 250 for mail that could be lost).
        if (o.ok) runHooks(o.frame);
        if (syncErr !== undefined && o.ok) p.reject(syncErr);
        else if (o.ok) p.resolve(o.value);
        else p.reject(o.err);
      });
    if (!deferSync || !outcomes.some((o) => o.ok)) return settle();
    await this.syncWal().then(
      () => settle(),
      (err: unknown) => {
        // Not retried on a new descriptor: fatal (see `broken`). The batch is refused first.
        const cause = err instanceof Error ? err : new Error(String(err));
        const fatal = this.broken
          ? undefined
          : (this.broken = Object.assign(new Error(`the write-ahead log could not be fsynced (${cause.message}); writes are refused until a restart`, { cause }), {
              code: (cause as NodeJS.ErrnoException).code,
            }));
        settle(cause);
        if (fatal) this.fatal(fatal);
      },
    );
  }

  /**
   * Runs a batch's writers in one transaction, up to its COMMIT. Without savepoints it answers
   * undefined, rolled back, as soon as one throws; with them that one is undone alone. Alone, a
   * writer needs no savepoint: its throw rolls back the whole transaction and is the batch's.
   */
  private async runBatch(batch: Pending[], savepoints: boolean): Promise<Outcome[] | undefined> {
    const outcomes: Outcome[] = [];
    this.statement('BEGIN IMMEDIATE').run();
    for (const p of batch) {
      if (savepoints) this.statement('SAVEPOINT grouped').run();
      const frame = this.frame();
      this.active = frame;
      try {
        const value = await runWork(frame, p.work);
        await settleWrites(frame);
        outcomes.push({ ok: true, value, frame });
        if (savepoints) this.statement('RELEASE grouped').run();
      } catch (err) {
        // Some errors (a full disk) end the whole transaction: nothing of the batch is kept.
        if (batch.length === 1 || !this.client.inTransaction) throw err;
        if (!savepoints) {
          this.statement('ROLLBACK').run();
          return undefined;
        }
        this.statement('ROLLBACK TO grouped').run();
        this.statement('RELEASE grouped').run();
        outcomes.push({ ok: false, err });
      }
    }
    this.statement('COMMIT').run();
    return outcomes;
  }

  /**
   * fsync of the WAL through one descriptor kept open (any descriptor of a file flushes its
   * data): an open and a close per batch cost more than the fsync's own CPU (bench/ profile of
   * SMTP spooling). SQLite keeps the WAL file while this connection is open and rewrites it in
   * place. An error is fatal to the store (flush).
   */
  private async syncWal(): Promise<void> {
    this.walHandle ??= fs.open(this.wal, 'r+');
    await (await this.walHandle).sync();
  }

  private execute(source: string, given: unknown[], method: Method): { rows: unknown; changes?: number } {
    const stmt = this.statement(source);
    const params = withoutNul(given);
    if (method === 'run' || !stmt.reader) {
      const r = stmt.run(...params);
      return { rows: [], changes: r.changes };
    }
    stmt.raw(true);
    if (method === 'get') return { rows: stmt.get(...params) };
    return { rows: stmt.all(...params) };
  }

  private statement(source: string): Database.Statement {
    let stmt = this.statements.get(source);
    if (stmt) return stmt;
    stmt = this.client.prepare(source);
    if (this.statements.size >= STATEMENT_CACHE_SIZE) this.statements.delete(this.statements.keys().next().value!);
    this.statements.set(source, stmt);
    return stmt;
  }
}
