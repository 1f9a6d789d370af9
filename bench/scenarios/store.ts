// (m) What the storage port costs on SQLite: the same statements on the same connection, run
// through the synchronous drizzle handle the domain uses today and through the async store
// handle (src/store/) it moves onto: point reads (a prepared query, a raw statement, a query
// built per call) and a one-row update in its own transaction (synchronous=FULL, as served).
import { join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import { openDatabase } from '../../src/store/client.ts';
import { migrateDatabase } from '../../src/store/migrate-sqlite.ts';
import * as s from '../../src/store/schema.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import type { Db } from '../../src/store/store.ts';
import { freshDir, round, type Row, type ScenarioResult } from '../support.ts';

const READS = 100_000;
const WRITES = 10_000;
const INBOXES = 1000;

const perOp = (ms: number, n: number) => round((ms * 1000) / n, 2);

function timed(n: number, fn: (i: number) => void): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn(i);
  return perOp(performance.now() - t0, n);
}

async function timedAsync(n: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await fn(i);
  return perOp(performance.now() - t0, n);
}

export async function storeOverhead(): Promise<ScenarioResult> {
  const db = openDatabase(join(freshDir('store-overhead'), 'mailroom.db'));
  migrateDatabase(db);
  const store = new SqliteStore(db.$client);
  // The port as src/store sees it: drizzle's handle (code outside src/store sees an opaque Tx).
  const port: Db = store.db;
  const now = new Date().toISOString();
  db.insert(s.accounts).values({ id: 'acc', name: 'bench', createdAt: now }).run();
  for (let i = 0; i < INBOXES; i++)
    db.insert(s.inboxes)
      .values({ id: `inb${i}`, accountId: 'acc', address: `a${i}@bench.test`, dailySendLimit: 5, createdAt: now })
      .run();
  const id = (i: number) => `inb${i % INBOXES}`;
  const RAW = 'SELECT id, address, status FROM inboxes WHERE id = ?';

  const syncPrepared = db
    .select()
    .from(s.inboxes)
    .where(eq(s.inboxes.id, sql.placeholder('id')))
    .prepare();
  const asyncPrepared = port
    .select()
    .from(s.inboxes)
    .where(eq(s.inboxes.id, sql.placeholder('id')))
    .prepare();
  const syncRaw = db.$client.prepare(RAW).raw(true);
  const bump = sql`${s.inboxes.totalSent} + 1`;

  const rows: Row[] = [];
  const row = (metric: string, sync: number, port: number, n: number): Row => ({
    metric,
    unit: 'µs per op',
    mailroom: port,
    baselines: [{ name: 'synchronous handle (today)', value: sync }],
    note: `${n} ops, one after another`,
  });
  rows.push(
    row(
      'prepared point read',
      timed(READS, (i) => syncPrepared.get({ id: id(i) })),
      await timedAsync(READS, (i) => asyncPrepared.get({ id: id(i) })),
      READS,
    ),
  );
  rows.push(
    row(
      'raw statement point read (rows as arrays)',
      timed(READS, (i) => syncRaw.get(id(i))),
      await timedAsync(READS, (i) => store.rows(store.db, RAW, [id(i)])),
      READS,
    ),
  );
  rows.push(
    row(
      'query built per call',
      timed(READS / 10, (i) =>
        db
          .select()
          .from(s.inboxes)
          .where(eq(s.inboxes.id, id(i)))
          .get(),
      ),
      await timedAsync(READS / 10, (i) =>
        port
          .select()
          .from(s.inboxes)
          .where(eq(s.inboxes.id, id(i)))
          .get(),
      ),
      READS / 10,
    ),
  );
  rows.push(
    row(
      'one-row update in its own transaction',
      timed(WRITES, (i) =>
        db.transaction((tx) =>
          tx
            .update(s.inboxes)
            .set({ totalSent: bump })
            .where(eq(s.inboxes.id, id(i)))
            .run(),
        ),
      ),
      await timedAsync(WRITES, (i) =>
        store.transaction((tx: Db) =>
          tx
            .update(s.inboxes)
            .set({ totalSent: bump })
            .where(eq(s.inboxes.id, id(i)))
            .run(),
        ),
      ),
      WRITES,
    ),
  );
  db.$client.close();
  return {
    id: 'store',
    title: '(m) The storage port on SQLite: async store against the synchronous handle',
    status: 'ok',
    setup: `one SQLite file (WAL, synchronous=FULL), ${INBOXES} inboxes; the same statements on the same connection through both handles; a lower ratio is better`,
    rows,
  };
}
