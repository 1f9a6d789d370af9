// The single executable's addon cache (src/addon-cache.ts), exercised with the real SQLite
// addon of this checkout: directory order, private-directory rule, reuse and repair of the
// cached file, planted symlinks, and the error when no directory works.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { addonCacheDirs, loadCachedAddon } from '../../src/addon-cache.ts';

const require = createRequire(import.meta.url);
const BYTES = readFileSync(join(dirname(require.resolve('better-sqlite3/package.json')), 'build', 'Release', 'better_sqlite3.node'));
/** The addon as src/sea.ts hands it over; `reads` counts how often the bytes were asked for. */
let reads = 0;
const ADDON = {
  sha256: createHash('sha256').update(BYTES).digest('hex'),
  bytes: () => {
    reads++;
    return BYTES;
  },
};
const root = mkdtempSync(join(tmpdir(), 'mailroom-addon-cache-'));
after(() => rmSync(root, { recursive: true, force: true }));

describe('addon cache', () => {
  it('tries MAILROOM_CACHE_DIR, XDG_CACHE_HOME, ~/.cache, the temp dir, then beside the binary', () => {
    const dirs = addonCacheDirs({ MAILROOM_CACHE_DIR: '/srv/cache', XDG_CACHE_HOME: '/x/cache' });
    assert.deepEqual(dirs, [
      '/srv/cache',
      '/x/cache/mailroom',
      join(homedir(), '.cache', 'mailroom'),
      join(tmpdir(), `mailroom-${process.getuid!()}`),
      join(dirname(process.execPath), '.mailroom-cache'),
    ]);
    // Relative values are ignored (XDG Base Directory Specification).
    assert.equal(addonCacheDirs({ MAILROOM_CACHE_DIR: 'rel', XDG_CACHE_HOME: 'rel' })[0], join(homedir(), '.cache', 'mailroom'));
  });

  it('writes a content-hashed file into a private directory, loads it, and reuses it unchanged', () => {
    const dir = join(root, 'fresh', 'mailroom');
    const first = loadCachedAddon('better_sqlite3', ADDON, [dir]);
    assert.equal(typeof (first.exports as { Database?: unknown }).Database, 'function');
    assert.match(first.path, /better_sqlite3-[0-9a-f]{16}\.node$/);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    const name = first.path.split('/').pop()!;
    assert.deepEqual(readdirSync(dir).sort(), [name, `${name}.ok`], 'the file and its seal, no temporary file left behind');
    const mtime = statSync(first.path).mtimeMs;
    const readsBefore = reads;
    const again = loadCachedAddon('better_sqlite3', ADDON, [dir]);
    assert.equal(again.path, first.path);
    assert.equal(statSync(again.path).mtimeMs, mtime);
    assert.equal(reads, readsBefore, 'a good cached copy is reused without reading the embedded bytes');
  });

  it('trusts a seal only while it matches the file: a stale one means hashing again, and a new seal', () => {
    const dir = join(root, 'seal');
    const { path } = loadCachedAddon('better_sqlite3', ADDON, [dir]);
    const sealed = readFileSync(`${path}.ok`, 'latin1');
    assert.match(sealed, /^[0-9a-f]{64} \d+:\d+:\d+:\d+:\d+\n$/);
    writeFileSync(`${path}.ok`, sealed.replace(/:\d+\n$/, ':1\n'));
    const readsBefore = reads;
    loadCachedAddon('better_sqlite3', ADDON, [dir]);
    assert.equal(reads, readsBefore, 'the intact copy passed its hash: not rewritten');
    assert.equal(readFileSync(`${path}.ok`, 'latin1'), sealed);
  });

  it('replaces a damaged copy and a planted symlink instead of loading them', () => {
    const dir = join(root, 'repair');
    const { path } = loadCachedAddon('better_sqlite3', ADDON, [dir]);
    // Damaged by replacing the file, not by writing into it: this process has the original
    // mapped, and truncating a mapped library under a running process kills it (SIGBUS). That
    // is also why the cache itself only ever renames new files into place.
    writeFileSync(`${path}.damaged`, 'garbage');
    renameSync(`${path}.damaged`, path);
    loadCachedAddon('better_sqlite3', ADDON, [dir]);
    assert.ok(readFileSync(path).equals(BYTES));

    const elsewhere = join(root, 'elsewhere.node');
    writeFileSync(elsewhere, 'do not touch');
    rmSync(path);
    symlinkSync(elsewhere, path);
    loadCachedAddon('better_sqlite3', ADDON, [dir]);
    assert.ok(lstatSync(path).isFile(), 'the symlink itself was replaced');
    assert.equal(readFileSync(elsewhere, 'utf8'), 'do not touch');
  });

  it('skips a directory others can write to, a symlinked directory and a file, for the next one', () => {
    const open = join(root, 'open');
    mkdirSync(open);
    chmodSync(open, 0o775);
    const link = join(root, 'link');
    symlinkSync(join(root, 'fresh'), link);
    const file = join(root, 'a-file');
    writeFileSync(file, '');
    const good = join(root, 'next');
    const loaded = loadCachedAddon('better_sqlite3', ADDON, [open, link, file, good]);
    assert.equal(dirname(loaded.path), good);
    assert.deepEqual(readdirSync(open), []);
  });

  it('names every directory tried and why when none works', () => {
    const file = join(root, 'not-a-dir');
    writeFileSync(file, '');
    const open = join(root, 'open2');
    mkdirSync(open);
    chmodSync(open, 0o777);
    assert.throws(
      () => loadCachedAddon('better_sqlite3', ADDON, [join(file, 'sub'), open]),
      (err: Error) => {
        assert.match(err.message, /cannot load the embedded better_sqlite3 addon/);
        assert.ok(err.message.includes(`${join(file, 'sub')}: `));
        assert.ok(err.message.includes(`${open}: writable by group or others (mode 777)`));
        assert.match(err.message, /MAILROOM_CACHE_DIR/);
        return true;
      },
    );
    assert.ok(!existsSync(join(open, 'better_sqlite3')));
  });
});
