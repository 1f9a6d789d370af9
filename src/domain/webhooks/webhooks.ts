// Webhooks: create, read, update (PUT changes only the given fields), soft-delete, secret
// rotation, and the delivery log and activity figures read from webhook_attempts. Delivery
// itself is jobs/handlers/webhook.ts; which events become deliveries is webhook-fanout.ts.
import { randomBytes } from 'node:crypto';
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { AppError } from '../errors.ts';
import { EVENT_TYPES, type EventType } from '../events/events.ts';
import { intParam } from '../pagination.ts';
import { isoNow } from '../time.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import { checkWebhookUrl } from './webhook-targets.ts';
import {
  countAttemptsPerHour,
  findAttemptById,
  findWebhookOfAccount,
  insertWebhook,
  listAttempts,
  listWebhooksOfAccount,
  updateWebhookOfAccount,
  type AttemptRow,
  type WebhookRow,
} from '../../store/repo/webhooks.ts';

export type { AttemptRow, WebhookRow };

export interface Webhook {
  id: string;
  url: string;
  description: string | null;
  /** null = every event type. */
  events: EventType[] | null;
  /** The inboxes whose events it receives; empty = every inbox, and events of no inbox (domain.verified). */
  inboxIds: string[];
  isActive: boolean;
  createdAt: string;
  updatedAt: string;
  /** Only in the create response and in a PUT that rotates it. */
  secret?: string;
}

export interface CreateWebhookInput {
  url: string;
  description?: string | null;
  events?: EventType[] | null;
  inboxIds?: string[] | null;
  isActive?: boolean;
}

export interface UpdateWebhookInput {
  url?: string;
  description?: string | null;
  events?: EventType[] | null;
  inboxIds?: string[] | null;
  isActive?: boolean;
  rotateSecret?: boolean;
}

export const ATTEMPT_STATUSES = ['success', 'failed', 'pending'] as const;
export type AttemptStatus = (typeof ATTEMPT_STATUSES)[number];

/** 256 random bits, shown once; receivers key HMAC-SHA256 with the whole string. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64url')}`;

/** Stored form of a subscription: null means all (an empty list is the same thing). */
function storedEvents(events: EventType[] | null | undefined): string | null {
  if (!events || events.length === 0) return null;
  return JSON.stringify([...new Set(events)]);
}

export function subscribedTypes(row: Pick<WebhookRow, 'events'>): EventType[] | null {
  return row.events ? (JSON.parse(row.events) as EventType[]) : null;
}

/** The inboxes a webhook is scoped to, or null for all. */
export function subscribedInboxes(row: Pick<WebhookRow, 'inboxIds'>): string[] | null {
  return row.inboxIds ? (JSON.parse(row.inboxIds) as string[]) : null;
}

/** Stored form of a scope: null means every inbox; each id must be an inbox of the account (else 404). */
async function storedInboxIds(ctx: AppContext, accountId: string, ids: string[] | null | undefined): Promise<string | null> {
  if (!ids || ids.length === 0) return null;
  const unique = [...new Set(ids)];
  for (const id of unique) await findInboxRow(ctx, accountId, id);
  return JSON.stringify(unique);
}

export function webhookView(row: WebhookRow, withSecret = false): Webhook {
  const view: Webhook = {
    id: row.id,
    url: row.url,
    description: row.description,
    events: subscribedTypes(row),
    inboxIds: subscribedInboxes(row) ?? [],
    isActive: row.isActive,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
  if (withSecret) view.secret = row.secret;
  return view;
}

export function eventCatalog(): Array<{ name: EventType; description: string }> {
  return Object.entries(EVENT_TYPES).map(([name, description]) => ({ name: name as EventType, description }));
}

/** A live (not deleted) webhook of the account, or 404. */
export async function findWebhookRow(ctx: AppContext, accountId: string, id: string, opts: { includeDeleted?: boolean } = {}): Promise<WebhookRow> {
  const row = await findWebhookOfAccount(ctx.db, accountId, id, opts.includeDeleted === true);
  if (!row) throw new AppError('WEBHOOK_NOT_FOUND', `webhook ${id} not found`);
  return row;
}

export async function createWebhook(ctx: AppContext, accountId: string, input: CreateWebhookInput): Promise<Webhook> {
  const url = await checkWebhookUrl(ctx, input.url);
  const now = isoNow(ctx.clock);
  const row: WebhookRow = {
    id: newId('whk'),
    accountId,
    url,
    description: input.description ?? null,
    events: storedEvents(input.events),
    inboxIds: await storedInboxIds(ctx, accountId, input.inboxIds),
    isActive: input.isActive ?? true,
    secret: newWebhookSecret(),
    deletedAt: null,
    createdAt: now,
    updatedAt: now,
  };
  await insertWebhook(ctx.db, row);
  return webhookView(row, true);
}

export async function listWebhooks(ctx: AppContext, accountId: string): Promise<Webhook[]> {
  return (await listWebhooksOfAccount(ctx.db, accountId)).map((r) => webhookView(r));
}

export async function getWebhook(ctx: AppContext, accountId: string, id: string): Promise<Webhook> {
  return webhookView(await findWebhookRow(ctx, accountId, id));
}

/** PUT semantics: only the fields present change; `events` replaces the list. */
export async function updateWebhook(ctx: AppContext, accountId: string, id: string, input: UpdateWebhookInput): Promise<Webhook> {
  await findWebhookRow(ctx, accountId, id);
  // The URL is checked (DNS included) before anything is written.
  const url = input.url !== undefined ? await checkWebhookUrl(ctx, input.url) : undefined;
  const set: Partial<WebhookRow> = { updatedAt: isoNow(ctx.clock) };
  if (url !== undefined) set.url = url;
  if (input.description !== undefined) set.description = input.description;
  if (input.events !== undefined) set.events = storedEvents(input.events);
  if (input.inboxIds !== undefined) set.inboxIds = await storedInboxIds(ctx, accountId, input.inboxIds);
  if (input.isActive !== undefined) set.isActive = input.isActive;
  if (input.rotateSecret) set.secret = newWebhookSecret();
  // Deleted while the URL was being resolved.
  if (!(await updateWebhookOfAccount(ctx.db, accountId, id, set))) throw new AppError('WEBHOOK_NOT_FOUND', `webhook ${id} not found`);
  return webhookView(await findWebhookRow(ctx, accountId, id), input.rotateSecret === true);
}

/**
 * Soft delete: no new deliveries are created, deliveries already queued (retries included) are
 * dropped when due, logged `failed` with "webhook deleted: delivery dropped", and the log stays
 * readable (GET /webhooks/logs?webhookId=…).
 */
export async function deleteWebhook(ctx: AppContext, accountId: string, id: string): Promise<void> {
  if (!(await updateWebhookOfAccount(ctx.db, accountId, id, { deletedAt: isoNow(ctx.clock) }))) throw new AppError('WEBHOOK_NOT_FOUND', `webhook ${id} not found`);
}

// ---- delivery log -------------------------------------------------------------------------

/** A log entry with both variants' field names (PRODUCT.md). */
export interface DeliveryLogEntry {
  id: string;
  eventId: string;
  eventType: string;
  event: string;
  webhookId: string;
  status: AttemptStatus;
  httpStatus: number | null;
  responseStatus: number | null;
  durationMs: number;
  attempt: number;
  attempts: number;
  /** Why the attempt failed (network error, timeout, refused target), null on success. */
  error: string | null;
  createdAt: string;
}

export function logEntryView(row: AttemptRow): DeliveryLogEntry {
  return {
    id: row.id,
    eventId: row.eventId,
    eventType: row.eventType,
    event: row.eventType,
    webhookId: row.webhookId,
    status: row.status as AttemptStatus,
    httpStatus: row.httpStatus,
    responseStatus: row.httpStatus,
    durationMs: row.durationMs,
    attempt: row.attempt,
    attempts: row.attempt,
    error: row.error,
    createdAt: row.createdAt,
  };
}

export interface LogQuery {
  webhookId?: string;
  status?: AttemptStatus;
  event?: string;
  hours?: number;
  before?: string;
  limit: number;
}

const MAX_HOURS = 24 * 366;

/** Reads and checks the query string of GET /webhooks/logs. */
export function parseLogQuery(q: URLSearchParams): LogQuery {
  const status = q.get('status') || undefined;
  if (status !== undefined && !(ATTEMPT_STATUSES as readonly string[]).includes(status)) {
    throw new AppError('VALIDATION_ERROR', `query parameter \`status\` must be one of ${ATTEMPT_STATUSES.join(', ')}`);
  }
  const event = q.get('event') || undefined;
  if (event !== undefined && !(event in EVENT_TYPES)) {
    throw new AppError('VALIDATION_ERROR', `query parameter \`event\` must be one of ${Object.keys(EVENT_TYPES).join(', ')}`);
  }
  return {
    webhookId: q.get('webhookId') || undefined,
    status: status as AttemptStatus | undefined,
    event,
    hours: q.get('hours') ? intParam('hours', q.get('hours'), 0, 1, MAX_HOURS) : undefined,
    before: q.get('before') || undefined,
    limit: intParam('limit', q.get('limit'), 50, 1, 200),
  };
}

/** Most recent first; `before` is the id of the last entry already seen (ids sort by time). */
export async function listDeliveryLogs(ctx: AppContext, accountId: string | null, query: LogQuery): Promise<DeliveryLogEntry[]> {
  if (query.webhookId && accountId) await findWebhookRow(ctx, accountId, query.webhookId, { includeDeleted: true });
  const since = query.hours ? new Date(ctx.clock.now().getTime() - query.hours * 3_600_000).toISOString() : undefined;
  const rows = await listAttempts(ctx.db, {
    accountId,
    webhookId: query.webhookId,
    status: query.status,
    eventType: query.event,
    beforeId: query.before,
    since,
    limit: query.limit,
  });
  return rows.map(logEntryView);
}

export function getDeliveryAttempt(ctx: AppContext, id: string): Promise<AttemptRow | undefined> {
  return findAttemptById(ctx.db, id);
}

export interface WebhookActivity {
  webhookId: string | null;
  hours: number;
  successCount: number;
  failureCount: number;
  buckets: Array<{ timestamp: string; success: number; failure: number }>;
}

const HOUR = 3_600_000;

/**
 * Attempts per UTC hour over the last `hours` hours (the current, partial hour included):
 * a `success` attempt counts as success, a `pending` or `failed` one as failure.
 */
export async function webhookActivity(ctx: AppContext, accountId: string, q: URLSearchParams): Promise<WebhookActivity> {
  const webhookId = q.get('webhookId') || undefined;
  const hours = intParam('hours', q.get('hours'), 6, 1, MAX_HOURS);
  if (webhookId) await findWebhookRow(ctx, accountId, webhookId, { includeDeleted: true });
  const currentHour = Math.floor(ctx.clock.now().getTime() / HOUR) * HOUR;
  const first = currentHour - (hours - 1) * HOUR;
  const rows = await countAttemptsPerHour(ctx.db, accountId, new Date(first).toISOString(), webhookId);
  const byHour = new Map(rows.map((r) => [r.hour, r]));
  const buckets: WebhookActivity['buckets'] = [];
  for (let t = first; t <= currentHour; t += HOUR) {
    const timestamp = new Date(t).toISOString();
    const r = byHour.get(timestamp.slice(0, 13));
    buckets.push({ timestamp, success: Number(r?.success ?? 0), failure: Number(r?.failure ?? 0) });
  }
  return {
    webhookId: webhookId ?? null,
    hours,
    successCount: buckets.reduce((n, b) => n + b.success, 0),
    failureCount: buckets.reduce((n, b) => n + b.failure, 0),
    buckets,
  };
}
