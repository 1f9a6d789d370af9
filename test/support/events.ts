// Records events the way the domain does (inside a transaction), for tests of what consumes
// them (webhooks, GET /events, the stream). A message.* event names its message (a foreign key:
// the event goes with the message), so a stand-in message row is stored first when the payload's
// id is not a stored message yet; its inbox is `data.inboxId`, else a fixture inbox of the account.
import type { AppContext } from '../../src/context.ts';
import { messages, threads } from '../../src/db/schema.ts';
import { recordEvent, type EventRecord, type EventType } from '../../src/domain/events.ts';
import { createInbox } from '../../src/domain/inboxes.ts';
import { newId } from '../../src/ids.ts';

const fixtureInbox = new Map<string, string>();

function ensureMessage(ctx: AppContext, accountId: string, data: { id: string; inboxId?: string }): void {
  if (ctx.db.$client.prepare('SELECT 1 FROM messages WHERE id = ?').get(data.id)) return;
  let inboxId = data.inboxId;
  if (!inboxId) {
    const key = `${ctx.config.data_dir}\u0000${accountId}`;
    inboxId = fixtureInbox.get(key);
    if (!inboxId || !ctx.db.$client.prepare('SELECT 1 FROM inboxes WHERE id = ?').get(inboxId)) {
      inboxId = createInbox(ctx, accountId, {}).id;
      fixtureInbox.set(key, inboxId);
    }
  }
  const now = new Date().toISOString();
  const threadId = newId('thr');
  ctx.db.insert(threads).values({ id: threadId, accountId, inboxId, subject: '', lastMessageAt: now, createdAt: now }).run();
  ctx.db
    .insert(messages)
    .values({ id: data.id, accountId, inboxId, threadId, direction: 'inbound', fromAddress: 'fixture@example.org', status: 'received', messageIdHeader: `<${data.id}@fixture>`, createdAt: now, updatedAt: now })
    .run();
}

export function emitEvent(ctx: AppContext, accountId: string, type: EventType, data: unknown = { id: `msg_${newId('msg').slice(4)}`, subject: 'hello' }): EventRecord {
  if (type.startsWith('message.')) ensureMessage(ctx, accountId, data as { id: string; inboxId?: string });
  return ctx.db.transaction((tx) => recordEvent(tx, ctx, accountId, type, data));
}
