// Opens the SQLite database with the settings every process (server and CLI) must share:
// WAL so the CLI can work beside a running server, a busy timeout instead of SQLITE_BUSY
// errors, foreign keys on, and synchronous=FULL so a committed row survives power loss.
import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * The storage port's handle (src/store/) as code outside src/store holds it: opaque, to hand to
 * the repositories (src/store/repo/), with no query builder of its own (SQL only in src/store).
 */
export type Db = import('./store.ts').Tx;
/** The handle a transaction callback receives; domain functions that need one take it first. */
export type Tx = import('./store.ts').Tx;

/**
 * A synchronous drizzle handle on the SQLite file itself, for what reads or writes the file
 * outside a running store: migrations, backups, and tests that inspect a stopped server's file.
 * No schema handed to drizzle: nothing uses its relational query API (db.query.*), and building
 * that API's table map cost 1.5-2 ms of every start.
 */
export type FileDb = BetterSQLite3Database & { $client: Database.Database };

/**
 * Native addon override, set by the single-executable build (which embeds the addon): a path,
 * or the addon's exports already loaded with process.dlopen (inside a single executable
 * `require` reaches only built-in modules, so better-sqlite3 cannot load a path itself).
 */
export let nativeBinding: string | object | undefined;
export function setNativeBinding(binding: string | object | undefined): void {
  nativeBinding = binding;
}

export function openDatabase(file: string): FileDb {
  return drizzle(openConnection(file)) as FileDb;
}

/**
 * Pages the write-ahead log takes before a commit copies them into the database file (SQLite's
 * default is 1,000, about 4 MB). That checkpoint runs inside the COMMIT, on the main thread,
 * and its fsync of the database file is most of its cost whatever the pages: a burst of 10 KB
 * messages took 288 checkpoints of 16 ms at 1,000 pages (4.7 s of the event loop for 12,500
 * messages) and 45 of 18 ms at 10,000 (0.8 s). The log then grows to about 40 MB on disk
 * before it is reused; deletions still truncate it at once (SqliteStore.checkpoint).
 */
export const WAL_AUTOCHECKPOINT_PAGES = 10_000;

/** A better-sqlite3 connection with the settings above (the storage port's SQLite adapter uses it too). */
export function openConnection(file: string): Database.Database {
  if (file !== ':memory:') {
    // The data directory and the database hold keys and every message: the owner's only. The
    // file is made here so that it is born 0600; SQLite gives its -wal and -shm the same mode.
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    closeSync(openSync(file, 'a', 0o600));
  }
  // better-sqlite3 accepts an addon object at run time; its typings only declare the path form.
  const sqlite = new Database(file, nativeBinding ? { nativeBinding: nativeBinding as string } : {});
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
  // Deleted rows are overwritten with zeros, not left readable in free pages (deleted mail is
  // gone from the file; checkpointWal clears the log's copies).
  sqlite.pragma('secure_delete = ON');
  return sqlite;
}
