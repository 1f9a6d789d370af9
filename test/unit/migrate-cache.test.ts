// A new SQLite database is migrated with a page cache of a few pages (src/store/migrate-sqlite.ts:
// what the migrations' pages took would otherwise stay with an idle server), then gets its cache
// back; a database that already has data keeps its cache for its migrations. Each test migration
// records the cache size it ran under.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { MigrationMeta } from 'drizzle-orm/migrator';
import { openDatabase } from '../../src/store/client.ts';
import { migrateDatabase, setEmbeddedMigrations } from '../../src/store/migrate-sqlite.ts';

const recording = (n: number): MigrationMeta => ({
  sql: [n === 1 ? 'CREATE TABLE seen (step INTEGER, cache INTEGER)' : 'SELECT 1', `INSERT INTO seen SELECT ${n}, cache_size FROM pragma_cache_size()`],
  folderMillis: n,
  hash: `test-${n}`,
  bps: true,
});

test('a new database is migrated under a small page cache and gets its cache back; an existing one keeps its cache', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-migrate-cache-'));
  try {
    const file = join(dir, 'test.db');
    let db = openDatabase(file);
    const cache = db.$client.pragma('cache_size', { simple: true });
    setEmbeddedMigrations([recording(1)]);
    migrateDatabase(db);
    assert.equal(db.$client.pragma('cache_size', { simple: true }), cache, 'the cache is given back');
    db.$client.close();
    db = openDatabase(file);
    setEmbeddedMigrations([recording(1), recording(2)]);
    migrateDatabase(db);
    assert.deepEqual(db.$client.prepare('SELECT step, cache FROM seen ORDER BY step').raw().all(), [
      [1, 64],
      [2, cache],
    ]);
    db.$client.close();
  } finally {
    setEmbeddedMigrations(undefined as unknown as MigrationMeta[]);
    rmSync(dir, { recursive: true, force: true });
  }
});
