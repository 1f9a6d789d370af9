// Outbound message state, for src/domain/sending/sending.ts and scheduled.ts: the reads and
// writes of queueing a send (the thread's last message for threading headers, the original of a
// reply or forward, the message's attachment rows and links), of every delivery attempt (the
// message's recipients and status, the sender inbox's bounce and complaint counters) and of the
// release of a scheduled message (its inbox, its source). Tables: messages, attachments,
// message_attachments, inboxes. The message row itself is inserted by src/domain/mail/messages.ts.
import { desc, eq, inArray, sql, type Column } from 'drizzle-orm';
import { preparedQuery } from '../../db/prepared.ts';
import { attachments, inboxes, messageAttachments, messages } from '../../db/schema.ts';
import type { Db } from '../store.ts';

type MessageRow = typeof messages.$inferSelect;
type InboxRow = typeof inboxes.$inferSelect;
type AttachmentRow = typeof attachments.$inferInsert;

/** The Message-ID and References of the newest message of a thread: a reply's threading headers. */
export function findLastMessageOfThread(db: Db, threadId: string): Promise<Pick<MessageRow, 'messageIdHeader' | 'references'> | undefined> {
  return db
    .select({ messageIdHeader: messages.messageIdHeader, references: messages.references })
    .from(messages)
    .where(eq(messages.threadId, threadId))
    .orderBy(desc(messages.createdAt), desc(messages.id))
    .limit(1)
    .get();
}

/** The account of message `id`, while it is stored. */
export async function findMessageAccountId(db: Db, id: string): Promise<string | undefined> {
  return (await db.select({ accountId: messages.accountId }).from(messages).where(eq(messages.id, id)).get())?.accountId;
}

/** The ids of `ids` that still name an attachment row. */
export async function listStoredAttachmentIds(db: Db, ids: string[]): Promise<string[]> {
  return (await db.select({ id: attachments.id }).from(attachments).where(inArray(attachments.id, ids))).map((r) => r.id);
}

/** Attachment rows that belong to one message alone. */
export async function insertAttachmentRows(db: Db, rows: AttachmentRow[]): Promise<void> {
  await db.insert(attachments).values(rows).run();
}

/** Links uploaded attachments to message `messageId`, in the order given. */
export async function linkAttachments(db: Db, messageId: string, attachmentIds: string[]): Promise<void> {
  await db
    .insert(messageAttachments)
    .values(attachmentIds.map((attachmentId, position) => ({ messageId, attachmentId, position })))
    .run();
}

// Every attempt reads and writes its message's state: prepared once (src/db/prepared.ts).
const rowById = (db: Db) => db.select().from(messages).where(eq(messages.id, sql.placeholder('id'))).prepare();
const stateUpdate = (db: Db) =>
  db
    .update(messages)
    .set({ recipients: sql`${sql.placeholder('recipients')}`, status: sql`${sql.placeholder('status')}`, updatedAt: sql`${sql.placeholder('updatedAt')}` })
    .where(eq(messages.id, sql.placeholder('id')))
    .prepare();

/** Message `id`, of either direction. */
export function findMessageById(db: Db, id: string): Promise<MessageRow | undefined> {
  return preparedQuery(db, rowById).get({ id });
}

/** A message's recipients (JSON text) and status. */
export interface MessageState {
  id: string;
  recipients: string;
  status: string;
  updatedAt: string;
}

export async function updateMessageState(db: Db, state: MessageState): Promise<void> {
  await preparedQuery(db, stateUpdate).run({ ...state });
}

const incr = (col: Column) => sql`${col} + 1`;

export async function incrementInboxBounces(db: Db, inboxId: string): Promise<void> {
  await db.update(inboxes).set({ bounceCount: incr(inboxes.bounceCount) }).where(eq(inboxes.id, inboxId)).run();
}

export async function incrementInboxComplaints(db: Db, inboxId: string): Promise<void> {
  await db.update(inboxes).set({ complaintCount: incr(inboxes.complaintCount) }).where(eq(inboxes.id, inboxId)).run();
}

/** Messages whose Message-ID is one of `messageIdHeaders`, of any inbox and direction. */
export function listMessagesByMessageIdHeaders(db: Db, messageIdHeaders: string[]): Promise<MessageRow[]> {
  return db.select().from(messages).where(inArray(messages.messageIdHeader, messageIdHeaders));
}

/** Messages whose id is one of `ids`, of any inbox and direction. */
export function listMessagesByIds(db: Db, ids: string[]): Promise<MessageRow[]> {
  return db.select().from(messages).where(inArray(messages.id, ids));
}

/** What a scheduled message's From is built from: its inbox's address and display name. */
export function findInboxSender(db: Db, inboxId: string): Promise<Pick<InboxRow, 'address' | 'displayName'> | undefined> {
  return db.select({ address: inboxes.address, displayName: inboxes.displayName }).from(inboxes).where(eq(inboxes.id, inboxId)).get();
}

/** The inbox a scheduled message is released from, as it is at the release. */
export function findInboxById(db: Db, inboxId: string): Promise<InboxRow | undefined> {
  return db.select().from(inboxes).where(eq(inboxes.id, inboxId)).get();
}

/** Gives a released message the source built for it. */
export async function setMessageSource(db: Db, id: string, source: { rawPath: string; size: number }): Promise<void> {
  await db.update(messages).set(source).where(eq(messages.id, id)).run();
}
