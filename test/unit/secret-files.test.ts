// The appliance's own secret files (issue 27): url-signing.key is made durably (a temporary
// file fsynced, linked into place, the directory fsynced), and listing secrets for an export
// raises a read error instead of leaving the keys out.
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import fs, { mkdtempSync, readdirSync, rmSync, writeFileSync, mkdirSync, statSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { urlSigningSecret } from '../../src/store/signed-url.ts';
import { listSecrets } from '../../src/store/secrets.ts';
import type { AppContext } from '../../src/context.ts';
import type { Store } from '../../src/store/store.ts';

const sqliteCtx = (dataDir: string) => ({ store: { dialect: 'sqlite' } as Store, config: { data_dir: dataDir } }) as unknown as AppContext;

test('url-signing.key: written to a temporary file, fsynced, put in place by name, then the directory fsynced', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-key-'));
  const calls: string[] = [];
  const fdPaths = new Map<number, string>();
  const realOpen = fs.openSync;
  mock.method(fs, 'openSync', (path: string, ...rest: unknown[]) => {
    const fd = (realOpen as (...a: unknown[]) => number)(path, ...rest);
    fdPaths.set(fd, String(path));
    return fd;
  });
  const realFsync = fs.fsyncSync;
  mock.method(fs, 'fsyncSync', (fd: number) => {
    calls.push(`fsync ${fdPaths.get(fd) ?? fd}`);
    return realFsync(fd);
  });
  syncBuiltinESMExports();
  try {
    const secret = urlSigningSecret(sqliteCtx(dir));
    assert.equal(secret.length, 32);
    const key = join(dir, 'url-signing.key');
    assert.equal(statSync(key).mode & 0o777, 0o600);
    assert.deepEqual(readdirSync(dir), ['url-signing.key'], 'no temporary file left');
    // The key's bytes were fsynced under a temporary name, then the directory holding its name.
    assert.equal(calls.length, 2, calls.join('; '));
    assert.match(calls[0], /^fsync .*url-signing\.key\.[0-9a-f]+\.tmp$/);
    assert.equal(calls[1], `fsync ${dir}`);
    // A second reader gets the same key.
    assert.deepEqual(urlSigningSecret(sqliteCtx(dir)), secret);
  } finally {
    mock.restoreAll();
    syncBuiltinESMExports();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('url-signing.key: a failed fsync raises and leaves no key file behind (no empty key after a crash)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-key-'));
  mock.method(fs, 'fsyncSync', () => {
    throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
  });
  syncBuiltinESMExports();
  try {
    assert.throws(() => urlSigningSecret(sqliteCtx(dir)), /EIO/);
    assert.deepEqual(readdirSync(dir), []);
  } finally {
    mock.restoreAll();
    syncBuiltinESMExports();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('listSecrets: a missing dkim directory is no key; any other read error is raised', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-secrets-'));
  const store = { dialect: 'sqlite' } as Store;
  try {
    writeFileSync(join(dir, 'url-signing.key'), 'ab'.repeat(32) + '\n');
    assert.deepEqual([...(await listSecrets(store, dir)).keys()], ['url-signing.key']);
    mkdirSync(join(dir, 'dkim'));
    writeFileSync(join(dir, 'dkim', 'agents.test.json'), '{}');
    assert.deepEqual([...(await listSecrets(store, dir)).keys()], ['url-signing.key', 'dkim/agents.test.json']);
    // Not a directory (ENOTDIR): an export would silently lose the DKIM keys.
    rmSync(join(dir, 'dkim'), { recursive: true });
    writeFileSync(join(dir, 'dkim'), 'not a directory');
    await assert.rejects(listSecrets(store, dir), { code: 'ENOTDIR' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
