// mailroom keys create|list|revoke
import type { Command } from 'commander';
import { parseDuration } from '../../src/config.ts';
import { SCOPES, createApiKey, listAllApiKeys, revokeApiKey, type Scope } from '../../src/domain/accounts/apikeys.ts';
import { findInboxByAddress } from '../../src/domain/inboxes/inboxes.ts';
import { CLI_ACTOR } from '../../src/domain/audit/audit.ts';
import { CliError, globals, print, resolveAccount, withContext } from '../shared.ts';

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('manage API keys');
  keys
    .command('create')
    .description('create an API key and print it (shown only once)')
    .option('--account <id>', 'account (default: the default account, created if needed)')
    .option('--name <label>', 'label')
    .option('--read-only', 'the key may only read (403 on POST, PUT, DELETE); the same as --scopes read')
    .option('--scopes <list>', `comma-separated scopes of ${SCOPES.join(', ')} (default: all four)`)
    .option('--inbox <address>', 'limit the key to this inbox (repeatable; default: every inbox)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--expires <duration>', 'expire after this long, e.g. 30d')
    .option('--json', 'print the Created API key object as JSON')
    .action(async (opts: { account?: string; name?: string; readOnly?: boolean; scopes?: string; inbox?: string[]; expires?: string }, cmd: Command) => {
      let expiresAt: string | null = null;
      if (opts.expires) {
        const ms = parseDuration(opts.expires);
        if (!ms) throw new CliError(`--expires: expected a duration such as 30d or 12h, got ${opts.expires}`);
        expiresAt = new Date(Date.now() + ms).toISOString();
      }
      let scopes: Scope[] | undefined;
      if (opts.scopes !== undefined) {
        if (opts.readOnly) throw new CliError('--read-only and --scopes: give one of them');
        const list = opts.scopes
          .split(',')
          .map((x) => x.trim())
          .filter(Boolean);
        const unknown = list.filter((x) => !(SCOPES as readonly string[]).includes(x));
        if (!list.length || unknown.length) throw new CliError(`--scopes: expected a comma-separated list of ${SCOPES.join(', ')}, got ${opts.scopes}`);
        scopes = list as Scope[];
      }
      const created = await withContext(cmd, async (ctx) => {
        const accountId = await resolveAccount(ctx, opts.account);
        const inboxIds: string[] = [];
        for (const address of opts.inbox ?? []) {
          const inbox = await findInboxByAddress(ctx, address);
          if (!inbox || inbox.accountId !== accountId) throw new CliError(`--inbox: no inbox ${address} in account ${accountId}`);
          inboxIds.push(inbox.id);
        }
        return createApiKey(ctx, accountId, { name: opts.name ?? null, readOnly: !!opts.readOnly, scopes, inboxIds, expiresAt, actor: CLI_ACTOR });
      });
      if (globals(cmd).json) print(cmd, created);
      else {
        const limits = `${created.readOnly ? ' (read-only)' : ` (${created.scopes.join(', ')})`}${created.inboxIds.length ? ` for ${opts.inbox!.join(', ')}` : ''}`;
        process.stdout.write(`${created.key}\n# ${created.id}${limits}. ${created.message}\n`);
      }
    });
  keys
    .command('list')
    .description('list active keys (values are never shown)')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string }, cmd: Command) => {
      const rows = (await withContext(cmd, (ctx) => listAllApiKeys(ctx))).filter((k) => !opts.account || k.accountId === opts.account);
      print(
        cmd,
        { data: rows },
        rows.map((k) => ({
          id: k.id,
          prefix: k.keyPrefix,
          name: k.name,
          account: k.accountId,
          readOnly: k.readOnly,
          scopes: k.scopes.join(','),
          inboxes: k.inboxIds.length || 'all',
          lastUsedAt: k.lastUsedAt,
          expiresAt: k.expiresAt,
        })),
      );
    });
  keys
    .command('revoke <id>')
    .description('revoke a key; requests using it are rejected at once')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      await withContext(cmd, (ctx) => revokeApiKey(ctx, null, id));
      process.stdout.write(`revoked ${id}\n`);
    });
}
