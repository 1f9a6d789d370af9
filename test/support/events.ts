// Records events the way the domain does (inside a transaction), for tests of what consumes
// them (webhooks, GET /events, the stream). A message.* event names its message (a foreign key:
// the event goes with the message), so a stand-in message row is stored first when the payload's
// id is not a stored message yet; its inbox is `data.inboxId`, else a fixture inbox of the account.
import type { AppContext } from '../../src/context.ts';
import { messages, threads } from '../../src/store/schema.ts';
import { recordEvent, type EventRecord, type EventType } from '../../src/domain/events/events.ts';
import { createInbox } from '../../src/domain/inboxes/inboxes.ts';
import { newId } from '../../src/ids.ts';
import { rawRows } from '../../src/store/store.ts';
import { sqlDb } from './db.ts';

const fixtureInbox = new Map<string, string>();
const exists = async (ctx: AppContext, table: string, id: string) => (await rawRows(ctx.db, `SELECT 1 FROM ${table} WHERE id = ?`, [id])).length > 0;

async function ensureMessage(ctx: AppContext, accountId: string, data: { id: string; inboxId?: string }): Promise<void> {
  if (await exists(ctx, 'messages', data.id)) return;
  let inboxId = data.inboxId;
  if (!inboxId) {
    const key = `${ctx.config.data_dir}\u0000${accountId}`;
    inboxId = fixtureInbox.get(key);
    if (!inboxId || !(await exists(ctx, 'inboxes', inboxId))) {
      inboxId = (await createInbox(ctx, accountId, {})).id;
      fixtureInbox.set(key, inboxId);
    }
  }
  const now = new Date().toISOString();
  const threadId = newId('thr');
  await sqlDb(ctx).insert(threads).values({ id: threadId, accountId, inboxId, subject: '', lastMessageAt: now, createdAt: now }).run();
  await sqlDb(ctx)
    .insert(messages)
    .values({
      id: data.id,
      accountId,
      inboxId,
      threadId,
      direction: 'inbound',
      fromAddress: 'fixture@example.org',
      status: 'received',
      messageIdHeader: `<${data.id}@fixture>`,
      createdAt: now,
      updatedAt: now,
    })
    .run();
}

export async function emitEvent(ctx: AppContext, accountId: string, type: EventType, data: unknown = { id: `msg_${newId('msg').slice(4)}`, subject: 'hello' }): Promise<EventRecord> {
  if (type.startsWith('message.')) await ensureMessage(ctx, accountId, data as { id: string; inboxId?: string });
  return ctx.store.transaction((tx) => recordEvent(tx, ctx, accountId, type, data));
}
