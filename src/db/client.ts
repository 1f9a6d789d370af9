// Opens the SQLite database with the settings every process (server and CLI) must share:
// WAL so the CLI can work beside a running server, a busy timeout instead of SQLITE_BUSY
// errors, foreign keys on, and synchronous=FULL so a committed row survives power loss.
import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import * as schema from './schema.ts';

export type Db = BetterSQLite3Database<typeof schema> & { $client: Database.Database };
/** The handle a transaction callback receives; domain functions that need one take it first. */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/**
 * Native addon override, set by the single-executable build (which embeds the addon): a path,
 * or the addon's exports already loaded with process.dlopen (inside a single executable
 * `require` reaches only built-in modules, so better-sqlite3 cannot load a path itself).
 */
export let nativeBinding: string | object | undefined;
export function setNativeBinding(binding: string | object | undefined): void {
  nativeBinding = binding;
}

export function openDatabase(file: string): Db {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  // better-sqlite3 accepts an addon object at run time; its typings only declare the path form.
  const sqlite = new Database(file, nativeBinding ? { nativeBinding: nativeBinding as string } : {});
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('synchronous = FULL');
  return drizzle(sqlite, { schema }) as Db;
}
