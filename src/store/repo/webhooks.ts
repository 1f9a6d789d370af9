// Webhooks and their delivery log (tables webhooks and webhook_attempts), for
// src/domain/webhooks/webhooks.ts (CRUD, the log, activity figures), webhook-fanout.ts (which
// webhooks an event goes to, the numbering of a replay) and src/jobs/handlers/webhook.ts (one
// attempt: the webhook, its event, the log entry). The event a delivery carries is read from
// table events here too, with its message's bodies, in the statement that reads the webhook.
import { and, desc, eq, gte, isNull, lt, sql, type SQL } from 'drizzle-orm';
import { preparedQuery, tableColumns } from '../prepared.ts';
import { events, webhookAttempts, webhooks } from '../schema.ts';
import { PLAN_EACH_TIME, changes, insertRows, pairKey, rawRows, type Db } from '../store.ts';
import type { EventRow } from './events.ts';
import type { MessageBodies } from './messages.ts';

export type WebhookRow = typeof webhooks.$inferSelect;
export type AttemptRow = typeof webhookAttempts.$inferSelect;

// ---- webhooks ---------------------------------------------------------------------------------

// Read by every delivery attempt: prepared once (src/store/prepared.ts).
const webhookById = (db: Db) =>
  db
    .select()
    .from(webhooks)
    .where(eq(webhooks.id, sql.placeholder('id')))
    .prepare();

export function findWebhookById(db: Db, id: string): Promise<WebhookRow | undefined> {
  return preparedQuery(db, webhookById).get({ id });
}

export type DeliveryRows = { hook: WebhookRow; event: EventRow } & MessageBodies;

const hookColumns = tableColumns<WebhookRow>(webhooks, 'w');
const eventColumns = tableColumns<EventRow>(events, 'e');
/**
 * Planned for each run (PLAN_EACH_TIME): a generic plan made while the tables were small would
 * scan them whole as they grow (the job claim's, src/store/repo/jobs.ts). Every listed webhook
 * with every listed event: the pairs asked for are picked from them.
 */
const DELIVERIES = `${PLAN_EACH_TIME}SELECT ${hookColumns.list}, ${eventColumns.list}, m.body_text, m.body_html
  FROM webhooks w JOIN events e ON e.id IN (SELECT value FROM json_each(?)) LEFT JOIN messages m ON m.id = e.message_id
  WHERE w.id IN (SELECT value FROM json_each(?))`;

/**
 * What delivery attempts read, in one statement for several (the deliveries a claim hands out
 * at once: src/jobs/handlers/webhook.ts): the webhook, the event, and the bodies of the event's
 * message (a stored message.* event leaves them to the message row,
 * src/domain/events/events.ts; null for other events), by `${webhookId} ${eventId}`. A pair
 * whose webhook or event is gone is absent.
 */
export async function listDeliveryRows(db: Db, pairs: Array<{ webhookId: string; eventId: string }>): Promise<Map<string, DeliveryRows>> {
  const wanted = new Set(pairs.map((p) => pairKey(p.webhookId, p.eventId)));
  const rows = await rawRows<unknown[]>(db, DELIVERIES, [JSON.stringify([...new Set(pairs.map((p) => p.eventId))]), JSON.stringify([...new Set(pairs.map((p) => p.webhookId))])]);
  const found = new Map<string, DeliveryRows>();
  for (const values of rows) {
    const hook = hookColumns.row(values.slice(0, hookColumns.count));
    const event = eventColumns.row(values.slice(hookColumns.count, hookColumns.count + eventColumns.count));
    const key = pairKey(hook.id, event.id);
    if (!wanted.has(key)) continue;
    const [bodyText, bodyHtml] = values.slice(hookColumns.count + eventColumns.count) as Array<string | null>;
    found.set(key, { hook, event, bodyText, bodyHtml });
  }
  return found;
}

/** Webhook `id` of the account; a deleted one only with `includeDeleted`. */
export function findWebhookOfAccount(db: Db, accountId: string, id: string, includeDeleted: boolean): Promise<WebhookRow | undefined> {
  const conds = [eq(webhooks.id, id), eq(webhooks.accountId, accountId)];
  if (!includeDeleted) conds.push(isNull(webhooks.deletedAt));
  return db
    .select()
    .from(webhooks)
    .where(and(...conds))
    .get();
}

/** The account's webhooks that are not deleted, newest first. */
export function listWebhooksOfAccount(db: Db, accountId: string): Promise<WebhookRow[]> {
  return db
    .select()
    .from(webhooks)
    .where(and(eq(webhooks.accountId, accountId), isNull(webhooks.deletedAt)))
    .orderBy(desc(webhooks.createdAt), desc(webhooks.id));
}

export async function insertWebhook(db: Db, row: WebhookRow): Promise<void> {
  await db.insert(webhooks).values(row).run();
}

/** Changes the fields of `set` on a webhook of the account that is not deleted; false when there is none. */
export async function updateWebhookOfAccount(db: Db, accountId: string, id: string, set: Partial<WebhookRow>): Promise<boolean> {
  const res = await db
    .update(webhooks)
    .set(set)
    .where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId), isNull(webhooks.deletedAt)))
    .run();
  return changes(res) > 0;
}

// Runs for every event: prepared once (src/store/prepared.ts), on the transaction's connection.
const activeWebhooksOf = (db: Db) =>
  db
    .select({ id: webhooks.id, events: webhooks.events, inboxIds: webhooks.inboxIds })
    .from(webhooks)
    .where(and(eq(webhooks.accountId, sql.placeholder('accountId')), eq(webhooks.isActive, true), isNull(webhooks.deletedAt)))
    .prepare();

/** The account's active, not deleted webhooks, with what they subscribe to. */
export function listActiveWebhooksOfAccount(db: Db, accountId: string): Promise<Array<Pick<WebhookRow, 'id' | 'events' | 'inboxIds'>>> {
  return preparedQuery(db, activeWebhooksOf).all({ accountId });
}

// ---- delivery log -----------------------------------------------------------------------------

export function findAttemptById(db: Db, id: string): Promise<AttemptRow | undefined> {
  return db.select().from(webhookAttempts).where(eq(webhookAttempts.id, id)).get();
}

// Written by every delivery attempt: prepared once.
const insertAttemptQuery = (db: Db) =>
  db
    .insert(webhookAttempts)
    .values({
      id: sql.placeholder('id'),
      accountId: sql.placeholder('accountId'),
      webhookId: sql.placeholder('webhookId'),
      eventId: sql.placeholder('eventId'),
      eventType: sql.placeholder('eventType'),
      jobId: sql.placeholder('jobId'),
      status: sql.placeholder('status'),
      httpStatus: sql.placeholder('httpStatus'),
      durationMs: sql.placeholder('durationMs'),
      attempt: sql.placeholder('attempt'),
      error: sql.placeholder('error'),
      createdAt: sql.placeholder('createdAt'),
    })
    .prepare();

/** Inserts delivery log rows; one alone by the statement prepared once. */
export async function insertAttempts(db: Db, rows: AttemptRow[]): Promise<void> {
  if (rows.length === 1) return void (await preparedQuery(db, insertAttemptQuery).run({ ...rows[0] }));
  await insertRows(
    db,
    'webhook_attempts',
    ['id', 'account_id', 'webhook_id', 'event_id', 'event_type', 'job_id', 'status', 'http_status', 'duration_ms', 'attempt', 'error', 'created_at'],
    rows.map((a) => [a.id, a.accountId, a.webhookId, a.eventId, a.eventType, a.jobId, a.status, a.httpStatus, a.durationMs, a.attempt, a.error, a.createdAt]),
  );
}

/** Which log entries to read; an absent field does not filter. */
export interface AttemptFilter {
  /** null: every account's (the CLI). */
  accountId: string | null;
  webhookId?: string;
  status?: string;
  eventType?: string;
  /** Only entries whose id sorts before this one (ids sort by time). */
  beforeId?: string;
  /** ISO time: only entries created at or after it. */
  since?: string;
  limit: number;
}

/** Log entries, most recent first. */
export function listAttempts(db: Db, filter: AttemptFilter): Promise<AttemptRow[]> {
  const conds: SQL[] = [];
  if (filter.accountId) conds.push(eq(webhookAttempts.accountId, filter.accountId));
  if (filter.webhookId) conds.push(eq(webhookAttempts.webhookId, filter.webhookId));
  if (filter.status) conds.push(eq(webhookAttempts.status, filter.status));
  if (filter.eventType) conds.push(eq(webhookAttempts.eventType, filter.eventType));
  if (filter.beforeId) conds.push(lt(webhookAttempts.id, filter.beforeId));
  if (filter.since) conds.push(gte(webhookAttempts.createdAt, filter.since));
  return db
    .select()
    .from(webhookAttempts)
    .where(and(...conds))
    .orderBy(desc(webhookAttempts.id))
    .limit(filter.limit);
}

/** Attempts of one UTC hour: `hour` is the ISO time's first 13 characters (2024-05-01T13). */
export interface HourlyAttempts {
  hour: string;
  success: number;
  failure: number;
}

/** The account's attempts since `since` (of one webhook when given) per UTC hour: `success` ones, and the others. */
export function countAttemptsPerHour(db: Db, accountId: string, since: string, webhookId?: string): Promise<HourlyAttempts[]> {
  const conds = [eq(webhookAttempts.accountId, accountId), gte(webhookAttempts.createdAt, since)];
  if (webhookId) conds.push(eq(webhookAttempts.webhookId, webhookId));
  const hourKey = sql<string>`substr(${webhookAttempts.createdAt}, 1, 13)`;
  return db
    .select({
      hour: hourKey,
      success: sql<number>`sum(case when ${webhookAttempts.status} = 'success' then 1 else 0 end)`,
      failure: sql<number>`sum(case when ${webhookAttempts.status} = 'success' then 0 else 1 end)`,
    })
    .from(webhookAttempts)
    .where(and(...conds))
    .groupBy(hourKey);
}

/**
 * The highest attempt number logged for one event to one webhook, and whether one of them
 * succeeded. Attempts of an event are younger than it (`since`, its time): the index
 * (webhook_id, created_at) bounds the scan.
 */
export async function summarizeEventAttempts(db: Db, webhookId: string, eventId: string, since: string): Promise<{ last: number | null; delivered: boolean }> {
  const logged = await db
    .select({
      last: sql<number | null>`max(${webhookAttempts.attempt})`,
      delivered: sql<number>`coalesce(max(CASE WHEN ${webhookAttempts.status} = 'success' THEN 1 ELSE 0 END), 0)`,
    })
    .from(webhookAttempts)
    .where(and(eq(webhookAttempts.webhookId, webhookId), gte(webhookAttempts.createdAt, since), eq(webhookAttempts.eventId, eventId)))
    .get();
  return { last: logged?.last ?? null, delivered: Number(logged?.delivered ?? 0) === 1 };
}

/**
 * The `pending` entries job `jobId` logged for webhook `webhookId` become `failed`. The job's
 * attempts are all younger than the job (`since`, its creation; index webhook_id, created_at).
 */
export async function failPendingAttemptsOfJob(db: Db, webhookId: string, jobId: string, since: string): Promise<void> {
  await db
    .update(webhookAttempts)
    .set({ status: 'failed' })
    .where(and(eq(webhookAttempts.webhookId, webhookId), gte(webhookAttempts.createdAt, since), eq(webhookAttempts.jobId, jobId), eq(webhookAttempts.status, 'pending')))
    .run();
}
