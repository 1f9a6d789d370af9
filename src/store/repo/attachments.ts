// Storage of attachments: reads and writes `attachments` and reads `message_attachments` (the
// uploads a sent message carries), for src/domain/mail/attachments.ts and the deletion of a
// message (src/domain/mail/messages.ts). The bytes are blobs (src/storage/), not rows here.
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import { preparedQuery } from '../prepared.ts';
import { attachments, messageAttachments } from '../../db/schema.ts';
import type { Db } from '../store.ts';

export type AttachmentRow = typeof attachments.$inferSelect;

/** Attachment rows: an upload, a received message's, a send's own (carried or submitted). */
export async function insertAttachments(db: Db, rows: AttachmentRow[]): Promise<void> {
  if (rows.length) await db.insert(attachments).values(rows).run();
}

export async function insertAttachment(db: Db, row: AttachmentRow): Promise<void> {
  await db.insert(attachments).values(row).run();
}

export function findAttachmentById(db: Db, id: string): Promise<AttachmentRow | undefined> {
  return db.select().from(attachments).where(eq(attachments.id, id)).get();
}

/** The attachments of the account among `ids` (any order; ids of other accounts or of none are left out). */
export function listAttachmentsOfAccount(db: Db, accountId: string, ids: string[]): Promise<AttachmentRow[]> {
  return db
    .select()
    .from(attachments)
    .where(and(eq(attachments.accountId, accountId), inArray(attachments.id, ids)));
}

// Run for every message read or listed: prepared once (src/store/prepared.ts), the id list passed
// as one JSON array parameter so every list length shares one statement.
const ownAttachments = (db: Db) =>
  db
    .select()
    .from(attachments)
    .where(sql`${attachments.messageId} IN (SELECT value FROM json_each(${sql.placeholder('ids')}))`)
    .orderBy(asc(attachments.id))
    .prepare();
const linkedAttachments = (db: Db) =>
  db
    .select({ messageId: messageAttachments.messageId, row: attachments })
    .from(messageAttachments)
    .innerJoin(attachments, eq(attachments.id, messageAttachments.attachmentId))
    .where(sql`${messageAttachments.messageId} IN (SELECT value FROM json_each(${sql.placeholder('ids')}))`)
    .orderBy(asc(messageAttachments.position))
    .prepare();

/**
 * The attachments of the messages `messageIds`: `own`, those that arrived with them (by id), and
 * `linked`, the uploads they were sent with (in the order they were given).
 */
export async function listAttachmentsOfMessages(
  db: Db,
  messageIds: string[],
): Promise<{ own: AttachmentRow[]; linked: Array<{ messageId: string; row: AttachmentRow }> }> {
  const ids = JSON.stringify(messageIds);
  const own = await preparedQuery(db, ownAttachments).all({ ids });
  const linked = await preparedQuery(db, linkedAttachments).all({ ids });
  return { own, linked };
}

/** The attachments of one message: those it arrived with (by id), then those it was sent with, in order. */
export async function listAttachmentsOfMessage(db: Db, messageId: string): Promise<AttachmentRow[]> {
  const own = await db.select().from(attachments).where(eq(attachments.messageId, messageId)).orderBy(attachments.id);
  const linked = await db
    .select({ row: attachments })
    .from(messageAttachments)
    .innerJoin(attachments, eq(attachments.id, messageAttachments.attachmentId))
    .where(eq(messageAttachments.messageId, messageId))
    .orderBy(messageAttachments.position);
  return [...own, ...linked.map((l) => l.row)];
}

/** Where the bytes of a message's own attachments are stored (not those of the uploads it was sent with). */
export async function listStoragePathsOfMessage(db: Db, messageId: string): Promise<string[]> {
  const own = await db.select({ p: attachments.storagePath }).from(attachments).where(eq(attachments.messageId, messageId));
  return own.map((a) => a.p);
}
