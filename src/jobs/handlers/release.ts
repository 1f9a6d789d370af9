// The `release` job: a scheduled message's time has come (src/domain/sending/scheduled.ts). The source
// is built and signed now; the switch to `queued` and its delivery jobs commit with the job's
// outcome, so a crash in between leaves the job to run again and nothing queued twice.
import type { AppContext } from '../../context.ts';
import { releaseIn, renderRelease } from '../../domain/sending/scheduled.ts';
import { RELEASE_JOB, type ReleasePayload } from '../../domain/sending/send-at.ts';
import { writeMessageState, findOutboundRow } from '../../domain/sending/sending.ts';
import type { RecipientOutcome } from '../../domain/mail/messages.ts';
import { errorFields } from '../../log.ts';
import type { JobHandler } from '../runner.ts';
import { fail, ok, retry } from '../table.ts';
import type { Tx } from '../../store/client.ts';
import { afterCommit } from '../../store/store.ts';

export const releaseHandler: JobHandler = {
  kind: RELEASE_JOB,
  schedule: (ctx) => ctx.config.outbound.retry_schedule,
  async run(ctx, job) {
    const payload = JSON.parse(job.payload) as ReleasePayload;
    let source;
    try {
      source = await renderRelease(ctx, payload);
    } catch (err) {
      ctx.log.error('building a scheduled message failed', { messageId: payload.messageId, ...errorFields(err) });
      const reason = `building the message failed: ${(err as Error)?.message ?? String(err)}`.slice(0, 300);
      // Out of attempts: the message fails rather than staying scheduled for ever.
      if (job.attempts >= job.maxAttempts) return fail(reason, (tx) => failScheduled(tx, ctx, payload.messageId, reason));
      return retry(reason);
    }
    if (!source) return ok(); // deleted or canceled meanwhile
    const { source: built, found } = source;
    return ok(async (tx) => {
      if (await releaseIn(tx, ctx, payload.messageId, built, found)) afterCommit(() => ctx.notify('jobs'));
    });
  },
};

async function failScheduled(tx: Tx, ctx: AppContext, messageId: string, reason: string): Promise<void> {
  const row = await findOutboundRow(ctx, messageId);
  if (row?.status !== 'scheduled') return;
  const list = (JSON.parse(row.recipients) as RecipientOutcome[]).map((r) => ({ ...r, status: 'failed', response: `not sent: ${reason}` }));
  await writeMessageState(tx, ctx, row, list, 'failed');
}
