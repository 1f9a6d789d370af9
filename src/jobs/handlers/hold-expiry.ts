// The `hold_expiry` job: a send held for a person (src/domain/sending/holds.ts) that nobody
// released within `[policy] hold_expiry` is canceled by the system. Released or canceled
// meanwhile: the job was retired, or finds nothing held and does nothing.
import { expireHoldIn, HOLD_EXPIRY_JOB } from '../../domain/sending/holds.ts';
import type { JobHandler } from '../runner.ts';
import { ok } from '../table.ts';

export const holdExpiryHandler: JobHandler = {
  kind: HOLD_EXPIRY_JOB,
  schedule: (ctx) => ctx.config.outbound.retry_schedule,
  async run(ctx, job) {
    const { messageId } = JSON.parse(job.payload) as { messageId: string };
    return ok((tx) => expireHoldIn(tx, ctx, messageId));
  },
};
