// mailroom accounts create|list|set-limits
import type { Command } from 'commander';
import { createAccount, listAccounts, MAX_ACCOUNT_LIMIT, setAccountLimits } from '../../src/domain/accounts/accounts.ts';
import { AppError } from '../../src/domain/errors.ts';
import { print, withContext } from '../shared.ts';

export function registerAccounts(program: Command): void {
  const accounts = program.command('accounts').description('manage accounts (every API resource belongs to one)');
  accounts
    .command('create')
    .description('create an account')
    .requiredOption('--name <name>', 'account name')
    .option('--json', 'print JSON')
    .action(async (opts: { name: string }, cmd: Command) => {
      const acc = await withContext(cmd, (ctx) => createAccount(ctx, opts.name));
      print(cmd, acc, [acc]);
    });
  accounts
    .command('list')
    .description('list accounts')
    .option('--json', 'print JSON')
    .action(async (_opts: unknown, cmd: Command) => {
      const rows = await withContext(cmd, (ctx) => listAccounts(ctx));
      print(cmd, { data: rows }, rows);
    });
  accounts
    .command('set-limits <account>')
    .description("override the account's daily send budget (limits.account_daily_send_limit) and inbox count (limits.inboxes_per_account)")
    .option('--daily <n>', 'sends per UTC day, all its inboxes together')
    .option('--inboxes <n>', 'most inboxes it may have')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { daily?: string; inboxes?: string }, cmd: Command) => {
      const num = (name: string, v: string | undefined) => {
        if (v === undefined) return undefined;
        if (!/^\d+$/.test(v)) throw new AppError('VALIDATION_ERROR', `\`--${name}\`: must be a whole number from 0 to ${MAX_ACCOUNT_LIMIT}, got ${JSON.stringify(v)}`);
        return Number(v);
      };
      const limits = { daily: num('daily', opts.daily), inboxes: num('inboxes', opts.inboxes) };
      const acc = await withContext(cmd, (ctx) => setAccountLimits(ctx, id, limits));
      print(cmd, acc, [acc]);
    });
}
