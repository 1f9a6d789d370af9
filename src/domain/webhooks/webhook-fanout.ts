// Webhook fan-out: each recorded event becomes one delivery job per active, non-deleted
// webhook of the same account that subscribes to its type (and, when scoped, to its inbox), written in the transaction that
// records the event — so a delivery exists exactly when its event was committed.
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { enqueueJobHere } from '../../jobs/table.ts';
import { afterCommit, readOnce } from '../../store/store.ts';
import { AppError } from '../errors.ts';
import { EVENT_FANOUT, type EventRecord } from '../events/events.ts';
import { getDeliveryAttempt, subscribedInboxes, subscribedTypes } from './webhooks.ts';
import { listUnfinishedJobsOfKind } from '../../store/repo/jobs.ts';
import { findWebhookById, listActiveWebhooksOfAccount, summarizeEventAttempts } from '../../store/repo/webhooks.ts';
import { findEventCreatedAt } from '../../store/repo/events.ts';

export const WEBHOOK_JOB = 'webhook';

export interface WebhookJobPayload {
  webhookId: string;
  eventId: string;
  /** Attempts made before this job (a replay continues the numbering of the log). */
  attemptOffset?: number;
}

/** Enqueues one delivery inside the caller's transaction; the caller wakes the runner after commit. */
export function queueDelivery(ctx: AppContext, payload: WebhookJobPayload, maxAttempts = ctx.config.webhooks.retry_schedule.length + 1): Promise<string> {
  // One partition per webhook, so one slow receiver cannot take every worker.
  return enqueueJobHere(ctx, { kind: WEBHOOK_JOB, payload, partition: payload.webhookId, maxAttempts });
}

/**
 * Events recorded while a webhook is inactive are not queued for it: pausing means the
 * receiver gets nothing for that period, not a backlog on resume.
 */
export async function fanOutToWebhooks(tx: Tx, ctx: AppContext, event: EventRecord): Promise<void> {
  // Once for all the events of the transaction (a batch of spooled mail): its webhooks do not change in it.
  const targets = await readOnce(`webhooks of ${event.accountId}`, () => listActiveWebhooksOfAccount(tx, event.accountId));
  const inboxId = (event.data as { inboxId?: unknown } | null)?.inboxId;
  let queued = 0;
  for (const w of targets) {
    const types = subscribedTypes(w);
    // A held message reaches only the webhooks that ask for holds by name: an agent's webhook of
    // every event must not be handed what was held from it (src/domain/screening/hold.ts).
    if (types ? !types.includes(event.type) : event.type === 'message.held') continue;
    // Scoped to inboxes: only events of those inboxes (an account-level event is none of them).
    const scope = subscribedInboxes(w);
    if (scope && !(typeof inboxId === 'string' && scope.includes(inboxId))) continue;
    await queueDelivery(ctx, { webhookId: w.id, eventId: event.id });
    queued++;
  }
  if (queued) afterCommit(() => ctx.notify('jobs'));
}

if (!EVENT_FANOUT.includes(fanOutToWebhooks)) EVENT_FANOUT.push(fanOutToWebhooks);

/** What a replay queued; `alreadyDelivered` is set when the event had reached the webhook before. */
export interface ReplayResult {
  jobId: string;
  webhookId: string;
  eventId: string;
  attempt: number;
  /** A successful attempt of this event to this webhook exists: the receiver gets it twice. */
  alreadyDelivered: boolean;
}

/**
 * Sends a logged delivery again as one new attempt through the job table (the CLI's replay;
 * the API has no replay endpoint). A `failed` entry (final, or an attempt a retry followed) or
 * a `success` one (allowed; `alreadyDelivered` lets the caller warn) can be replayed; a
 * `pending` one cannot (its retry is already scheduled). Only to a webhook that still exists
 * and is active, and only while the event is kept.
 *
 * The new attempt is numbered after every attempt logged or still to come for this event and
 * webhook (a retrying job's remaining attempts, other queued replays), decided in an IMMEDIATE
 * transaction so two replays — from the CLI and the dashboard at once — never share a number.
 */
export async function replayDelivery(ctx: AppContext, attemptId: string): Promise<ReplayResult> {
  const attempt = await getDeliveryAttempt(ctx, attemptId);
  if (!attempt) throw new AppError('NOT_FOUND', `delivery ${attemptId} not found (see \`mailroom webhooks deliveries\`)`);
  if (attempt.status === 'pending') throw new AppError('VALIDATION_ERROR', `delivery ${attemptId} is pending: its retry is already scheduled; only failed or successful deliveries can be replayed`);
  const hook = await findWebhookById(ctx.db, attempt.webhookId);
  if (!hook || hook.deletedAt) throw new AppError('WEBHOOK_NOT_FOUND', `webhook ${attempt.webhookId} was deleted; nothing to replay to`);
  if (!hook.isActive) throw new AppError('VALIDATION_ERROR', `webhook ${hook.id} is inactive; activate it (PUT isActive: true) before replaying`);
  const eventAt = await findEventCreatedAt(ctx.db, attempt.eventId);
  if (eventAt === undefined) throw new AppError('VALIDATION_ERROR', `event ${attempt.eventId} is no longer kept (retention.events, or its message was deleted); nothing to replay`);
  const queued = await ctx.store.transaction(async (tx) => {
    // One numbering at a time for this webhook, on every node.
    await ctx.store.lock(tx, `webhook-replay:${hook.id}`);
    const logged = await summarizeEventAttempts(tx, hook.id, attempt.eventId, eventAt);
    const unfinished = (await listUnfinishedJobsOfKind(tx, WEBHOOK_JOB))
      .map((j) => ({ ...(JSON.parse(j.payload) as WebhookJobPayload), maxAttempts: j.maxAttempts }))
      .filter((j) => j.webhookId === hook.id && j.eventId === attempt.eventId);
    const offset = Math.max(logged.last ?? 0, ...unfinished.map((j) => (j.attemptOffset ?? 0) + j.maxAttempts));
    const jobId = await queueDelivery(ctx, { webhookId: hook.id, eventId: attempt.eventId, attemptOffset: offset }, 1);
    return { jobId, attempt: offset + 1, alreadyDelivered: attempt.status === 'success' || logged.delivered };
  });
  ctx.notify('jobs');
  return { jobId: queued.jobId, webhookId: hook.id, eventId: attempt.eventId, attempt: queued.attempt, alreadyDelivered: queued.alreadyDelivered };
}
