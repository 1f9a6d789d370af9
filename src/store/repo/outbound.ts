// Outbound message state, for src/domain/sending/sending.ts and scheduled.ts: the reads and
// writes of queueing a send (the thread's last message for threading headers, the original of a
// reply or forward, the links of the attachments it carries), of every delivery attempt (the
// message's recipients and status) and of the release of a scheduled message (its source).
// Tables: messages, attachments, message_attachments. Rows of other aggregates (the message row,
// attachment rows, inbox counters) are written by their own repositories.
import { and, desc, eq, inArray, sql } from 'drizzle-orm';
import { preparedQuery } from '../prepared.ts';
import { attachments, messageAttachments, messages } from '../schema.ts';
import { changes, type Db } from '../store.ts';

type MessageRow = typeof messages.$inferSelect;

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

/** Links uploaded attachments to message `messageId`, in the order given. */
export async function linkAttachments(db: Db, messageId: string, attachmentIds: string[]): Promise<void> {
  await db
    .insert(messageAttachments)
    .values(attachmentIds.map((attachmentId, position) => ({ messageId, attachmentId, position })))
    .run();
}

// Every attempt reads and writes its message's state: prepared once (src/store/prepared.ts).
const stateUpdate = (db: Db) =>
  db
    .update(messages)
    .set({ recipients: sql`${sql.placeholder('recipients')}`, status: sql`${sql.placeholder('status')}`, updatedAt: sql`${sql.placeholder('updatedAt')}` })
    .where(eq(messages.id, sql.placeholder('id')))
    .prepare();

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

const stateUpdateIf = (db: Db) =>
  db
    .update(messages)
    .set({ recipients: sql`${sql.placeholder('recipients')}`, status: sql`${sql.placeholder('status')}`, updatedAt: sql`${sql.placeholder('updatedAt')}` })
    .where(and(eq(messages.id, sql.placeholder('id')), eq(messages.recipients, sql.placeholder('wasRecipients')), eq(messages.status, sql.placeholder('wasStatus'))))
    .prepare();

/**
 * Writes a message's state only if its recipients and status are still `was` (a compare and
 * set: no read needed, and nothing written over a change made meanwhile); answers whether it did.
 */
export async function updateMessageStateIf(db: Db, state: MessageState, was: { recipients: string; status: string }): Promise<boolean> {
  return changes(await preparedQuery(db, stateUpdateIf).run({ ...state, wasRecipients: was.recipients, wasStatus: was.status })) === 1;
}

/** Gives a released message the source built for it; answers whether the message is still there. */
export async function setMessageSource(db: Db, id: string, source: { rawPath: string; size: number }): Promise<boolean> {
  return changes(await db.update(messages).set(source).where(eq(messages.id, id)).run()) === 1;
}
