// mailroom suppressions list|add|remove: the suppression list of an account
// (src/domain/sending/suppressions.ts), as GET/POST/DELETE /suppressions.
import type { Command } from 'commander';
import { parsePage } from '../../src/domain/pagination.ts';
import { addSuppression, listSuppressions, removeSuppression } from '../../src/domain/sending/suppressions.ts';
import { globals, print, resolveAccount, withContext } from '../shared.ts';

export function registerSuppressions(program: Command): void {
  const cmds = program.command('suppressions').description('manage the suppression list (addresses no send attempts)');
  cmds
    .command('list')
    .description('list suppressed addresses, newest first')
    .option('--account <id>', 'account (default: the default account)')
    .option('--address <address>', 'only this address')
    .option('--limit <n>', 'at most this many (1-100, default 20)')
    .option('--offset <n>', 'skip this many')
    .option('--json', 'print the page as JSON')
    .action(async (opts: { account?: string; address?: string; limit?: string; offset?: string }, cmd: Command) => {
      const query = new URLSearchParams(Object.entries({ limit: opts.limit, offset: opts.offset }).filter((e): e is [string, string] => e[1] !== undefined));
      const page = await withContext(cmd, async (ctx) => listSuppressions(ctx, await resolveAccount(ctx, opts.account), { ...parsePage(query), address: opts.address }));
      print(
        cmd,
        page,
        page.data.map((s) => ({ address: s.address, reason: s.reason, createdAt: s.createdAt, messageId: s.messageId })),
      );
    });
  cmds
    .command('add <address>')
    .description('suppress an address (reason manual); one already suppressed is left as it is')
    .option('--account <id>', 'account (default: the default account)')
    .option('--json', 'print the entry as JSON')
    .action(async (address: string, opts: { account?: string }, cmd: Command) => {
      const { entry, created } = await withContext(cmd, async (ctx) => addSuppression(ctx, await resolveAccount(ctx, opts.account), address));
      if (globals(cmd).json) print(cmd, entry);
      else process.stdout.write(created ? `suppressed ${entry.address}\n` : `${entry.address} was already suppressed (${entry.reason}, ${entry.createdAt})\n`);
    });
  cmds
    .command('remove <address>')
    .description('lift the suppression of an address')
    .option('--account <id>', 'account (default: the default account)')
    .action(async (address: string, opts: { account?: string }, cmd: Command) => {
      await withContext(cmd, async (ctx) => removeSuppression(ctx, await resolveAccount(ctx, opts.account), address));
      process.stdout.write(`removed ${address.trim().toLowerCase()}\n`);
    });
}
