// Webhook fan-out: each recorded event becomes one delivery job per active, non-deleted
// webhook of the same account that subscribes to its type (and, when scoped, to its inbox), written in the transaction that
// records the event — so a delivery exists exactly when its event was committed.
import { and, eq, gte, inArray, isNull, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db, Tx } from '../../db/client.ts';
import { preparedQuery } from '../../db/prepared.ts';
import { events, jobs, webhookAttempts, webhooks } from '../../db/schema.ts';
import { enqueueJob } from '../../jobs/table.ts';
import { afterCommit } from '../../store/store.ts';
import { AppError } from '../errors.ts';
import { EVENT_FANOUT, type EventRecord } from '../events/events.ts';
import { getDeliveryAttempt, subscribedInboxes, subscribedTypes } from './webhooks.ts';

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
  return enqueueJob(ctx.db, ctx.clock.now(), { kind: WEBHOOK_JOB, payload, partition: payload.webhookId, maxAttempts });
}

/**
 * Events recorded while a webhook is inactive are not queued for it: pausing means the
 * receiver gets nothing for that period, not a backlog on resume.
 */
// Runs for every event: prepared once (src/db/prepared.ts), on the transaction's connection.
const activeWebhooksOf = (db: Db) =>
  db
    .select({ id: webhooks.id, events: webhooks.events, inboxIds: webhooks.inboxIds })
    .from(webhooks)
    .where(and(eq(webhooks.accountId, sql.placeholder('accountId')), eq(webhooks.isActive, true), isNull(webhooks.deletedAt)))
    .prepare();

export async function fanOutToWebhooks(tx: Tx, ctx: AppContext, event: EventRecord): Promise<void> {
  const targets = await preparedQuery(tx, activeWebhooksOf).all({ accountId: event.accountId });
  const inboxId = (event.data as { inboxId?: unknown } | null)?.inboxId;
  let queued = 0;
  for (const w of targets) {
    const types = subscribedTypes(w);
    if (types && !types.includes(event.type)) continue;
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
  const hook = await ctx.db.select().from(webhooks).where(eq(webhooks.id, attempt.webhookId)).get();
  if (!hook || hook.deletedAt) throw new AppError('WEBHOOK_NOT_FOUND', `webhook ${attempt.webhookId} was deleted; nothing to replay to`);
  if (!hook.isActive) throw new AppError('VALIDATION_ERROR', `webhook ${hook.id} is inactive; activate it (PUT isActive: true) before replaying`);
  const event = await ctx.db.select({ createdAt: events.createdAt }).from(events).where(eq(events.id, attempt.eventId)).get();
  if (!event) throw new AppError('VALIDATION_ERROR', `event ${attempt.eventId} is no longer kept (retention.events, or its message was deleted); nothing to replay`);
  const queued = await ctx.store.transaction(async (tx) => {
    // One numbering at a time for this webhook, on every node.
    await ctx.store.lock(tx, `webhook-replay:${hook.id}`);
    // Attempts of this event are younger than it: the index (webhook_id, created_at) bounds the scan.
    const logged = await tx
      .select({
        last: sql<number | null>`max(${webhookAttempts.attempt})`,
        delivered: sql<number>`coalesce(max(CASE WHEN ${webhookAttempts.status} = 'success' THEN 1 ELSE 0 END), 0)`,
      })
      .from(webhookAttempts)
      .where(and(eq(webhookAttempts.webhookId, hook.id), gte(webhookAttempts.createdAt, event.createdAt), eq(webhookAttempts.eventId, attempt.eventId)))
      .get();
    const jobRows = await tx
      .select({ payload: jobs.payload, maxAttempts: jobs.maxAttempts })
      .from(jobs)
      .where(and(eq(jobs.kind, WEBHOOK_JOB), inArray(jobs.status, ['queued', 'running'])));
    const unfinished = jobRows
      .map((j) => ({ ...(JSON.parse(j.payload) as WebhookJobPayload), maxAttempts: j.maxAttempts }))
      .filter((j) => j.webhookId === hook.id && j.eventId === attempt.eventId);
    const offset = Math.max(logged?.last ?? 0, ...unfinished.map((j) => (j.attemptOffset ?? 0) + j.maxAttempts));
    const jobId = await queueDelivery(ctx, { webhookId: hook.id, eventId: attempt.eventId, attemptOffset: offset }, 1);
    return { jobId, attempt: offset + 1, alreadyDelivered: attempt.status === 'success' || Number(logged?.delivered ?? 0) === 1 };
  });
  ctx.notify('jobs');
  return { jobId: queued.jobId, webhookId: hook.id, eventId: attempt.eventId, attempt: queued.attempt, alreadyDelivered: queued.alreadyDelivered };
}
