// Processing of spooled inbound mail (src/domain/inbound/spool.ts): one job = one message answered 250
// while the server was busy. The message rows, threads and events are committed in the same
// transaction that ends the job, which keeps the spooled bytes as the message's source (or
// deletes them when nothing is stored): processed exactly once.
import { INBOUND_JOB, INBOUND_RETRY_SCHEDULE, processSpooled, spoolJobEnded, spoolProcessingLimit, type SpooledEnvelope } from '../../domain/inbound/spool.ts';
import type { JobHandler } from '../runner.ts';
import { ok, retry } from '../table.ts';

export const inboundHandler: JobHandler = {
  kind: INBOUND_JOB,
  schedule: () => INBOUND_RETRY_SCHEDULE,
  partitionLimit: spoolProcessingLimit,
  // Stored side by side with the others of the moment on PostgreSQL; its keys keep two copies of one message apart.
  finishTogether: true,
  async run(ctx, job) {
    try {
      const processed = await processSpooled(ctx, job.id, JSON.parse(job.payload) as SpooledEnvelope);
      spoolJobEnded(ctx);
      // Should this commit fail, the files just written are left without a row; the hourly
      // sweep of orphaned files (src/store/blobs/orphans.ts) removes them.
      return ok(processed?.commit, processed?.keys);
    } catch (err) {
      // The bytes stay spooled and a later attempt starts over (prepareInbound removed its files).
      return retry((err as Error).message);
    }
  },
};
