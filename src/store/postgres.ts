// The PostgreSQL adapter: a pool of connections (the `postgres` client), each statement
// prepared once per connection by the server. A transaction reserves one connection for its
// whole callback. int8 and numeric values come back as JavaScript numbers, as SQLite gives them:
// every integer mailroom stores (counts, sizes, times in ms) stays below 2^53.
import postgres from 'postgres';
import { toNumberedPlaceholders } from './placeholders.ts';
import { currentTransaction, handleFor, rawRows, rawRun, type Db, type Executor, type Method, type Store } from './store.ts';

type Sql = postgres.Sql<Record<string, postgres.PostgresType>>;

const asNumber = { serialize: (x: unknown) => String(x), parse: (x: string) => Number(x) };

export interface PostgresOptions {
  /** Connections in the pool (default 10). */
  max?: number;
}

export function connectPostgres(url: string, opts: PostgresOptions = {}): Sql {
  return postgres(url, {
    max: opts.max ?? 10,
    onnotice: () => {},
    types: {
      int8: { to: 20, from: [20], ...asNumber },
      numeric: { to: 1700, from: [1700], ...asNumber },
    },
  }) as unknown as Sql;
}

function executorOn(sql: Sql | postgres.TransactionSql): Executor {
  return {
    async exec(source: string, params: unknown[], method: Method) {
      const query = sql.unsafe(toNumberedPlaceholders(source), params as postgres.ParameterOrJSON<never>[], { prepare: true });
      if (method === 'run') {
        const r = await query;
        return { rows: [], changes: r.count };
      }
      // The client's result is an Array subclass carrying metadata; callers get a plain array.
      const rows = await query.values();
      return { rows: method === 'get' ? rows[0] : Array.from(rows), changes: rows.count };
    },
  };
}

export class PostgresStore implements Store {
  readonly dialect = 'postgres' as const;
  readonly db: Db;
  private readonly open = new Set<Db>();

  constructor(readonly sql: Sql) {
    this.db = handleFor(executorOn(sql));
  }

  async transaction<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    const joined = currentTransaction.getStore();
    if (joined && this.open.has(joined)) return work(joined);
    return (await this.sql.begin(async (t) => {
      const tx = handleFor(executorOn(t));
      this.open.add(tx);
      try {
        return await currentTransaction.run(tx, () => work(tx));
      } finally {
        this.open.delete(tx);
      }
    })) as T;
  }

  rows<R extends unknown[]>(db: Db, source: string, params: unknown[] = []): Promise<R[]> {
    return rawRows<R>(db, source, params);
  }

  run(db: Db, source: string, params: unknown[] = []): Promise<number> {
    return rawRun(db, source, params);
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 5 });
  }
}
