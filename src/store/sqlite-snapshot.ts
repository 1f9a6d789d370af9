// The queries backup and restore (src/store/backup.ts) run on an embedded database's file
// itself, not through the store: a snapshot staged for a backup or unpacked for a restore is
// opened read-only on its own, and whether a server holds the live file open is probed with a
// connection of our own. SQLite only: backup and restore refuse a PostgreSQL database.
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { nativeBinding, openDatabase } from './client.ts';
import { SPOOLED_SOURCE_PREFIX } from './repo/spool.ts';
import { isRowBlob } from './blobs/blobs.ts';

/**
 * SQLite online backup of `dbFile` into `dest`: a consistent copy of the committed state, taken
 * page by page without blocking the server's writers for long (https://sqlite.org/backup.html).
 */
export async function snapshotDatabase(dbFile: string, dest: string): Promise<void> {
  const live = openDatabase(dbFile);
  try {
    await live.$client.backup(dest);
  } finally {
    live.$client.close();
  }
}

/** Rows per table of a snapshot (the backup's manifest). */
export function tableCounts(db: Database.Database): Record<string, number> {
  const names = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`).pluck().all() as string[];
  return Object.fromEntries(
    names.map((n) => [
      n,
      db
        .prepare(`SELECT count(*) FROM "${n.replaceAll('"', '""')}"`)
        .pluck()
        .get() as number,
    ]),
  );
}

/** File paths the database refers to (raw sources, attachment bytes). */
export function referencedFiles(db: Database.Database): string[] {
  const cols: Array<[string, string]> = [
    ['messages', 'raw_path'],
    ['attachments', 'storage_path'],
  ];
  const out: string[] = [];
  for (const [table, col] of cols) {
    const has = db.prepare(`SELECT 1 FROM pragma_table_info(?) WHERE name = ?`).get(table, col);
    if (has) out.push(...(db.prepare(`SELECT ${col} FROM ${table} WHERE ${col} IS NOT NULL`).pluck().all() as string[]));
  }
  // A spooled message's source is its spooled_messages row (src/store/blobs/spooled.ts), inside the
  // database itself: a file only if that row is gone (then it is reported missing).
  const spooled = new Set(out.some((p) => p.startsWith(SPOOLED_SOURCE_PREFIX)) ? (db.prepare(`SELECT '${SPOOLED_SOURCE_PREFIX}' || job_id FROM spooled_messages`).pluck().all() as string[]) : []);
  // So is a row blob's (src/store/blobs/blobs.ts ROW_BLOB_PREFIX): its blob_chunks rows.
  const rows = new Set(out.some(isRowBlob) ? (db.prepare('SELECT key FROM blob_chunks WHERE seq = 0').pluck().all() as string[]) : []);
  return out.filter((p) => !spooled.has(p) && !rows.has(p));
}

export function openReadOnly(file: string): Database.Database {
  return new Database(file, { readonly: true, fileMustExist: true, ...(nativeBinding ? { nativeBinding: nativeBinding as string } : {}) });
}

/** SQLite's integrity check of a database file: "ok", or what is damaged. */
export function integrityOf(file: string): string {
  const db = openReadOnly(file);
  try {
    return String(db.pragma('integrity_check', { simple: true }));
  } finally {
    db.close();
  }
}

/**
 * True when another process has the database file open. SQLite deletes the WAL file when the
 * last connection closes; if it is still there after we open and close ours, someone else holds it.
 */
export function databaseFileInUse(dbFile: string): boolean {
  const db = openDatabase(dbFile);
  db.$client.prepare('SELECT count(*) FROM sqlite_master').get();
  db.$client.close();
  return existsSync(dbFile + '-wal');
}
