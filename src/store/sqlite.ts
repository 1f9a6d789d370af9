// The embedded SQLite adapter: one better-sqlite3 connection per process. Statements run
// synchronously inside their promise, so a query costs what it cost before the port plus one
// resolved promise. A transaction holds a gate: statements from outside it wait until it
// commits instead of landing in it (they would, on the one connection).
import type Database from 'better-sqlite3';
import { currentTransaction, handleFor, type Db, type Executor, type Method, type Store, StoreBase } from './store.ts';

/** Distinct SQL texts kept compiled; `IN (?, ?, …)` lists of varying length make new texts. */
const STATEMENT_CACHE_SIZE = 500;

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
  readonly db: Db;
  private readonly gate = new Gate();
  private readonly statements = new Map<string, Database.Statement>();
  /** The handle of the transaction holding the gate, if any. */
  private active: Db | null = null;
  private readonly txDb: Db;

  constructor(readonly client: Database.Database) {
    super();
    const direct: Executor = { exec: async (source, params, method) => this.execute(source, params, method) };
    const outside: Executor = {
      exec: async (source, params, method) => {
        if (!this.gate.held) return this.execute(source, params, method);
        if (this.active && currentTransaction.getStore() === this.active) {
          throw new Error('a statement on the store handle inside a transaction: use the transaction handle');
        }
        await this.gate.enter();
        try {
          return this.execute(source, params, method);
        } finally {
          this.gate.leave();
        }
      },
    };
    this.db = handleFor(outside);
    this.txDb = handleFor(direct);
  }

  async transaction<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    const joined = currentTransaction.getStore();
    if (joined && joined === this.active) return work(joined);
    await this.gate.enter();
    const tx = this.txDb;
    this.active = tx;
    try {
      this.statement('BEGIN IMMEDIATE').run();
      let result: T;
      try {
        result = await currentTransaction.run(tx, () => work(tx));
      } catch (err) {
        if (this.client.inTransaction) this.statement('ROLLBACK').run();
        throw err;
      }
      this.statement('COMMIT').run();
      return result;
    } finally {
      this.active = null;
      this.gate.leave();
    }
  }

  async close(): Promise<void> {
    this.client.close();
  }

  private execute(source: string, params: unknown[], method: Method): { rows: unknown; changes?: number } {
    const stmt = this.statement(source);
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
