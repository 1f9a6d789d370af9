// mailroom export FILE / mailroom import FILE: move a whole installation between SQLite and
// PostgreSQL (src/store/transfer.ts). The passphrase that seals the secret parts comes from
// --passphrase-file or MAILROOM_EXPORT_PASSPHRASE, never from the command line (ps shows it).
import type { Command } from 'commander';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { CliError, configOf, globals, print } from '../shared.ts';

function passphrase(opts: { passphraseFile?: string }): string {
  if (opts.passphraseFile) {
    try {
      return readFileSync(opts.passphraseFile, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new CliError(`cannot read --passphrase-file ${opts.passphraseFile}: ${(err as Error).message}`);
    }
  }
  const env = process.env.MAILROOM_EXPORT_PASSPHRASE;
  if (env) return env;
  throw new CliError('a passphrase seals the secret parts (DKIM keys, webhook secrets, signing keys): give --passphrase-file FILE or set MAILROOM_EXPORT_PASSPHRASE');
}

async function withStore<T>(
  cmd: Command,
  file: string,
  fn: (t: typeof import('../../src/store/transfer.ts'), store: import('../../src/store/store.ts').Store, dataDir: string, staging: string) => Promise<T>,
): Promise<T> {
  const config = configOf(cmd);
  const [transfer, { openStore }] = await Promise.all([import('../../src/store/transfer.ts'), import('../../src/store/open.ts')]);
  const staging = mkdtempSync(join(dirname(resolve(file)), '.mailroom-transfer-'));
  const store = await openStore({ dataDir: config.data_dir, databaseUrl: config.database.url });
  try {
    return await fn(transfer, store, config.data_dir, join(staging, 'x'));
  } catch (err) {
    throw err instanceof transfer.TransferError ? new CliError(err.message) : err;
  } finally {
    await store.close();
    rmSync(staging, { recursive: true, force: true });
  }
}

/**
 * An export reads the installation table by table: a server writing meanwhile would leave rows
 * in the file that name messages or blobs it lacks. As for restore, a server holding the embedded
 * database open (src/store/sqlite-snapshot.ts's probe) is a refusal.
 */
async function refuseWhileServed(cmd: Command): Promise<void> {
  const config = configOf(cmd);
  const dbFile = join(resolve(config.data_dir), 'mailroom.db');
  if (config.database.url || !existsSync(dbFile)) return;
  const { databaseFileInUse } = await import('../../src/store/sqlite-snapshot.ts');
  if (databaseFileInUse(dbFile)) throw new CliError(`the database in ${resolve(config.data_dir)} is in use: stop \`mailroom serve\` first`);
}

export function registerTransfer(program: Command): void {
  program
    .command('export <file>')
    .description('write the whole installation (rows, messages, attachments, sealed secrets) to FILE, to import into another database; stop `serve` first')
    .option('--passphrase-file <file>', 'file holding the passphrase that seals the secret parts (else MAILROOM_EXPORT_PASSPHRASE)')
    .option('--json', 'print the summary as JSON')
    .action(async (file: string, opts: { passphraseFile?: string }, cmd: Command) => {
      const secret = passphrase(opts);
      await refuseWhileServed(cmd);
      const summary = await withStore(cmd, file, (t, store, dataDir, staging) => t.exportInstallation({ store, dataDir, file, passphrase: secret, staging }));
      if (globals(cmd).json) return print(cmd, summary);
      const rows = Object.values(summary.tables).reduce((a, b) => a + b, 0);
      process.stdout.write(`wrote ${summary.file} (${summary.bytes} bytes) from ${summary.source}: ${rows} rows, ${summary.blobs} blobs; secrets sealed\n`);
      if (summary.missing.length) process.stdout.write(`note: ${summary.missing.length} blob(s) named by rows were missing: ${summary.missing.join(', ')}\n`);
    });
  program
    .command('import <file>')
    .description('load an export into the configured database, which must be empty (fresh after `mailroom migrate`)')
    .option('--passphrase-file <file>', 'file holding the export passphrase (else MAILROOM_EXPORT_PASSPHRASE)')
    .option('--json', 'print the summary as JSON')
    .action(async (file: string, opts: { passphraseFile?: string }, cmd: Command) => {
      const secret = passphrase(opts);
      const manifest = await withStore(cmd, file, (t, store, dataDir, staging) => t.importInstallation({ store, dataDir, file, passphrase: secret, staging }));
      if (globals(cmd).json) return print(cmd, manifest);
      const rows = Object.values(manifest.tables).reduce((a, b) => a + b, 0);
      process.stdout.write(`imported ${file} (exported from ${manifest.source} at ${manifest.createdAt}): ${rows} rows, ${manifest.blobs} blobs\n`);
    });
}
