// Opens the SQLite database with the settings every process (server and CLI) must share:
// WAL so the CLI can work beside a running server, a busy timeout instead of SQLITE_BUSY
// errors, foreign keys on, and synchronous=FULL so a committed row survives power loss.
import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

// No schema handed to drizzle: nothing uses its relational query API (db.query.*), and building
// that API's table map cost 1.5-2 ms of every start (server and each CLI command).
export type Db = BetterSQLite3Database & { $client: Database.Database };
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
  const sqlite = openConnection(file);
  cacheStatements(sqlite);
  return drizzle(sqlite) as Db;
}

/** A better-sqlite3 connection with the settings above (the storage port's SQLite adapter uses it too). */
export function openConnection(file: string): Database.Database {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  // better-sqlite3 accepts an addon object at run time; its typings only declare the path form.
  const sqlite = new Database(file, nativeBinding ? { nativeBinding: nativeBinding as string } : {});
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('synchronous = FULL');
  // Deleted rows are overwritten with zeros, not left readable in free pages (deleted mail is
  // gone from the file; checkpointWal clears the log's copies).
  sqlite.pragma('secure_delete = ON');
  return sqlite;
}

/**
 * Copies the write-ahead log into the database and truncates it to zero bytes, so page images
 * of deleted rows do not linger in it. Best effort: readers in progress may keep some frames.
 */
export function checkpointWal(db: Db): void {
  db.$client.pragma('wal_checkpoint(TRUNCATE)');
}

/** Distinct SQL texts kept compiled; `IN (?, ?, …)` lists of varying length make new texts. */
const STATEMENT_CACHE_SIZE = 500;

/**
 * drizzle compiles every query anew (`prepare` per call); for the point reads and writes of the
 * API and of inbound mail, compiling cost more than running (bench/: 6–8% of the server's CPU
 * in `prepare`). Statements are cached by SQL text and handed back with their result mode
 * reset, since callers switch it (drizzle uses raw(), backups pluck()).
 */
function cacheStatements(sqlite: Database.Database): void {
  const prepare = sqlite.prepare.bind(sqlite);
  const cache = new Map<string, Database.Statement>();
  sqlite.prepare = ((source: string) => {
    let stmt = cache.get(source);
    if (stmt) {
      if (stmt.reader) stmt.raw(false).pluck(false).expand(false);
      return stmt;
    }
    stmt = prepare(source);
    if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value!);
    cache.set(source, stmt);
    return stmt;
  }) as typeof sqlite.prepare;
}

/**
 * A probe that answers true when another connection (a CLI command beside the running server)
 * committed since the previous call. SQLite's `data_version` changes only for commits made by
 * other connections, so the server's own writes never trip it; one pragma read costs ~1 µs.
 */
export function externalCommits(db: Db): () => boolean {
  const version = db.$client.prepare('PRAGMA data_version').pluck();
  let seen = version.get() as number;
  return () => {
    const now = version.get() as number;
    if (now === seen) return false;
    seen = now;
    return true;
  };
}
