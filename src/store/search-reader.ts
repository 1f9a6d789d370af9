// Searches under a time budget, off the event loop (issue 27, PRODUCT.md "Bounded cost"). A
// full-text search costs what the shared index holds, not what the caller's account holds, so
// each one runs with a deadline and in one of a few slots (`[limits] concurrent_searches`):
//
// - SQLite: better-sqlite3 can neither interrupt a statement nor call back while it runs, so
//   searches run in worker threads (./search-worker.mjs), each with its own read-only connection
//   to the WAL database. Past the deadline the worker is terminated and the search rejected at
//   once; the thread ends when its statement does, and its slot is free only then, so abandoned
//   statements never take more than the slots' CPU.
// - PostgreSQL: each search is one read-only transaction with `SET LOCAL statement_timeout`, so
//   the server cancels a statement past the deadline; the slots bound the pool connections
//   searches hold, and leave the rest to everything else.
//
// A search waiting for a slot waits within its deadline.
import { Worker } from 'node:worker_threads';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SqliteStore } from './sqlite.ts';
import { handleFor, openFrame, rawRun, withoutNul, type Method, type Store, type Tx } from './store.ts';

/** A search ran past its deadline (the domain answers 503 SEARCH_TIMEOUT). */
export class SearchTimeoutError extends Error {
  constructor() {
    super('the search ran past its time budget');
    this.name = 'SearchTimeoutError';
  }
}

let workerStart: { source: () => string; addonPath: string } | undefined;
/** Inside the single executable the worker is a bundled asset run with eval, with the addon's cached path (src/sea.ts). */
export function setSearchWorkerSource(source: () => string, addonPath: string): void {
  workerStart = { source, addonPath };
}

export interface SearchReader {
  /**
   * Runs the read-only `work` before `deadline` (ms since the epoch), or rejects with
   * SearchTimeoutError. Calls `freed` once its slot is free again: when it settles, or, on
   * SQLite past the deadline, when the abandoned statement has ended.
   */
  run<T>(deadline: number, work: (db: Tx) => Promise<T>, freed: () => void): Promise<T>;
}

/** A FIFO of callers waiting for one of `size` slots, each until its deadline. */
class Slots {
  private used = 0;
  private readonly waiting: Array<{ grant: () => void; timer: NodeJS.Timeout }> = [];
  private readonly size: number;
  constructor(size: number) {
    this.size = size;
  }

  take(deadline: number): Promise<void> {
    if (this.used < this.size) {
      this.used++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const entry = {
        grant: () => {
          clearTimeout(entry.timer);
          resolve();
        },
        timer: setTimeout(
          () => {
            this.waiting.splice(this.waiting.indexOf(entry), 1);
            reject(new SearchTimeoutError());
          },
          Math.max(0, deadline - Date.now()),
        ),
      };
      this.waiting.push(entry);
    });
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.used--;
  }
}

const readers = new WeakMap<Store, SearchReader>();

/** The search reader of `store`, made at its first search with `slots` slots. */
export function searchReaderOf(store: Store, slots: number): SearchReader {
  let reader = readers.get(store);
  if (!reader) {
    if (store instanceof SqliteStore && store.file) {
      const sqlite = new SqliteReader(store.file, slots);
      store.onClose.push(() => sqlite.close());
      reader = sqlite;
    } else {
      reader = store.dialect === 'postgres' ? postgresReader(store, slots) : mainThreadReader(store, slots);
    }
    readers.set(store, reader);
  }
  return reader;
}

/** PostgreSQL: one read-only transaction per search, its statements cancelled by the server past the deadline. */
function postgresReader(store: Store, size: number): SearchReader {
  const slots = new Slots(size);
  return {
    async run(deadline, work, freed) {
      // Inside a caller's transaction, the search is part of it (and of its connection).
      if (openFrame(store)) return work(store.db).finally(freed);
      await slots.take(deadline).catch((err: unknown) => {
        freed();
        throw err;
      });
      try {
        return await store.transaction(async (tx) => {
          await rawRun(tx, 'SET TRANSACTION READ ONLY');
          const left = deadline - Date.now();
          if (left <= 0) throw new SearchTimeoutError();
          await store.rows(tx, "SELECT set_config('statement_timeout', ?, true)", [`${left}ms`]);
          return work(tx);
        });
      } catch (err) {
        // 57014 query_canceled: statement_timeout fired.
        if ((err as { code?: string }).code === '57014' || (err as { cause?: { code?: string } }).cause?.code === '57014') throw new SearchTimeoutError();
        throw err;
      } finally {
        slots.give();
        freed();
      }
    },
  };
}

/** An in-memory SQLite database has no file for a worker to open: slots only. */
function mainThreadReader(store: Store, size: number): SearchReader {
  const slots = new Slots(size);
  return {
    async run(deadline, work, freed) {
      await slots.take(deadline).catch((err: unknown) => {
        freed();
        throw err;
      });
      try {
        return await work(store.db);
      } finally {
        slots.give();
        freed();
      }
    },
  };
}

interface Pending {
  resolve(rows: unknown): void;
  reject(err: unknown): void;
}

/** One worker thread and the statements sent to it. */
class SearchWorker {
  readonly thread: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  /** Resolves when the thread has ended (its statement included). */
  readonly ended: Promise<void>;
  /** False once the thread failed or ended: never handed out again. */
  alive = true;

  constructor(file: string) {
    const workerData = { file, addonPath: workerStart?.addonPath };
    // No heap limit of its own: it reads the rows (bodies included) the main thread read before.
    const options = { workerData };
    if (workerStart) this.thread = new Worker(workerStart.source(), { ...options, eval: true });
    else {
      const script = new URL('./search-worker.mjs', import.meta.url);
      if (!existsSync(fileURLToPath(script))) throw new Error('the search worker script is missing');
      this.thread = new Worker(script, options);
    }
    this.thread.unref();
    this.thread.on('message', (msg: { id: number; rows?: unknown; error?: { message: string; code?: string } }) => {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (msg.error) p?.reject(Object.assign(new Error(msg.error.message), { code: msg.error.code }));
      else p?.resolve(msg.rows);
    });
    this.ended = new Promise((resolve) => {
      const fail = (err: Error) => {
        this.alive = false;
        for (const p of this.pending.values()) p.reject(err);
        this.pending.clear();
      };
      this.thread.on('error', fail);
      this.thread.on('exit', () => {
        fail(new Error('the search worker stopped'));
        resolve();
      });
    });
  }

  exec(sql: string, params: unknown[], method: Method): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.thread.postMessage({ id, sql, params: withoutNul(params), method });
    });
  }
}

/** SQLite: up to `size` worker threads; a search takes an idle one, or starts one, or waits. */
class SqliteReader implements SearchReader {
  private readonly idle: SearchWorker[] = [];
  private readonly all = new Set<SearchWorker>();
  private readonly slots: Slots;
  private readonly file: string;

  constructor(file: string, size: number) {
    this.file = file;
    this.slots = new Slots(size);
  }

  async run<T>(deadline: number, work: (db: Tx) => Promise<T>, freed: () => void): Promise<T> {
    await this.slots.take(deadline).catch((err: unknown) => {
      freed();
      throw err;
    });
    const give = () => {
      this.slots.give();
      freed();
    };
    let worker: SearchWorker;
    try {
      worker = this.idle.pop() ?? this.start();
    } catch (err) {
      give();
      throw err;
    }
    let expired = false;
    let stop!: (err: Error) => void;
    const stopped = new Promise<never>((_, reject) => (stop = reject));
    stopped.catch(() => undefined);
    const timer = setTimeout(
      () => {
        expired = true;
        stop(new SearchTimeoutError());
      },
      Math.max(0, deadline - Date.now()),
    );
    const db = handleFor({
      dialect: 'sqlite',
      exec: async (source, params, method) => {
        if (expired) throw new SearchTimeoutError();
        return { rows: await Promise.race([worker.exec(source, params, method), stopped]) };
      },
    });
    try {
      return await Promise.race([work(db as Tx), stopped]);
    } finally {
      clearTimeout(timer);
      if (expired) {
        // The thread may be inside a statement: it ends when the statement does, and only then
        // is its slot free.
        this.all.delete(worker);
        void worker.thread.terminate();
        void worker.ended.then(give);
      } else {
        if (worker.alive) this.idle.push(worker);
        give();
      }
    }
  }

  private start(): SearchWorker {
    const worker = new SearchWorker(this.file);
    this.all.add(worker);
    // A thread that dies (startup error) is never handed out again.
    void worker.ended.then(() => {
      this.all.delete(worker);
      const i = this.idle.indexOf(worker);
      if (i >= 0) this.idle.splice(i, 1);
    });
    return worker;
  }

  async close(): Promise<void> {
    await Promise.all([...this.all].map((w) => w.thread.terminate()));
  }
}
