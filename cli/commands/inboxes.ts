// mailroom inboxes list|suspend|unsuspend|set-limit — support actions the API does not offer.
import type { Command } from 'commander';
import { AppError } from '../../src/domain/errors.ts';
import { listAllInboxes, MAX_DAILY_SEND_LIMIT, setDailyLimit, suspendInbox, unsuspendInbox, type Inbox } from '../../src/domain/inboxes/inboxes.ts';
import { print, withContext } from '../shared.ts';

const row = (i: Inbox) => ({
  id: i.id,
  address: i.address,
  status: i.status,
  sendsToday: i.sendsToday,
  dailySendLimit: i.dailySendLimit,
  totalSent: i.totalSent,
  bounces: i.bounceCount,
  complaints: i.complaintCount,
});

export function registerInboxes(program: Command): void {
  const inboxes = program.command('inboxes').description('inspect inboxes and apply support actions');
  inboxes
    .command('list')
    .description('list inboxes of every account (or of --account)')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string }, cmd: Command) => {
      const rows = await withContext(cmd, (ctx) => listAllInboxes(ctx, opts.account));
      print(cmd, { data: rows }, rows.map(row));
    });
  const action = (name: string, description: string, fn: typeof suspendInbox) =>
    inboxes
      .command(`${name} <inbox>`)
      .description(`${description}; <inbox> is its id or its address`)
      .option('--json', 'print JSON')
      .action(async (id: string, _opts: unknown, cmd: Command) => {
        const inbox = await withContext(cmd, (ctx) => fn(ctx, id));
        print(cmd, inbox, [row(inbox)]);
      });
  action('suspend', 'suspend an inbox: it receives no mail (SMTP 550) and cannot send (403)', suspendInbox);
  action('unsuspend', 'make a suspended inbox active again', unsuspendInbox);
  inboxes
    .command('set-limit <inbox> <limit>')
    .description("set an inbox's daily send limit; <inbox> is its id or its address")
    .option('--json', 'print JSON')
    .action(async (id: string, limit: string, _opts: unknown, cmd: Command) => {
      if (!/^\d+$/.test(limit)) {
        throw new AppError('VALIDATION_ERROR', `\`dailySendLimit\`: must be a whole number from 0 to ${MAX_DAILY_SEND_LIMIT}, got ${JSON.stringify(limit)}`);
      }
      const inbox = await withContext(cmd, (ctx) => setDailyLimit(ctx, id, Number(limit)));
      print(cmd, inbox, [row(inbox)]);
    });
}
