// mailroom keys create|list|revoke
import type { Command } from 'commander';
import { parseDuration } from '../../src/config.ts';
import { createApiKey, listAllApiKeys, revokeApiKey } from '../../src/domain/accounts/apikeys.ts';
import { CliError, globals, print, resolveAccount, withContext } from '../shared.ts';

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('manage API keys');
  keys
    .command('create')
    .description('create an API key and print it (shown only once)')
    .option('--account <id>', 'account (default: the default account, created if needed)')
    .option('--name <label>', 'label')
    .option('--read-only', 'the key may only read (403 on POST, PUT, DELETE)')
    .option('--expires <duration>', 'expire after this long, e.g. 30d')
    .option('--json', 'print the Created API key object as JSON')
    .action(async (opts: { account?: string; name?: string; readOnly?: boolean; expires?: string }, cmd: Command) => {
      let expiresAt: string | null = null;
      if (opts.expires) {
        const ms = parseDuration(opts.expires);
        if (!ms) throw new CliError(`--expires: expected a duration such as 30d or 12h, got ${opts.expires}`);
        expiresAt = new Date(Date.now() + ms).toISOString();
      }
      const created = await withContext(cmd, async (ctx) =>
        createApiKey(ctx, await resolveAccount(ctx, opts.account), { name: opts.name ?? null, readOnly: !!opts.readOnly, expiresAt }),
      );
      if (globals(cmd).json) print(cmd, created);
      else process.stdout.write(`${created.key}\n# ${created.id}${created.readOnly ? ' (read-only)' : ''}. ${created.message}\n`);
    });
  keys
    .command('list')
    .description('list active keys (values are never shown)')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string }, cmd: Command) => {
      const rows = (await withContext(cmd, (ctx) => listAllApiKeys(ctx))).filter((k) => !opts.account || k.accountId === opts.account);
      print(cmd, { data: rows }, rows.map((k) => ({ id: k.id, prefix: k.keyPrefix, name: k.name, account: k.accountId, readOnly: k.readOnly, lastUsedAt: k.lastUsedAt, expiresAt: k.expiresAt })));
    });
  keys
    .command('revoke <id>')
    .description('revoke a key; requests using it are rejected at once')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      await withContext(cmd, (ctx) => revokeApiKey(ctx, null, id));
      process.stdout.write(`revoked ${id}\n`);
    });
}
