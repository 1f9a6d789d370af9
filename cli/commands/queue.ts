// mailroom queue — the durable job table as an operator sees it: what is waiting or running
// (outbound sends, webhook deliveries) and what failed, with the last error of each.
import type { Command } from 'commander';
import { retrySpooled } from '../../src/domain/inbound/spool.ts';
import { listJobs, type JobRow, type JobStatus } from '../../src/jobs/table.ts';
import { print, withContext } from '../shared.ts';

export interface QueueEntry {
  id: string;
  kind: string;
  status: string;
  /** Recipient domain of a send, or '' when the kind has no partition. */
  partition: string;
  attempts: number;
  maxAttempts: number;
  /** When the job is next due (queued) or its lease ends (running); ISO 8601. */
  nextAttemptAt: string | null;
  /** The message (send), event (webhook) or envelope sender (spooled mail) the job is about. */
  subject: string | null;
  lastError: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export function queueEntry(job: JobRow): QueueEntry {
  let subject: string | null = null;
  try {
    const p = JSON.parse(job.payload) as Record<string, unknown>;
    // A spooled inbound message (src/domain/inbound/spool.ts) is named by its envelope sender.
    const ref = p.messageId ?? p.eventId ?? p.deliveryId ?? (typeof p.mailFrom === 'string' ? `mail from <${p.mailFrom}>` : undefined);
    subject = typeof ref === 'string' ? ref : null;
  } catch {
    // a payload that is not JSON is shown without a subject
  }
  const next = job.status === 'queued' ? job.runAt : job.status === 'running' ? job.leaseUntil : null;
  return {
    id: job.id,
    kind: job.kind,
    status: job.status,
    partition: job.partition,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    nextAttemptAt: next ? new Date(next).toISOString() : null,
    subject,
    lastError: job.lastError,
    createdAt: job.createdAt,
    finishedAt: job.finishedAt,
  };
}

export function registerQueue(program: Command): void {
  program
    .command('queue')
    .description('list pending (queued, running) and failed jobs: outbound sends, webhook deliveries and spooled inbound mail')
    .option('--failed', 'only failed jobs')
    .option('--pending', 'only queued and running jobs')
    .option('--limit <n>', 'most jobs listed', '200')
    .option('--json', 'print JSON')
    .option('--retry <job-id>', 're-queue a failed spooled inbound message (after fixing what made it fail)')
    .action(async (opts: { failed?: boolean; pending?: boolean; limit: string; retry?: string }, cmd: Command) => {
      if (opts.retry) {
        const id = opts.retry;
        await withContext(cmd, (ctx) => retrySpooled(ctx, id));
        print(cmd, { jobId: id, status: 'queued' }, [{ id, status: 'queued: a running server picks it up within 30 s' }]);
        return;
      }
      const statuses: JobStatus[] = opts.failed ? ['failed'] : opts.pending ? ['queued', 'running'] : ['queued', 'running', 'failed'];
      const limit = Math.max(1, Math.min(10_000, Number(opts.limit) || 200));
      const entries = (await withContext(cmd, (ctx) => listJobs(ctx, statuses, limit))).map(queueEntry);
      print(
        cmd,
        { data: entries },
        entries.map((e) => ({
          id: e.id,
          kind: e.kind,
          status: e.status,
          partition: e.partition || '-',
          attempts: `${e.attempts}/${e.maxAttempts}`,
          next: e.nextAttemptAt,
          subject: e.subject,
          lastError: e.lastError ? e.lastError.slice(0, 80) : null,
        })),
      );
    });
}
