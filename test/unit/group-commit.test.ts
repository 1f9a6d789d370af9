// Group commit (Store.grouped, src/store/sqlite.ts): concurrent writers share a transaction, a writer that
// throws loses only its own rows, every promise settles after the commit, and the connection
// is left at synchronous=FULL for everyone else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openConnection, WAL_AUTOCHECKPOINT_PAGES } from '../../src/store/client.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { rawRun, type Db } from '../../src/store/store.ts';

/** A store on a fresh database file, closed and removed after `fn`. */
async function withStore(fn: (store: SqliteStore, sqlite: ReturnType<typeof openConnection>) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-gc-'));
  const sqlite = openConnection(join(dir, 'x.db'));
  const store = new SqliteStore(sqlite);
  try {
    await fn(store, sqlite);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('writers of one moment commit together; a failing one rolls back alone', () =>
  withStore(async (store, sqlite) => {
    sqlite.exec('CREATE TABLE t (n INTEGER PRIMARY KEY)');
    const insert = (tx: Db, n: number) => rawRun(tx, 'INSERT INTO t (n) VALUES (?)', [n]);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        store.grouped(async (tx) => {
          await insert(tx, i);
          if (i === 7) throw new Error('writer 7 fails');
          return i * 10;
        }),
      ),
    );
    assert.equal(results[7].status, 'rejected');
    assert.equal((results[7] as PromiseRejectedResult).reason.message, 'writer 7 fails');
    for (const [i, r] of results.entries()) if (i !== 7) assert.deepEqual(r, { status: 'fulfilled', value: i * 10 });
    const rows = (sqlite.prepare('SELECT n FROM t ORDER BY n').all() as Array<{ n: number }>).map((r) => r.n);
    assert.deepEqual(
      rows,
      [...Array(20).keys()].filter((i) => i !== 7),
    );
    assert.equal(sqlite.pragma('synchronous', { simple: true }), 2, 'synchronous is FULL again');

    // A lone writer that throws leaves nothing behind either.
    await assert.rejects(
      store.grouped(async (tx) => {
        await insert(tx, 100);
        throw new Error('alone');
      }),
      /alone/,
    );
    assert.equal((sqlite.prepare('SELECT count(*) AS c FROM t WHERE n = 100').get() as { c: number }).c, 0);
  }));

test('writers that all succeed share the commit without savepoints: FTS5 writes their index entries as one segment', () =>
  withStore(async (store, sqlite) => {
    // FTS5 flushes what it holds in memory at every SAVEPOINT and RELEASE: a segment per writer.
    sqlite.exec('CREATE VIRTUAL TABLE f USING fts5(body)');
    let runs = 0;
    const write = (i: number) =>
      store.grouped(async (tx) => {
        runs++;
        await rawRun(tx, 'INSERT INTO f (body) VALUES (?)', [`word${i} shared text`]);
        return i;
      });
    assert.deepEqual(await Promise.all(Array.from({ length: 20 }, (_, i) => write(i))), [...Array(20).keys()]);
    assert.equal(runs, 20, 'each writer ran once');
    // %_data holds the averages (id 1), the structure (id 10) and the segments' leaves.
    const leaves = (sqlite.prepare('SELECT count(*) AS c FROM f_data WHERE id > 10').get() as { c: number }).c;
    assert.equal(leaves, 1, 'one segment of one leaf for the whole batch');
    assert.equal((sqlite.prepare("SELECT count(*) AS c FROM f WHERE f MATCH 'shared'").get() as { c: number }).c, 20);

    // One writer throws: the batch is rolled back and run again with a savepoint each, so the
    // others commit (each having run twice) and the failing one loses only its own rows.
    runs = 0;
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) =>
        store.grouped(async (tx) => {
          runs++;
          await rawRun(tx, 'INSERT INTO f (body) VALUES (?)', [`again${i}`]);
          if (i === 2) throw new Error('writer 2 fails');
          return i;
        }),
      ),
    );
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
    );
    assert.equal(runs, 8, 'the writers up to the failing one ran again, and the rest once with savepoints');
    const found = (sqlite.prepare("SELECT body FROM f WHERE body LIKE 'again%' ORDER BY body").all() as Array<{ body: string }>).map((r) => r.body);
    assert.deepEqual(found, ['again0', 'again1', 'again3', 'again4']);
  }));

test('the write-ahead log takes WAL_AUTOCHECKPOINT_PAGES before a commit checkpoints it, then starts over', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-wal-'));
  const file = join(dir, 'x.db');
  const sqlite = openConnection(file);
  try {
    // Not the fsyncs under test: 15,000 of them would take seconds.
    sqlite.pragma('synchronous = OFF');
    sqlite.exec('CREATE TABLE t (n INTEGER PRIMARY KEY, b BLOB)');
    const insert = sqlite.prepare('INSERT INTO t (b) VALUES (zeroblob(3000))');
    const walPages = () => Math.floor(statSync(`${file}-wal`).size / (4096 + 24));
    // One page and a commit frame each: past SQLite's default of 1,000 the log still grows.
    for (let i = 0; i < 3000; i++) insert.run();
    assert.ok(walPages() > 3000, `the log holds every page so far (${walPages()})`);
    for (let i = 0; i < WAL_AUTOCHECKPOINT_PAGES; i++) insert.run();
    const most = walPages();
    assert.ok(most >= WAL_AUTOCHECKPOINT_PAGES && most < WAL_AUTOCHECKPOINT_PAGES + 200, `checkpointed once past the threshold (${most})`);
    // After the checkpoint the log is written again from its start, not appended to.
    for (let i = 0; i < 2000; i++) insert.run();
    assert.equal(walPages(), most);
    assert.equal(sqlite.prepare('SELECT count(*) FROM t').pluck().get(), 15_000);
  } finally {
    sqlite.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
