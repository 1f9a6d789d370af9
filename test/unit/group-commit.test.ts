// Group commit (Store.grouped, src/store/sqlite.ts): concurrent writers share a transaction, a writer that
// throws loses only its own rows, every promise settles after the commit, and the connection
// is left at synchronous=FULL for everyone else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openConnection } from '../../src/store/client.ts';
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
