// Events: every state change a webhook may report (message.received, message.sent, …,
// domain.verified). recordEvent is called inside the transaction that makes the change, so an
// event exists exactly when its change was committed — a crash never loses or invents one.
// A message.* event carries a copy of the message, so it names the message and is deleted with
// it (a foreign-key cascade); every event goes after `retention.events` (sweepEvents).
import type { AppContext } from '../context.ts';
import { lt, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/client.ts';
import { preparedQuery } from '../db/prepared.ts';
import { events, webhookAttempts } from '../db/schema.ts';
import { newId } from '../ids.ts';

export const EVENT_TYPES = {
  'message.received': 'An inbound email arrived in an inbox.',
  'message.sent': "An outbound message was accepted by every recipient's mail server.",
  'message.delivered': 'Delivery to the recipient mailbox was confirmed (every recipient was an inbox of this appliance).',
  'message.bounced': 'The message could not be delivered: a recipient server rejected it, or a bounce report named it.',
  'message.complained': 'A recipient marked the message as spam (an ARF feedback report named it).',
  'domain.verified': 'A custom domain passed DNS verification for sending.',
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
export const EVENT_FANOUT: Array<(tx: Tx, ctx: AppContext, event: EventRecord) => void> = [];

// One per inbound message and per send outcome: prepared once (src/db/prepared.ts); run on the
// connection's open transaction like any statement of `tx`.
const insertEvent = (db: Db) =>
  db
    .insert(events)
    .values({
      id: sql.placeholder('id'),
      accountId: sql.placeholder('accountId'),
      type: sql.placeholder('type'),
      data: sql.placeholder('data'),
      messageId: sql.placeholder('messageId'),
      createdAt: sql.placeholder('createdAt'),
    })
    .prepare();

export function recordEvent(tx: Tx, ctx: AppContext, accountId: string, type: EventType, data: unknown): EventRecord {
  const event: EventRecord = { id: newId('evt'), accountId, type, data, createdAt: ctx.clock.now().toISOString() };
  const messageId = type.startsWith('message.') ? (data as { id: string }).id : null;
  preparedQuery(ctx.db, insertEvent).run({ id: event.id, accountId, type, data: JSON.stringify(data), messageId, createdAt: event.createdAt });
  for (const fan of EVENT_FANOUT) fan(tx, ctx, event);
  return event;
}

/** Deletes events and webhook delivery logs older than their retention (housekeeping, hourly). */
export function sweepEvents(ctx: AppContext): { events: number; deliveryLogs: number } {
  const now = ctx.clock.now().getTime();
  const before = (ms: number) => new Date(now - ms).toISOString();
  return {
    events: ctx.db.delete(events).where(lt(events.createdAt, before(ctx.config.retention.events))).run().changes,
    deliveryLogs: ctx.db.delete(webhookAttempts).where(lt(webhookAttempts.createdAt, before(ctx.config.retention.delivery_logs))).run().changes,
  };
}
