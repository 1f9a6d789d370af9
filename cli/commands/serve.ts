// mailroom serve: runs everything. On a first start with an empty database it creates the
// default account and prints one API key, once. SIGTERM/SIGINT shut down cleanly.
import type { Command } from 'commander';
import { listAccounts, createAccount } from '../../src/domain/accounts/accounts.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { configFileOf } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startServer } from '../../src/main.ts';
import { ListenError, renderStartup } from '../../src/startup.ts';
import { suggestCommand } from '../invocation.ts';
import { CliError, configOf, globals } from '../shared.ts';

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the HTTP API, the SMTP listener and the job runner (migrates the database first)')
    .action(async (_opts: unknown, cmd: Command) => {
      const config = configOf(cmd);
      const given = globals(cmd).config;
      const log = createLogger();
      // On a terminal the start-up block is for a person; otherwise it is one JSON log line.
      const announce = process.stdout.isTTY ? (info: Parameters<typeof renderStartup>[0]) => void process.stdout.write(renderStartup(info)) : undefined;
      const server = await startServer(config, log, { configFile: configFileOf(given), announce }).catch((err: unknown) => {
        // A busy port is an operator's everyday mistake: one line naming the key, no stack.
        throw err instanceof ListenError ? new CliError(err.message) : err;
      });
      // The signal handlers go in before anything else is awaited: "started" is logged already,
      // and a SIGTERM sent on seeing it found none (the default action killed the process, no
      // clean stop) while the accounts were still being read. A stop waits for the bootstrap.
      let stopping = false;
      let bootstrapped: Promise<unknown> = Promise.resolve();
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        log.info('signal', { signal });
        bootstrapped
          .catch(() => undefined)
          .then(() => server.close())
          .then(
            () => process.exit(0),
            () => process.exit(1),
          );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
      bootstrapped = (async () => {
        if ((await listAccounts(server.ctx)).length > 0) return;
        const account = await createAccount(server.ctx, 'default');
        const key = await createApiKey(server.ctx, account.id, { name: 'bootstrap' });
        log.info('bootstrap', { account: account.id, keyId: key.id, note: 'first start: API key printed on stderr' });
        process.stderr.write(
          `\nFirst start: created account ${account.id} and this API key (shown only once):\n\n    ${key.key}\n\n` +
            `Make more with: ${suggestCommand('keys create [--name LABEL] [--read-only]', given)}\n\n`,
        );
      })();
      await bootstrapped;
    });
}
