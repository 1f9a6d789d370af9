// (l) Which PostgreSQL client the adapter uses: `pg` (node-postgres, the one it uses) against
// `postgres` (porsager), on a private durable cluster (fsync on), with the statement shapes the store
// sends: a point read by primary key and a one-row insert in its own transaction, each at 16
// concurrent callers. Both clients prepare each statement once per connection and return rows
// as arrays, as the store needs them. The store's SQLite adapter runs the same two shapes as a
// reference point for the cost of a network database on this machine.
import postgres from 'postgres';
import { startCluster, postgresMissing } from '../../test/support/postgres.ts';
import { SkipError, freshDir, log, round, summarize, type Row, type ScenarioResult } from '../support.ts';
import { openStore } from '../../src/store/open.ts';
import { connectPostgres } from '../../src/store/postgres.ts';

const READS = 20_000;
const WRITES = 2_000;
const CONCURRENCY = 16;
const POOL = 10;

const DDL = 'CREATE TABLE bench_rows (id text PRIMARY KEY, inbox_id text NOT NULL, size bigint NOT NULL, body text)';
const READ = 'SELECT id, inbox_id, size, body FROM bench_rows WHERE id = $1';
const WRITE = 'INSERT INTO bench_rows (id, inbox_id, size, body) VALUES ($1, $2, $3, $4)';

interface Client {
  read(id: string): Promise<unknown>;
  /** One row, in its own BEGIN … COMMIT. */
  write(id: string): Promise<void>;
  end(): Promise<void>;
}

function porsager(url: string): Client {
  const asNumber = { serialize: (x: unknown) => String(x), parse: (x: string) => Number(x) };
  const sql = postgres(url, { max: POOL, onnotice: () => {}, types: { int8: { to: 20, from: [20], ...asNumber } } });
  return {
    read: async (id) => (await sql.unsafe(READ, [id], { prepare: true }).values())[0],
    write: async (id) => {
      await sql.begin((t) => t.unsafe(WRITE, [id, 'inb_1', 1234, 'x'.repeat(200)], { prepare: true }));
    },
    end: () => sql.end(),
  };
}

/** node-postgres as the adapter configures it (src/store/postgres.ts). */
function nodePostgres(url: string): Client {
  const pool = connectPostgres(url, { max: POOL });
  return {
    read: async (id) => (await pool.query({ name: 'read', text: READ, values: [id], rowMode: 'array' })).rows[0],
    write: async (id) => {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await c.query({ name: 'write', text: WRITE, values: [id, 'inb_1', 1234, 'x'.repeat(200)] });
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    },
    end: () => pool.end(),
  };
}

/** Runs `n` calls with `CONCURRENCY` in flight; answers calls per second and latency. */
async function drive(n: number, call: (i: number) => Promise<unknown>): Promise<{ perSecond: number; p50: number; p99: number }> {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) {
        const i = next++;
        const s = performance.now();
        await call(i);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const s = summarize(latencies);
  return { perSecond: round(n / seconds), p50: s.p50, p99: s.p99 };
}

export async function pgClients(): Promise<ScenarioResult> {
  const missing = postgresMissing();
  if (missing) throw new SkipError(missing);
  const cluster = await startCluster({ durable: true });
  try {
    const measured: Record<string, { reads: Awaited<ReturnType<typeof drive>>; writes: Awaited<ReturnType<typeof drive>> }> = {};
    for (const [name, make] of [
      ['postgres', porsager],
      ['pg', nodePostgres],
    ] as const) {
      const url = await cluster.createDatabase(`bench_${name}`);
      const client = make(url);
      const setup = postgres(url, { max: 1 });
      await setup.unsafe(DDL);
      await setup.end();
      // Warm-up: every connection of the pool opened and its statements prepared.
      await drive(200, (i) => client.write(`w${i}`));
      await drive(2000, (i) => client.read(`w${i % 200}`));
      const writes = await drive(WRITES, (i) => client.write(`r${i}`));
      const reads = await drive(READS, (i) => client.read(`r${i % WRITES}`));
      await client.end();
      measured[name] = { reads, writes };
      log(`pg-clients: ${name} reads ${reads.perSecond}/s writes ${writes.perSecond}/s`);
    }
    const sqlite = await sqliteReference();
    const rows: Row[] = [];
    for (const kind of ['reads', 'writes'] as const) {
      rows.push({
        metric: kind === 'reads' ? 'point read by key, 16 callers' : 'one-row insert transaction, 16 callers',
        unit: 'per s',
        mailroom: measured.pg![kind].perSecond,
        baselines: [
          { name: 'postgres (porsager)', value: measured.postgres![kind].perSecond },
          { name: 'store on SQLite', value: sqlite[kind].perSecond },
        ],
        note: `p50/p99 ms: postgres ${measured.postgres![kind].p50}/${measured.postgres![kind].p99}, pg ${measured.pg![kind].p50}/${measured.pg![kind].p99}`,
      });
    }
    return {
      id: 'pg-clients',
      title: '(l) PostgreSQL client: pg against postgres',
      status: 'ok',
      setup: `private PostgreSQL cluster on loopback, fsync on; pool of ${POOL}; ${READS} reads and ${WRITES} insert transactions at ${CONCURRENCY} concurrent callers after a warm-up; rows as arrays, statements prepared per connection. "mailroom" is pg (node-postgres), the client the adapter uses since this measurement.`,
      rows,
      details: { measured, sqlite },
    };
  } finally {
    cluster.stop();
  }
}

/** The same two shapes through the store's SQLite adapter (synchronous=FULL, as served). */
async function sqliteReference(): Promise<{ reads: Awaited<ReturnType<typeof drive>>; writes: Awaited<ReturnType<typeof drive>> }> {
  const store = await openStore({ dataDir: freshDir('pg-clients-sqlite') });
  await store.run(store.db, DDL);
  const write = (id: string) => store.transaction((tx) => store.run(tx, WRITE.replace(/\$\d/g, '?'), [id, 'inb_1', 1234, 'x'.repeat(200)]));
  const read = (id: string) => store.rows(store.db, READ.replace(/\$\d/g, '?'), [id]);
  const writes = await drive(WRITES, (i) => write(`r${i}`));
  const reads = await drive(READS, (i) => read(`r${i % WRITES}`));
  await store.close();
  return { reads, writes };
}
