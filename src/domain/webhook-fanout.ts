// Webhook fan-out: each recorded event becomes one delivery job per active, non-deleted
// webhook of the same account that subscribes to its type, written in the transaction that
// records the event — so a delivery exists exactly when its event was committed.
import { and, eq, isNull, sql } from 'drizzle-orm';
import type { AppContext } from '../context.ts';
import type { Db, Tx } from '../db/client.ts';
import { preparedQuery } from '../db/prepared.ts';
import { webhooks } from '../db/schema.ts';
import { enqueueJob } from '../jobs/table.ts';
import { AppError } from './errors.ts';
import { EVENT_FANOUT, type EventRecord } from './events.ts';
import { getDeliveryAttempt, subscribedTypes } from './webhooks.ts';

export const WEBHOOK_JOB = 'webhook';

export interface WebhookJobPayload {
  webhookId: string;
  eventId: string;
  /** Attempts made before this job (a replay continues the numbering of the log). */
  attemptOffset?: number;
}

/** Enqueues one delivery inside the caller's transaction; the caller wakes the runner after commit. */
export function queueDelivery(ctx: AppContext, payload: WebhookJobPayload, maxAttempts = ctx.config.webhooks.retry_schedule.length + 1): string {
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
    .select({ id: webhooks.id, events: webhooks.events })
    .from(webhooks)
    .where(and(eq(webhooks.accountId, sql.placeholder('accountId')), eq(webhooks.isActive, true), isNull(webhooks.deletedAt)))
    .prepare();

export function fanOutToWebhooks(_tx: Tx, ctx: AppContext, event: EventRecord): void {
  const targets = preparedQuery(ctx.db, activeWebhooksOf).all({ accountId: event.accountId });
  let queued = 0;
  for (const w of targets) {
    const types = subscribedTypes(w);
    if (types && !types.includes(event.type)) continue;
    queueDelivery(ctx, { webhookId: w.id, eventId: event.id });
    queued++;
  }
  // recordEvent runs inside a synchronous better-sqlite3 transaction: a microtask runs after it
  // has committed. Should it roll back, the runner just finds nothing new.
  if (queued) queueMicrotask(() => ctx.notify('jobs'));
}

if (!EVENT_FANOUT.includes(fanOutToWebhooks)) EVENT_FANOUT.push(fanOutToWebhooks);

/**
 * Sends a logged delivery again as one new attempt through the job table (the CLI's replay;
 * the API has no replay endpoint). Only a final `failed` entry can be replayed, and only to a
 * webhook that still exists and is active.
 */
export function replayDelivery(ctx: AppContext, attemptId: string): { jobId: string; webhookId: string; eventId: string; attempt: number } {
  const attempt = getDeliveryAttempt(ctx, attemptId);
  if (!attempt) throw new AppError('NOT_FOUND', `delivery ${attemptId} not found (see \`mailroom webhooks deliveries\`)`);
  if (attempt.status !== 'failed') throw new AppError('VALIDATION_ERROR', `delivery ${attemptId} is ${attempt.status}; only failed deliveries can be replayed`);
  const hook = ctx.db.select().from(webhooks).where(eq(webhooks.id, attempt.webhookId)).get();
  if (!hook || hook.deletedAt) throw new AppError('WEBHOOK_NOT_FOUND', `webhook ${attempt.webhookId} was deleted; nothing to replay to`);
  if (!hook.isActive) throw new AppError('VALIDATION_ERROR', `webhook ${hook.id} is inactive; activate it (PUT isActive: true) before replaying`);
  const jobId = ctx.db.transaction(() => queueDelivery(ctx, { webhookId: hook.id, eventId: attempt.eventId, attemptOffset: attempt.attempt }, 1));
  ctx.notify('jobs');
  return { jobId, webhookId: hook.id, eventId: attempt.eventId, attempt: attempt.attempt + 1 };
}
