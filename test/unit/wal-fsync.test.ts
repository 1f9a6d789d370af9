// A failed fsync of the write-ahead log is fatal (issue 27): the batch it covered is refused,
// the store's fatal path runs once, and every later write is refused even though an fsync
// through a new descriptor would now succeed (the kernel may have dropped the dirty pages and
// cleared the error: "fsyncgate", which PostgreSQL answers with a PANIC since 2018).
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, promises as fsp, rmSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openConnection } from '../../src/store/client.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';
import { rawRun } from '../../src/store/store.ts';
import { exitOnFatal } from '../../src/log.ts';

test('a WAL fsync error refuses its batch, calls the fatal path once, and refuses every later write', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-walsync-'));
  const sqlite = openConnection(join(dir, 'x.db'));
  const fatal: Error[] = [];
  const store = new SqliteStore(sqlite, (err) => void fatal.push(err));
  const realOpen = fsp.open;
  let failing = true;
  // The WAL's descriptor fails its fsync (EIO) while `failing`; a new descriptor would succeed.
  mock.method(fsp, 'open', async (path: string, flags?: string) => {
    const fh: FileHandle = await realOpen(path, flags);
    if (String(path).endsWith('-wal')) {
      const sync = fh.sync.bind(fh);
      fh.sync = async () => {
        if (failing) throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
        return sync();
      };
    }
    return fh;
  });
  try {
    sqlite.exec('CREATE TABLE t (n INTEGER PRIMARY KEY)');
    const write = (n: number) => store.grouped((tx) => rawRun(tx, 'INSERT INTO t (n) VALUES (?)', [n]));
    const first = await Promise.allSettled([write(1), write(2)]);
    assert.deepEqual(
      first.map((r) => r.status),
      ['rejected', 'rejected'],
      'no writer of the batch is told its rows are stored',
    );
    assert.equal(fatal.length, 1);
    assert.match(fatal[0].message, /write-ahead log could not be fsynced \(EIO/);

    // The disk "recovers": an fsync through a fresh descriptor would succeed now. Still refused.
    failing = false;
    await assert.rejects(write(3), /write-ahead log could not be fsynced/);
    await assert.rejects(
      store.transaction((tx) => rawRun(tx, 'INSERT INTO t (n) VALUES (4)')),
      /write-ahead log could not be fsynced/,
    );
    assert.equal(fatal.length, 1, 'the fatal path runs once');
  } finally {
    mock.restoreAll();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the fatal path the server gives the store logs the reason and exits with code 1', () => {
  const lines: Array<[string, string, unknown]> = [];
  const log = { info() {}, warn() {}, error: (msg: string, fields?: unknown) => void lines.push(['error', msg, fields]) };
  const exit = mock.method(process, 'exit', ((code?: number) => {
    throw new Error(`exit ${code}`);
  }) as typeof process.exit);
  try {
    assert.throws(() => exitOnFatal(log, 'the database cannot be made durable: stopping', new Error('EIO')), /exit 1/);
    assert.deepEqual(
      exit.mock.calls.map((c) => c.arguments[0]),
      [1],
    );
    assert.equal(lines[0][1], 'the database cannot be made durable: stopping');
    assert.equal((lines[0][2] as { error: string }).error, 'EIO');
  } finally {
    mock.restoreAll();
  }
});
