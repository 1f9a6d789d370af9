// The PostgreSQL adapter: a pool of connections (node-postgres, `pg`), each statement prepared
// once per connection under a name derived from its text. A transaction holds one connection
// for its whole callback. int8 and numeric values come back as JavaScript numbers, as SQLite
// gives them: every integer mailroom stores (counts, sizes, times in ms) stays below 2^53.
//
// Why `pg` and not `postgres` (bench (l), docs/performance.md): on this 2-core machine, with a
// durable cluster and 16 callers, point reads are even (22.2k/s against 22.1k/s) and one-row
// insert transactions 1.75–2.15× faster with `pg` over three runs (p99 7.5 ms against 11.3 ms).
import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { errorFields, type Logger } from '../log.ts';
import { toPostgres } from './placeholders.ts';
import { PLAN_EACH_TIME, handleFor, isApiWork, openFrame, withoutNul, runHooks, runWork, settleWrites, type Db, type Tx, type TxFrame, type Method, type Store, StoreBase } from './store.ts';

const asNumber = (text: string) => Number(text);
const TYPES = {
  getTypeParser: ((oid: number, format?: string) => (oid === 20 || oid === 1700 ? asNumber : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser,
};

export interface PostgresOptions {
  /** Connections in the pool (default 10; `database.connections`). */
  max?: number;
  /** Connections of the API's own pool (`database.api_connections`; 0 or absent: it shares the one pool). */
  apiMax?: number;
  /** The `[database]` budgets (config.ts); without them (`mailroom migrate`) none applies. */
  limits?: { connect_timeout: number; statement_timeout: number; idle_in_transaction_timeout: number; keepalive: number };
  /** Where the errors of idle connections go. */
  log?: Logger;
}

export function connectPostgres(url: string, opts: PostgresOptions = {}, max = opts.max ?? 10): pg.Pool {
  const l = opts.limits;
  const pool = new pg.Pool({
    connectionString: url,
    max,
    types: TYPES,
    // Statements given to one connection before the previous one's answer are written at once
    // (pg's pipeline mode, each with its own Sync): a transaction's BEGIN goes with its first
    // statement (transactionOnce), a write sent along (sendAlong, src/store/store.ts) with the
    // statements after it. Callers that await each statement see no difference.
    pipeline: true,
    // Each bounds a way a connection could hang for ever: an unreachable server at connect, a
    // stuck statement, a transaction left open, a peer gone without a FIN. The two server
    // settings are sent at connection start-up (the LISTEN connection copies these options).
    ...(l && {
      connectionTimeoutMillis: l.connect_timeout,
      statement_timeout: l.statement_timeout,
      idle_in_transaction_session_timeout: l.idle_in_transaction_timeout,
      keepAlive: l.keepalive > 0,
      keepAliveInitialDelayMillis: l.keepalive,
    }),
  });
  // An idle connection the server drops (restart, failover, a timeout) must not end the
  // process; the next query opens a new one. It is logged: a lost database is not silent.
  pool.on('error', (err) => opts.log?.warn('database connection lost', errorFields(err)));
  // A connection lost while checked out (the server ended an idle transaction, a restart) emits
  // 'error' on its client too: without a listener that is an uncaught exception that ends the
  // process. The statement it was running fails on its own, and the pool drops the client.
  pool.on('connect', (client) => client.on('error', (err) => opts.log?.warn('database connection lost', errorFields(err))));
  return pool;
}

/** The NOTIFY channel the nodes of one database share. */
const CHANNEL = 'mailroom';

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

/** A connection's socket, which pg writes each message of a statement to. */
type Corkable = { connection?: { stream?: { cork?(): void; uncork?(): void } } };
const corked = new WeakSet<object>();

/**
 * Holds what a transaction's connection is given until the statements of this turn are all
 * written, then sends them in one write. pg corks each statement's Parse, Bind, Execute and Sync
 * together, but writes every statement on its own: a BEGIN and the statement behind it, writes
 * sent along and the read after them, each a `writev` on loopback that wakes the backend.
 * Released in a process.nextTick. Where the statement was issued from a promise continuation,
 * that runs once the microtasks then queued have run (the awaits between one statement and the
 * next: a transaction of writes alone goes out whole, COMMIT included); from an I/O or timer
 * callback, before them (the statements issued in that callback go together).
 */
function corkForTurn(client: pg.PoolClient): void {
  const stream = (client as unknown as Corkable).connection?.stream;
  if (!stream?.cork || !stream.uncork || corked.has(stream)) return;
  corked.add(stream);
  stream.cork();
  process.nextTick(() => {
    corked.delete(stream);
    stream.uncork!();
  });
}

/** Runs a statement on `on` (the pool, or the one connection of a transaction). */
async function execOn(on: pg.Pool | pg.PoolClient, source: string, params: unknown[], method: Method) {
  const text = toPostgres(source);
  if (!(on instanceof pg.Pool)) corkForTurn(on);
  const r = await on.query({ name: text.startsWith(PLAN_EACH_TIME) ? undefined : statementName(text), text, values: withoutNul(params), rowMode: 'array' });
  if (method === 'run') return { rows: [], changes: r.rowCount ?? 0 };
  return { rows: method === 'get' ? r.rows[0] : r.rows, changes: r.rowCount ?? 0 };
}

export class PostgresStore extends StoreBase implements Store {
  readonly dialect = 'postgres' as const;
  readonly db: Tx;
  /**
   * One handle for every transaction: its statements run on the connection of the transaction
   * the call chain is in, so queries prepared once per handle (src/store/prepared.ts) serve all.
   */
  private readonly txDb: Tx;
  /** Mail's connections (SMTP, the job runner), the NOTIFYs and exclusive work; the API's too without apiPool. */
  readonly pool: pg.Pool;
  /** The API's own connections (isApiWork: HTTP requests, IMAP sessions), when configured. */
  private readonly apiPool: pg.Pool | undefined;

  constructor(pool: pg.Pool, apiPool?: pg.Pool) {
    super();
    this.pool = pool;
    this.apiPool = apiPool;
    // Inside a transaction's call chain the store's handle is the transaction's (Store.transaction);
    // work the transaction started and left running finds it closed, and uses the pool.
    const open = () => openFrame<pg.PoolClient>(this)?.client;
    this.db = handleFor({ dialect: 'postgres', exec: (source, params, method) => execOn(open() ?? this.poolOfWork(), source, params, method) }) as Tx;
    const current = (): pg.PoolClient => {
      const client = open();
      if (!client) throw new Error('a transaction handle used outside its transaction');
      return client;
    };
    this.txDb = handleFor({ dialect: 'postgres', exec: (source, params, method) => execOn(current(), source, params, method) }) as Tx;
  }

  /** The pool the current call chain's statements take a connection from. */
  private poolOfWork(): pg.Pool {
    return this.apiPool && isApiWork() ? this.apiPool : this.pool;
  }

  async transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    if (openFrame(this)) return work(this.txDb);
    // PostgreSQL ends one of two transactions that wait on each other's row locks (a send
    // locking its inbox, then the account's usage row; an inbound message the other way round)
    // with a deadlock error, and its documentation says to run the transaction again: its
    // writes were all rolled back. Twice more, after a short random pause, before the error
    // reaches the caller.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transactionOnce(work);
      } catch (err) {
        if (attempt >= 3 || !isDeadlock(err)) throw err;
        await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * attempt));
      }
    }
  }

  private async transactionOnce<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    const client = await this.poolOfWork().connect();
    let broken: Error | undefined;
    const frame: TxFrame<pg.PoolClient> = { owner: this, db: this.txDb, client, hooks: [], pending: [], open: true, rowBatches: new Map(), reads: new Map() };
    try {
      // Not awaited before the work: its first statement follows BEGIN in the same write, which
      // saves a round trip per transaction (two or three for each spooled message). Should
      // BEGIN fail (only a lost connection can), so do the statements behind it, and this await.
      corkForTurn(client);
      const begun = client.query('BEGIN');
      begun.catch(() => undefined);
      try {
        const result = await runWork(frame, work);
        // COMMIT goes right behind the writes still under way (sent along): should one of them
        // fail, the COMMIT rolls back, and settleWrites throws its error. BEGIN's answer is
        // awaited only after: a transaction of writes alone (a job's outcome, a webhook's
        // attempt) costs one round trip, not two.
        corkForTurn(client);
        const committed = client.query('COMMIT');
        committed.catch(() => undefined);
        await begun;
        await settleWrites(frame);
        // A statement that failed ends a PostgreSQL transaction even when the work caught its
        // error and went on; COMMIT then rolls back and says so in its tag, without an error.
        // Reporting that as a commit would let callers act on writes that never happened.
        const done = await committed;
        if (done.command === 'ROLLBACK') throw new Error('transaction rolled back at COMMIT: a statement in it had failed');
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

  grouped<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.transaction(work);
  }

  externalCommits(): () => boolean {
    // Other nodes announce what waits for a look (announce/listen).
    return () => false;
  }

  /** Who announces: a process hears its own NOTIFYs too, and skips them. */
  private readonly origin = randomBytes(6).toString('hex');
  private readonly announcing = new Set<string>();
  private listener: pg.Client | undefined;
  private readonly listeners: Array<(signal: string) => void> = [];
  private closed = false;

  async exclusive<T>(name: string, work: () => Promise<T>): Promise<T | undefined> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      const { rows } = await client.query<{ got: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS got', [`exclusive:${name}`]);
      if (!rows[0]?.got) return undefined;
      try {
        return await work();
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [`exclusive:${name}`]).catch((e: Error) => (broken = e));
      }
    } finally {
      // A connection that could not unlock still holds the lock: the pool drops it, which frees it.
      client.release(broken);
    }
  }

  /** A NOTIFY statement is on its way: signals announced meanwhile wait for the next. */
  private sending: Promise<void> | undefined;

  /**
   * Tells the other nodes, soon: the signals of one turn of the event loop go in one statement,
   * and while it runs, those announced meanwhile gather for the next. A burst of commits (each
   * announcing 'jobs' and 'events') costs a NOTIFY statement per round trip, not one per commit
   * and signal.
   */
  announce(signal: string): void {
    if (this.closed) return;
    if (!this.announcing.size && !this.sending) setImmediate(() => void this.sendAnnouncements());
    this.announcing.add(signal);
  }

  private async sendAnnouncements(): Promise<void> {
    const signals = [...this.announcing];
    this.announcing.clear();
    const calls = signals.map((_, i) => `pg_notify($1, $${i + 2})`).join(', ');
    this.sending = this.pool.query(`SELECT ${calls}`, [CHANNEL, ...signals.map((s) => `${this.origin}:${s}`)]).then(
      () => undefined,
      () => undefined,
    );
    await this.sending;
    this.sending = undefined;
    if (this.announcing.size && !this.closed) await this.sendAnnouncements();
  }

  listen(fn: (signal: string) => void): void {
    this.listeners.push(fn);
    if (this.listeners.length === 1) this.connectListener();
  }

  /** One connection LISTENs for the whole process; it comes back after a restart of the server or a network cut. */
  private connectListener(): void {
    if (this.closed) return;
    const client = new pg.Client({ ...this.pool.options, types: TYPES });
    this.listener = client;
    let retried = false;
    const retry = () => {
      if (retried || this.closed) return;
      retried = true;
      client.removeAllListeners('notification');
      void client.end().catch(() => undefined);
      // Missed while down: the runner's timer and the event feed's poll catch up; wake them now too.
      for (const fn of this.listeners) fn('jobs');
      setTimeout(() => this.connectListener(), 1000).unref();
    };
    client.on('notification', (n) => {
      const [from, signal] = (n.payload ?? '').split(':');
      if (from !== this.origin && signal) for (const fn of this.listeners) fn(signal);
    });
    client.on('error', retry);
    client.on('end', retry);
    client
      .connect()
      .then(() => client.query(`LISTEN ${CHANNEL}`))
      .catch(retry);
  }

  async checkpoint(): Promise<void> {}

  async lock(tx: Db, key: string): Promise<void> {
    await this.rows(tx, 'SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [key]);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    // What a CLI command just queued is announced before it exits.
    while (this.sending || this.announcing.size) await (this.sending ?? this.sendAnnouncements());
    this.closed = true;
    await this.listener?.end().catch(() => undefined);
    await Promise.all([this.pool.end(), this.apiPool?.end()]);
  }
}

/** PostgreSQL's deadlock_detected (40P01), bare or wrapped by drizzle. */
function isDeadlock(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) if (e.code === '40P01') return true;
  return false;
}
