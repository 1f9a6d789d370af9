// Schema migrations for each engine: migrations/ (SQLite) and migrations/pg/ (PostgreSQL), both
// written by drizzle-kit from the one schema (src/store/schema.ts, src/store/schema-pg.ts) plus the
// hand-written parts (counters, full-text search). On PostgreSQL several nodes may start at
// once: an advisory lock lets one migrate while the others wait, then find nothing to do.
import { readMigrationFiles, type MigrationMeta } from 'drizzle-orm/migrator';
import { fileURLToPath } from 'node:url';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { join } from 'node:path';
import type pg from 'pg';
import { openConnection, type FileDb } from './client.ts';
import { migrateDatabase, readMigrations } from './migrate-sqlite.ts';

export const PG_MIGRATIONS_FOLDER = fileURLToPath(new URL('../../migrations/pg', import.meta.url));

/** Any constant both sides agree on: the lock only serialises mailroom's own migrators. */
const MIGRATION_LOCK = 0x6d61696c; // 'mail'

let embeddedPg: MigrationMeta[] | undefined;
/** The single executable has no migrations/ folder: it passes the files in (src/sea.ts). */
export function setEmbeddedPgMigrations(list: MigrationMeta[]): void {
  embeddedPg = list;
}

export function readPgMigrations(): MigrationMeta[] {
  return embeddedPg ?? readMigrationFiles({ migrationsFolder: PG_MIGRATIONS_FOLDER });
}

/**
 * Applies every PostgreSQL migration not yet applied, in one transaction; answers how many
 * ran. Bookkeeping is drizzle's own (`drizzle.__drizzle_migrations`: hash and folder time of
 * each applied file), so drizzle-kit's tools read the same history.
 */
export async function migratePostgres(pool: pg.Pool): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query('CREATE SCHEMA IF NOT EXISTS drizzle');
      await client.query('CREATE TABLE IF NOT EXISTS drizzle.__drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)');
      const last = await client.query<{ created_at: number }>('SELECT created_at FROM drizzle.__drizzle_migrations ORDER BY created_at DESC LIMIT 1');
      const after = last.rows.length ? Number(last.rows[0]!.created_at) : -1;
      let ran = 0;
      for (const m of readPgMigrations()) {
        if (m.folderMillis <= after) continue;
        for (const statement of m.sql) if (statement.trim()) await client.query(statement);
        await client.query('INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ($1, $2)', [m.hash, m.folderMillis]);
        ran++;
      }
      await client.query('COMMIT');
      return ran;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  } finally {
    client.release();
  }
}

export interface MigrateOutcome {
  /** Migrations this run applied. */
  applied: number;
  /** Migrations the database has now, of `total` this release knows. */
  current: number;
  total: number;
  /** The SQLite file, or '' for PostgreSQL. */
  location: string;
}

/** `mailroom migrate`: brings the configured database up to date and counts what ran. */
export async function migrateStore(opts: { dataDir: string; databaseUrl?: string }): Promise<MigrateOutcome> {
  if (opts.databaseUrl) {
    // Loaded only for PostgreSQL: the embedded engine's start does not pay for the driver.
    const { connectPostgres } = await import('./postgres.ts');
    const pool = connectPostgres(opts.databaseUrl, { max: 1 });
    try {
      const applied = await migratePostgres(pool);
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations');
      return { applied, current: rows[0]?.n ?? 0, total: readPgMigrations().length, location: '' };
    } finally {
      await pool.end();
    }
  }
  const file = join(opts.dataDir, 'mailroom.db');
  const client = openConnection(file);
  try {
    const countApplied = () => {
      const exists = client.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'").get();
      return exists ? (client.prepare('SELECT count(*) FROM __drizzle_migrations').pluck().get() as number) : 0;
    };
    const before = countApplied();
    migrateDatabase(drizzleSqlite(client) as FileDb);
    const current = countApplied();
    return { applied: current - before, current, total: readMigrations().length, location: file };
  } finally {
    client.close();
  }
}
