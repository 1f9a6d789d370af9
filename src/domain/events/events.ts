// Events: every state change a webhook may report (message.received, message.sent, …,
// domain.verified). recordEvent is called inside the transaction that makes the change, so an
// event exists exactly when its change was committed — a crash never loses or invents one.
// A message.* event carries a copy of the message, so it names the message and is deleted with
// it (a foreign-key cascade); every event goes after `retention.events` (sweepEvents).
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { newId } from '../../ids.ts';
import {
  deleteEventsCreatedBefore,
  deleteWebhookAttemptsCreatedBefore,
  findLatestEventId,
  hasEventsHeldBack,
  insertEvents,
  listEventsOfAccount,
  listMessageBodyHeads,
} from '../../store/repo/events.ts';
import { afterCommit, sendAlongRow } from '../../store/store.ts';
import { cutBodies } from '../mail/body-cut.ts';
import { eventRecorded } from './event-feed.ts';
import { listMessageBodies, type MessageBodies } from '../../store/repo/messages.ts';
import { AppError } from '../errors.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import { intParam } from '../pagination.ts';

export const EVENT_TYPES = {
  'message.received': 'An inbound email arrived in an inbox.',
  'message.sent': "An outbound message was accepted by every recipient's mail server.",
  'message.delivered': 'Delivery to the recipient mailbox was confirmed (every recipient was an inbox of this appliance).',
  'message.bounced': 'The message could not be delivered: a recipient server rejected it, or a bounce report named it.',
  'message.complained': 'A recipient marked the message as spam (an ARF feedback report named it).',
  'message.canceled': 'A scheduled message was canceled before its send time, or a held send was canceled or expired (POST /messages/{id}/cancel, [policy] hold_expiry); it is never sent.',
  'domain.verified': 'A custom domain passed DNS verification for sending.',
  'message.held':
    'A message was held for a person: inbound mail the screener said `review` about in an inbox screening in `hold` mode (nothing else is announced until POST /messages/{id}/release), or a send the outbound policy held (hold.reasons says why; release sends it, /cancel or [policy] hold_expiry cancels it). Delivered only to webhooks that name it.',
} as const;

export type EventType = keyof typeof EVENT_TYPES;

export interface EventRecord {
  id: string;
  accountId: string;
  type: EventType;
  data: unknown;
  createdAt: string;
}

/** Hooks run inside the same transaction for each recorded event (webhook fan-out). */
export const EVENT_FANOUT: Array<(tx: Tx, ctx: AppContext, event: EventRecord) => Promise<void>> = [];

export async function recordEvent(tx: Tx, ctx: AppContext, accountId: string, type: EventType, data: unknown): Promise<EventRecord> {
  const event: EventRecord = { id: newId('evt'), accountId, type, data, createdAt: ctx.clock.now().toISOString() };
  const messageId = type.startsWith('message.') ? (data as { id: string }).id : null;
  // Written at the end of the transaction with its other events (sendAlongRow): nothing in it reads them.
  sendAlongRow(tx, 'events', { id: event.id, accountId, type, data: JSON.stringify(messageId ? withoutBodies(data) : data), messageId, createdAt: event.createdAt }, insertEvents);
  for (const fan of EVENT_FANOUT) await fan(tx, ctx, event);
  const inboxId = messageId ? (data as { inboxId?: unknown }).inboxId : undefined;
  afterCommit(() => eventRecorded(ctx, accountId, typeof inboxId === 'string' ? inboxId : undefined));
  return event;
}

// ---- reading events (GET /events, the stream) -----------------------------------------------

/** An event as webhooks carry it (without the webhook's own `webhookId`). */
export interface EventEnvelope {
  id: string;
  type: EventType;
  createdAt: string;
  data: unknown;
}

export interface EventQuery {
  /** Only events after this event id (ids sort by the time they were recorded). */
  after?: string;
  types?: EventType[];
  /** Only events whose payload names this inbox (`data.inboxId`: the message.* events). */
  inboxId?: string;
  /** Only events whose payload names one of these inboxes (a key limited to several). */
  inboxIds?: readonly string[];
  limit: number;
}

export const EVENTS_MAX_LIMIT = 1000;
const EVENT_ID = /^evt_[0-9a-z]{26}$/;

/**
 * Reads and checks the query of GET /events and /events/stream. `lastEventId` (the SSE
 * Last-Event-ID header a reconnecting client sends) wins over `after`: the URL still carries
 * the `after` the stream was first opened with.
 */
export function parseEventQuery(q: URLSearchParams, lastEventId?: string): EventQuery {
  const after = lastEventId?.trim() || q.get('after') || undefined;
  if (after !== undefined && !EVENT_ID.test(after)) {
    throw new AppError('VALIDATION_ERROR', `${lastEventId?.trim() ? 'header `Last-Event-ID`' : 'query parameter `after`'} must be an event id (evt_…)`);
  }
  let types: EventType[] | undefined;
  const rawTypes = q.get('types');
  if (rawTypes !== null) {
    const list = rawTypes
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    const unknown = list.filter((t) => !(t in EVENT_TYPES));
    if (!list.length || unknown.length) {
      throw new AppError(
        'VALIDATION_ERROR',
        `query parameter \`types\` must be a comma-separated list of ${Object.keys(EVENT_TYPES).join(', ')}${unknown.length ? ` (unknown: ${unknown.slice(0, 3).join(', ').slice(0, 200)})` : ''}`,
      );
    }
    types = [...new Set(list)] as EventType[];
  }
  const inboxId = q.get('inboxId') ?? undefined;
  if (inboxId !== undefined && (inboxId === '' || inboxId.length > 100)) throw new AppError('VALIDATION_ERROR', 'query parameter `inboxId` must be an inbox id');
  return { after, types, inboxId, limit: intParam('limit', q.get('limit'), 100, 1, EVENTS_MAX_LIMIT) };
}

/**
 * Events of the account after `query.after`, oldest first: in the order they became visible
 * (commit order, on either engine), so a reader that continues after the last event it saw
 * misses nothing.
 */
export async function listEvents(ctx: AppContext, accountId: string, query: EventQuery): Promise<EventEnvelope[]> {
  if (query.inboxId) await findInboxRow(ctx, accountId, query.inboxId);
  const rows = await listEventsOfAccount(ctx.db, accountId, query);
  // A list (and a stream frame) carries no whole body: a 14 MB mail in twenty streams held
  // 1.6 GB. Webhooks read eventPayloads without a cut and get the message whole.
  const data = await eventPayloads(ctx, rows, ctx.config.limits.list_body_bytes);
  return rows.map((r, i) => ({ id: r.id, type: r.type as EventType, createdAt: r.createdAt, data: data[i] }));
}

/**
 * A message.* event's payload is the message as it was, bodies included; but the bodies never
 * change and the message row already holds them, so the stored event holds `true` in their place
 * (a body is a string or null, never a boolean) and readers fill them in from the row. Each
 * received 10 KB message wrote its body twice before: bench (a) measured the commit's page
 * writes as the largest cost of storing a message. An event goes with its message
 * (events.message_id cascades), so the row is there whenever the event is.
 */
const FROM_MESSAGE = true;

function withoutBodies(data: unknown): unknown {
  const d = data as { bodyText?: unknown; bodyHtml?: unknown };
  if (typeof d?.bodyText !== 'string' && typeof d?.bodyHtml !== 'string') return data;
  return { ...d, ...(typeof d.bodyText === 'string' ? { bodyText: FROM_MESSAGE } : {}), ...(typeof d.bodyHtml === 'string' ? { bodyHtml: FROM_MESSAGE } : {}) };
}

/**
 * The payloads of stored events (`data` JSON), message bodies filled in from their rows: whole
 * (webhooks), or, with `cutTo`, cut to that many bytes with `bodyTruncated` (lists and streams:
 * only the head of each body is read, so a 14 MB body is never a string here).
 */
export async function eventPayloads(ctx: AppContext, rows: Array<{ data: string }>, cutTo?: number, known?: ReadonlyMap<string, MessageBodies>): Promise<unknown[]> {
  const payloads = rows.map((r) => JSON.parse(r.data) as { id?: string; bodyText?: unknown; bodyHtml?: unknown; bodyTruncated?: boolean });
  const held = payloads.filter((p) => p?.bodyText === FROM_MESSAGE || p?.bodyHtml === FROM_MESSAGE);
  if (held.length === 0) return payloads;
  const ids = [...new Set(held.map((p) => String(p.id)))];
  // A character is at least one byte: the first `cutTo` characters hold the first `cutTo` bytes.
  // Whole bodies the caller read already (a webhook delivery, with its event) are not read again.
  let bodies: ReadonlyMap<string, MessageBodies & { longer?: boolean }>;
  if (cutTo !== undefined) bodies = await listMessageBodyHeads(ctx.db, ids, cutTo);
  else bodies = known && ids.every((id) => known.has(id)) ? known : await listMessageBodies(ctx.db, ids);
  for (const p of held) {
    const b = bodies.get(String(p.id));
    if (p.bodyText === FROM_MESSAGE) p.bodyText = b?.bodyText ?? null;
    if (p.bodyHtml === FROM_MESSAGE) p.bodyHtml = b?.bodyHtml ?? null;
    if (cutTo !== undefined) {
      cutBodies(p as Parameters<typeof cutBodies>[0], cutTo);
      if (b && 'longer' in b && b.longer) p.bodyTruncated = true;
    }
  }
  return payloads;
}

/**
 * Whether events matching `query` follow `query.after` that listEvents does not give yet (several
 * nodes: committed behind a transaction still open). Nothing announces them when that transaction
 * ends, so a reader that got everything listEvents gives looks again shortly while this holds.
 */
export async function eventsHeldBack(ctx: AppContext, accountId: string, query: EventQuery): Promise<boolean> {
  return hasEventsHeldBack(ctx.db, accountId, query);
}

/** The newest event id of the whole appliance (a stream opened without a cursor starts there). */
export async function latestEventId(ctx: AppContext): Promise<string | undefined> {
  return findLatestEventId(ctx.db);
}

/** Deletes events and webhook delivery logs older than their retention (housekeeping, hourly). */
export async function sweepEvents(ctx: AppContext): Promise<{ events: number; deliveryLogs: number }> {
  const now = ctx.clock.now().getTime();
  const before = (ms: number) => new Date(now - ms).toISOString();
  return {
    events: await deleteEventsCreatedBefore(ctx.db, before(ctx.config.retention.events)),
    deliveryLogs: await deleteWebhookAttemptsCreatedBefore(ctx.db, before(ctx.config.retention.delivery_logs)),
  };
}
