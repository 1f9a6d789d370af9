// The PostgreSQL adapter: a pool of connections (node-postgres, `pg`), each statement prepared
// once per connection under a name derived from its text. A transaction holds one connection
// for its whole callback. int8 and numeric values come back as JavaScript numbers, as SQLite
// gives them: every integer mailroom stores (counts, sizes, times in ms) stays below 2^53.
//
// Why `pg` and not `postgres` (bench (l), docs/performance.md): on this 2-core machine, with a
// durable cluster and 16 callers, point reads are even (22.2k/s against 22.1k/s) and one-row
// insert transactions 1.75–2.15× faster with `pg` over three runs (p99 7.5 ms against 11.3 ms).
import { createHash } from 'node:crypto';
import pg from 'pg';
import { toPostgres } from './placeholders.ts';
import { handleFor, openFrame, runHooks, runWork, type Db, type TxFrame, type Method, type Store, StoreBase } from './store.ts';

const asNumber = (text: string) => Number(text);
const TYPES = {
  getTypeParser: ((oid: number, format?: string) => (oid === 20 || oid === 1700 ? asNumber : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser,
};

export interface PostgresOptions {
  /** Connections in the pool (default 10). */
  max?: number;
}

export function connectPostgres(url: string, opts: PostgresOptions = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 10, types: TYPES });
  // An idle connection the server drops (restart, failover) must not end the process; the next
  // query opens a new one.
  pool.on('error', () => {});
  return pool;
}

const names = new Map<string, string>();
/** A prepared statement's name: the same for the same text on every connection. */
function statementName(text: string): string {
  let name = names.get(text);
  if (!name) {
    name = `m${createHash('sha1').update(text).digest('base64url').slice(0, 20)}`;
    if (names.size >= 2000) names.clear();
    names.set(text, name);
  }
  return name;
}

/** Runs a statement on `on` (the pool, or the one connection of a transaction). */
async function execOn(on: pg.Pool | pg.PoolClient, source: string, params: unknown[], method: Method) {
  const text = toPostgres(source);
  const r = await on.query({ name: statementName(text), text, values: params, rowMode: 'array' });
  if (method === 'run') return { rows: [], changes: r.rowCount ?? 0 };
  return { rows: method === 'get' ? r.rows[0] : r.rows, changes: r.rowCount ?? 0 };
}

export class PostgresStore extends StoreBase implements Store {
  readonly dialect = 'postgres' as const;
  readonly db: Db;
  /**
   * One handle for every transaction: its statements run on the connection of the transaction
   * the call chain is in, so queries prepared once per handle (src/db/prepared.ts) serve all.
   */
  private readonly txDb: Db;

  constructor(readonly pool: pg.Pool) {
    super();
    // Inside a transaction's call chain the store's handle is the transaction's (Store.transaction);
    // work the transaction started and left running finds it closed, and uses the pool.
    const open = () => openFrame<pg.PoolClient>(this)?.client;
    this.db = handleFor({ exec: (source, params, method) => execOn(open() ?? pool, source, params, method) });
    const current = (): pg.PoolClient => {
      const client = open();
      if (!client) throw new Error('a transaction handle used outside its transaction');
      return client;
    };
    this.txDb = handleFor({ exec: (source, params, method) => execOn(current(), source, params, method) });
  }

  async transaction<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    if (openFrame(this)) return work(this.txDb);
    const client = await this.pool.connect();
    let broken: Error | undefined;
    const frame: TxFrame<pg.PoolClient> = { owner: this, db: this.txDb, client, hooks: [], open: true };
    try {
      await client.query('BEGIN');
      try {
        const result = await runWork(frame, work);
        await client.query('COMMIT');
        runHooks(frame);
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch((e: Error) => (broken = e));
        throw err;
      }
    } finally {
      // A connection whose ROLLBACK failed is in an unknown state: the pool drops it.
      client.release(broken);
    }
  }

  grouped<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    return this.transaction(work);
  }

  externalCommits(): () => boolean {
    // Other nodes commit all the time; until they announce it, look again at every check.
    return () => true;
  }

  async checkpoint(): Promise<void> {}

  async lock(tx: Db, key: string): Promise<void> {
    await this.rows(tx, 'SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [key]);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
