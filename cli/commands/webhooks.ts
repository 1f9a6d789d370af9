// mailroom webhooks deliveries|replay — the delivery log across accounts, and replaying a
// delivery again (the "dashboard" action; the API has no replay endpoint).
import type { Command } from 'commander';
import { replayDelivery } from '../../src/domain/webhooks/webhook-fanout.ts';
import { listDeliveryLogs, type DeliveryLogEntry } from '../../src/domain/webhooks/webhooks.ts';
import { CliError, print, withContext } from '../shared.ts';

const row = (e: DeliveryLogEntry) => ({
  id: e.id,
  webhookId: e.webhookId,
  event: e.eventType,
  eventId: e.eventId,
  status: e.status,
  http: e.httpStatus,
  attempt: e.attempt,
  ms: e.durationMs,
  at: e.createdAt,
  error: e.error,
});

export function registerWebhooks(program: Command): void {
  const webhooks = program.command('webhooks').description('webhook delivery log and replay');
  webhooks
    .command('deliveries')
    .description('list delivery attempts, most recent first (every account)')
    .option('--failed', 'only deliveries that failed for good (retries exhausted)')
    .option('--webhook <id>', 'only this webhook')
    .option('--limit <n>', 'most entries to show (1-200)', '50')
    .option('--json', 'print JSON')
    .action(async (opts: { failed?: boolean; webhook?: string; limit: string }, cmd: Command) => {
      if (!/^\d+$/.test(opts.limit) || Number(opts.limit) < 1 || Number(opts.limit) > 200) throw new CliError(`--limit must be a whole number from 1 to 200, got ${opts.limit}`);
      const rows = await withContext(cmd, async (ctx) => await listDeliveryLogs(ctx, null, { status: opts.failed ? 'failed' : undefined, webhookId: opts.webhook, limit: Number(opts.limit) }));
      print(cmd, { data: rows }, rows.map(row));
    });
  webhooks
    .command('replay <id>')
    .description('send a delivery (an id from `webhooks deliveries`) again as one new attempt; the running server picks it up within a second. Warns when the event was already delivered')
    .option('--json', 'print JSON')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const queued = await withContext(cmd, (ctx) => replayDelivery(ctx, id));
      // Allowed (a receiver may have lost it), but the receiver will get the event twice.
      if (queued.alreadyDelivered) {
        process.stderr.write(
          `warning: event ${queued.eventId} was already delivered successfully to webhook ${queued.webhookId}; the receiver gets it again (same webhook-id header, so it can drop the duplicate)\n`,
        );
      }
      print(cmd, queued, [{ ...queued }]);
    });
}
