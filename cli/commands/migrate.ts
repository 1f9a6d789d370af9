// mailroom migrate: brings the database the config names up to the current schema and says
// what it did. The server does the same at start; running it first lets an operator apply a
// release's schema once before rolling several nodes onto it (PostgreSQL), or check a file.
import type { Command } from 'commander';
import { redactUrl } from '../../src/config.ts';
import { configOf, globals, print } from '../shared.ts';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply the schema to the database ([database] url / MAILROOM_DATABASE_URL, else the SQLite file in data_dir)')
    .option('--json', 'print the outcome as JSON')
    .action(async (_opts: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const { migrateStore } = await import('../../src/store/migrate.ts');
      const outcome = await migrateStore({ dataDir: config.data_dir, databaseUrl: config.database.url });
      const where = config.database.url ? `PostgreSQL ${redactUrl(config.database.url)}` : `SQLite ${outcome.location}`;
      if (globals(cmd).json) return print(cmd, { database: config.database.url ? 'postgres' : 'sqlite', ...outcome, location: where });
      process.stdout.write(`${where}: ${outcome.applied} migration(s) applied; schema at ${outcome.current} (${outcome.total} in all)\n`);
    });
}
