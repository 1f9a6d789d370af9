// Opens the store the configuration names: PostgreSQL when a database URL is set, otherwise the
// embedded SQLite file under the data directory. Either way the schema is brought up to date.
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { join } from 'node:path';
import { openConnection, type FileDb } from './client.ts';
import { migrateDatabase } from './migrate-sqlite.ts';
import { migratePostgres } from './migrate.ts';
import { SqliteStore } from './sqlite.ts';
import type { Store } from './store.ts';
import type { PostgresOptions } from './postgres.ts';

export interface StoreOptions {
  dataDir: string;
  /** postgres://… (config `[database] url`, env MAILROOM_DATABASE_URL); empty: embedded SQLite. */
  databaseUrl?: string;
  /** PostgreSQL: the pool's timeouts and where its errors are logged (src/store/postgres.ts). */
  postgres?: PostgresOptions;
  /** SQLite: what to do when the write-ahead log cannot be fsynced (src/store/sqlite.ts). */
  fatal?: (err: Error) => void;
}

export async function openStore(opts: StoreOptions): Promise<Store> {
  if (opts.databaseUrl) {
    // Loaded only for PostgreSQL: the embedded engine's start does not pay for the driver.
    const { connectPostgres, PostgresStore } = await import('./postgres.ts');
    const pool = connectPostgres(opts.databaseUrl, opts.postgres);
    try {
      await migratePostgres(pool);
    } catch (err) {
      await pool.end();
      throw err;
    }
    const apiMax = opts.postgres?.apiMax ?? 0;
    return new PostgresStore(pool, apiMax > 0 ? connectPostgres(opts.databaseUrl, opts.postgres, apiMax) : undefined);
  }
  const client = openConnection(join(opts.dataDir, 'mailroom.db'));
  migrateDatabase(drizzle(client) as FileDb);
  return new SqliteStore(client, opts.fatal);
}
