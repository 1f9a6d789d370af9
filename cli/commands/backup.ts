// mailroom backup FILE / mailroom restore FILE [--force]: a consistent snapshot of data_dir
// (taken while the server runs) and its restore into an empty, stopped data directory.
import type { Command } from 'commander';
import { CliError, configOf, globals, print } from '../shared.ts';

// Loaded when backup or restore runs, so that other commands (serve) do not evaluate it.
const loadBackup = () => import('../../src/store/backup.ts');

/** Backups are of the embedded engine: a PostgreSQL installation has its own tools, and export. */
function embeddedOnly(cmd: Command): void {
  if (configOf(cmd).database.url) {
    throw new CliError('backup and restore work on the embedded SQLite database; on PostgreSQL use pg_dump / pg_restore (docs/several-nodes.md), or `mailroom export` / `mailroom import`');
  }
}

async function cliErrors<T>(fn: (backup: Awaited<ReturnType<typeof loadBackup>>) => Promise<T>): Promise<T> {
  const backup = await loadBackup();
  try {
    return await fn(backup);
  } catch (err) {
    throw err instanceof backup.BackupError ? new CliError(err.message) : err;
  }
}

export function registerBackup(program: Command): void {
  program
    .command('backup <file>')
    .description('write a backup of data_dir (database snapshot, messages, attachments, keys) to FILE; safe while the server runs')
    .option('--json', 'print the summary as JSON')
    .action(async (file: string, _opts: unknown, cmd: Command) => {
      embeddedOnly(cmd);
      const summary = await cliErrors(({ createBackup }) => createBackup(configOf(cmd).data_dir, file));
      if (globals(cmd).json) return print(cmd, summary);
      const rows = Object.values(summary.tables).reduce((a, b) => a + b, 0);
      process.stdout.write(`wrote ${summary.file} (${summary.bytes} bytes): ${rows} rows, ${summary.files} files\n`);
      if (summary.missing.length) process.stdout.write(`note: ${summary.missing.length} file(s) were deleted while the backup ran: ${summary.missing.join(', ')}\n`);
    });
  program
    .command('restore <file>')
    .description('restore a backup into data_dir, which must be empty (or --force) and not in use by a running server')
    .option('--force', 'replace the contents of a non-empty data_dir')
    .option('--json', 'print the summary as JSON')
    .action(async (file: string, opts: { force?: boolean }, cmd: Command) => {
      embeddedOnly(cmd);
      const summary = await cliErrors(({ restoreBackup }) => restoreBackup(file, configOf(cmd).data_dir, { force: !!opts.force }));
      if (globals(cmd).json) return print(cmd, summary);
      process.stdout.write(`restored ${file} into ${summary.dataDir} (backup of ${summary.manifest.createdAt})\n`);
    });
}
