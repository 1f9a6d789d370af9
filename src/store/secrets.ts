// Secrets the appliance makes for itself: the download-URL signing key (url-signing.key) and the
// shared domain's DKIM key (dkim/<domain>.json). Each is made once, by whichever process needs
// it first, and every process then uses that one. Embedded SQLite: files under data_dir (mode
// 0600, written exclusively: a second writer reads the first's). PostgreSQL: rows of `secrets`
// (migrations/pg 0005), so every node signs with the same keys; a row holds the file's text.
// Named here by their file path under data_dir on both engines (mailroom export/import too).
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Db, Store } from './store.ts';

/** The secret files mailroom keeps: url-signing.key, and dkim/<name>.json. */
export const SECRET_PATH = /^(?:url-signing\.key|dkim\/[A-Za-z0-9_][A-Za-z0-9_.-]*)$/;

/** Their values once read: a secret never changes once made. */
const known = new WeakMap<Store, Map<string, string>>();

function cache(store: Store): Map<string, string> {
  let m = known.get(store);
  if (!m) known.set(store, (m = new Map()));
  return m;
}

/** The secret at `path`, or undefined when none was made yet. */
export async function readSecret(store: Store, dataDir: string, path: string): Promise<string | undefined> {
  const hit = cache(store).get(path);
  if (hit !== undefined) return hit;
  const value = store.dialect === 'postgres' ? (await store.rows<[string]>(store.db, 'SELECT value FROM secrets WHERE name = ?', [path]))[0]?.[0] : readFileOrUndefined(join(dataDir, path));
  if (value !== undefined) cache(store).set(path, value);
  return value;
}

/** The secret at `path`, made with `make()` when there is none; a concurrent maker's wins. */
export async function ensureSecret(store: Store, dataDir: string, path: string, make: () => string | Promise<string>): Promise<string> {
  const existing = await readSecret(store, dataDir, path);
  if (existing !== undefined) return existing;
  const value = await make();
  if (store.dialect === 'postgres') await writeSecret(store, store.db, dataDir, path, value);
  else writeFileExclusive(join(dataDir, path), value);
  return (await readSecret(store, dataDir, path))!;
}

/** Stores a secret unless one is there (mailroom import, through its transaction). */
export async function writeSecret(store: Store, db: Db, dataDir: string, path: string, value: string): Promise<void> {
  if (store.dialect === 'postgres') {
    await store.run(db, 'INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING', [path, value, new Date().toISOString()]);
  } else {
    writeFileExclusive(join(dataDir, path), value);
  }
}

/** Every secret, by path (mailroom export). */
export async function listSecrets(store: Store, dataDir: string): Promise<Map<string, string>> {
  if (store.dialect === 'postgres') return new Map(await store.rows<[string, string]>(store.db, 'SELECT name, value FROM secrets ORDER BY name'));
  const out = new Map<string, string>();
  const key = readFileOrUndefined(join(dataDir, 'url-signing.key'));
  if (key !== undefined) out.set('url-signing.key', key);
  let names: string[] = [];
  try {
    names = readdirSync(join(dataDir, 'dkim'))
      .filter((n) => !n.endsWith('.tmp'))
      .sort();
  } catch (err) {
    // No DKIM key made yet; anything else (EACCES, ENOTDIR, EIO) would export without the keys.
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  for (const n of names) out.set(`dkim/${n}`, readFileSync(join(dataDir, 'dkim', n), 'utf8'));
  return out;
}

function readFileOrUndefined(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Writes the file exclusively: a temporary file is fsynced, then hard-linked to the final name,
 * which fails if another process (the CLI beside the server) got there first; the first one stays.
 * The directory is fsynced once the name is there, so the name survives a crash (a crash before
 * leaves no file, never an empty or partial one under the final name).
 */
export function writeFileExclusive(path: string, value: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${randomBytes(8).toString('hex')}.tmp`;
  try {
    const fd = openSync(tmp, 'wx', 0o600);
    try {
      writeSync(fd, value);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    rmSync(tmp, { force: true });
  }
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
