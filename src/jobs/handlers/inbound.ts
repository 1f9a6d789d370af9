// Processing of spooled inbound mail (src/domain/spool.ts): one job = one message answered 250
// while the server was busy. The message rows, threads and events are committed in the same
// transaction that ends the job and deletes the spooled bytes: processed exactly once.
import { INBOUND_JOB, INBOUND_RETRY_SCHEDULE, processSpooled, smtpBusy, spoolJobEnded, type SpooledEnvelope } from '../../domain/spool.ts';
import type { JobHandler } from '../runner.ts';
import { ok, retry } from '../table.ts';

/**
 * Spooled messages processed at once while SMTP is busy. Low on purpose: during a burst the
 * event loop's time goes to accepting mail; the spool is worked off with the runner's full
 * concurrency (jobs.concurrency) once the burst is over.
 */
const CONCURRENCY_WHILE_BUSY = 2;

export const inboundHandler: JobHandler = {
  kind: INBOUND_JOB,
  schedule: () => INBOUND_RETRY_SCHEDULE,
  partitionLimit: (ctx) => (smtpBusy(ctx) ? CONCURRENCY_WHILE_BUSY : ctx.config.jobs.concurrency),
  async run(ctx, job) {
    try {
      const commit = await processSpooled(ctx, job.id, JSON.parse(job.payload) as SpooledEnvelope);
      spoolJobEnded(ctx);
      // Should this commit fail, the files just written are left without a row; the hourly
      // sweep of orphaned files (src/storage/orphans.ts) removes them.
      return ok(commit ?? undefined);
    } catch (err) {
      // The bytes stay spooled and a later attempt starts over (prepareInbound removed its files).
      return retry((err as Error).message);
    }
  },
};
