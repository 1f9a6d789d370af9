// Group commit: the transactions of many concurrent writers (inbound messages arriving on 50
// SMTP sessions at once) share one SQLite COMMIT and one fsync of the WAL. Each writer's work
// runs in its own savepoint, so one that throws rolls back only its rows; every promise
// settles only after the WAL holding the shared COMMIT is fsynced: resolved means on disk.
import { promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { Db, Tx } from './client.ts';

interface Pending {
  work: (tx: Tx) => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Most writers in one transaction: bounds how long one COMMIT holds the event loop. */
const MAX_BATCH = 256;

class GroupCommitter {
  private queue: Pending[] = [];
  private scheduled = false;

  /** The WAL file this connection commits to ('' for an in-memory database). */
  private readonly wal: string;

  /**
   * Runs one writer in a SAVEPOINT: better-sqlite3's own nesting, whose statements are prepared
   * once, rather than drizzle's, which builds and prepares `savepoint spN` for every writer
   * (bench/: a third of the batch's time in the SMTP spool profile).
   */
  private readonly savepoint: (work: (tx: Tx) => unknown, tx: Tx) => unknown;

  constructor(private readonly db: Db) {
    this.savepoint = db.$client.transaction((work: (tx: Tx) => unknown, tx: Tx) => work(tx));
    const name = db.$client.name;
    this.wal = db.$client.memory || !name || name === ':memory:' ? '' : `${name}-wal`;
  }

  run<T>(work: (tx: Tx) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate runs after the current poll phase, so every writer whose files finished
    // in the same turn of the event loop joins this batch; while a COMMIT's fsync blocks the
    // loop the next batch fills up, so batches grow with the load by themselves.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const batch = this.queue.splice(0, MAX_BATCH);
    if (this.queue.length) this.schedule();
    if (batch.length === 0) return;
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; err: unknown }> = [];
    // The COMMIT skips SQLite's own WAL fsync (synchronous=NORMAL for this one transaction) and
    // the WAL is fsynced in the libuv pool below, so the event loop keeps serving SMTP sessions
    // during the flush instead of blocking in it. Other writers on the connection keep FULL:
    // their own fsyncs cover these frames too. Checkpoints still sync in NORMAL mode.
    const deferSync = this.wal !== '';
    if (deferSync) this.db.$client.pragma('synchronous = NORMAL');
    try {
      this.db.transaction((tx) => {
        if (batch.length === 1) {
          // Alone: no savepoint needed, a throw rolls back the whole (one-writer) transaction.
          outcomes.push({ ok: true, value: batch[0].work(tx) });
          return;
        }
        for (const p of batch) {
          try {
            outcomes.push({ ok: true, value: this.savepoint(p.work, tx) });
          } catch (err) {
            outcomes.push({ ok: false, err });
          }
        }
      });
    } catch (err) {
      // The shared COMMIT failed (or the lone writer threw): nothing of this batch is stored.
      for (const p of batch) p.reject(err);
      return;
    } finally {
      if (deferSync) this.db.$client.pragma('synchronous = FULL');
    }
    const settle = (syncErr?: unknown) =>
      batch.forEach((p, i) => {
        const o = outcomes[i];
        // Committed but not known to be on disk: report failure (the sender retries; a
        // duplicate copy is better than a 250 for mail that could be lost).
        if (syncErr !== undefined && o.ok) p.reject(syncErr);
        else if (o.ok) p.resolve(o.value);
        else p.reject(o.err);
      });
    if (!deferSync || !outcomes.some((o) => o.ok)) return settle();
    this.syncWal().then(() => settle(), settle);
  }

  /**
   * fsync of the WAL through one descriptor kept open (any descriptor of a file flushes its
   * data): an open and a close per batch cost more than the fsync's own CPU (bench/ profile of
   * SMTP spooling). SQLite keeps the WAL file while this connection is open (it deletes it only
   * when the last connection closes) and rewrites it in place. On any error the descriptor is
   * dropped and the next batch opens the file again.
   */
  private async syncWal(): Promise<void> {
    this.walHandle ??= fs.open(this.wal, 'r+');
    const handle = this.walHandle;
    try {
      await (await handle).sync();
    } catch (err) {
      if (this.walHandle === handle) this.walHandle = undefined;
      void handle.then((fh) => fh.close()).catch(() => undefined);
      throw err;
    }
  }

  /** Closes the kept WAL descriptor (when the database closes). */
  close(): void {
    const handle = this.walHandle;
    this.walHandle = undefined;
    void handle?.then((fh) => fh.close()).catch(() => undefined);
  }

  private walHandle: Promise<FileHandle> | undefined;
}

const committers = new WeakMap<Db, GroupCommitter>();

/** Releases what the group committer of `db` holds open; call before closing the database. */
export function closeGroupCommit(db: Db): void {
  committers.get(db)?.close();
  committers.delete(db);
}

/**
 * Runs `work` in a transaction shared with other writers of the same moment; resolves with its
 * result once that transaction has committed (rejects with what `work` threw, its savepoint
 * rolled back). `work` is synchronous, like every better-sqlite3 transaction.
 */
export function commitGrouped<T>(db: Db, work: (tx: Tx) => T): Promise<T> {
  let c = committers.get(db);
  if (!c) committers.set(db, (c = new GroupCommitter(db)));
  return c.run(work);
}
