// mailroom accounts create|list
import type { Command } from 'commander';
import { createAccount, listAccounts } from '../../src/domain/accounts/accounts.ts';
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
}
