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

test('writers of one moment commit together; a failing one rolls back alone', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-gc-'));
  const sqlite = openConnection(join(dir, 'x.db'));
  const store = new SqliteStore(sqlite);
  try {
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
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

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
