// mailroom serve: runs everything. On a first start with an empty database it creates the
// default account and prints one API key, once. SIGTERM/SIGINT shut down cleanly.
import type { Command } from 'commander';
import { listAccounts, createAccount } from '../../src/domain/accounts.ts';
import { createApiKey } from '../../src/domain/apikeys.ts';
import { createLogger } from '../../src/log.ts';
import { startServer } from '../../src/main.ts';
import { configOf } from '../shared.ts';

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the HTTP API, the SMTP listener and the job runner (migrates the database first)')
    .action(async (_opts: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const log = createLogger();
      const server = await startServer(config, log);
      if (listAccounts(server.ctx).length === 0) {
        const account = createAccount(server.ctx, 'default');
        const key = createApiKey(server.ctx, account.id, { name: 'bootstrap' });
        log.info('bootstrap', { account: account.id, keyId: key.id, note: 'first start: API key printed on stderr' });
        process.stderr.write(
          `\nFirst start: created account ${account.id} and this API key (shown only once):\n\n    ${key.key}\n\n` +
            `Make more with: mailroom keys create [--name LABEL] [--read-only]\n\n`,
        );
      }
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        log.info('signal', { signal });
        server.close().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
    });
}
