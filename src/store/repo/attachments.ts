// Storage of attachments: reads and writes `attachments` and reads `message_attachments` (the
// uploads a sent message carries), for src/domain/mail/attachments.ts and the deletion of a
// message (src/domain/mail/messages.ts). The bytes are blobs (src/store/blobs/), not rows here.
import { and, eq, inArray } from 'drizzle-orm';
import { preparedQuery, preparedRows } from '../prepared.ts';
import { attachments, messageAttachments } from '../schema.ts';
import { rawRows, type Db } from '../store.ts';

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

// Run for every message read or listed: one statement (one round trip on PostgreSQL) for both
// kinds, prepared once (src/store/prepared.ts), the id list passed as one JSON array parameter
// so every list length shares it. Rows: kind (0 own, 1 linked), the message, the position, then
// the attachment's columns in ATTACHMENT_COLUMNS order.
const ATTACHMENT_COLUMNS = 'a.id, a.account_id, a.message_id, a.filename, a.content_type, a.size, a.sha256, a.storage_path, a.created_at';
type AttachmentOfMessage = [
  kind: number,
  messageId: string,
  position: number,
  id: string,
  accountId: string,
  ownMessageId: string | null,
  filename: string,
  contentType: string,
  size: number,
  sha256: string,
  storagePath: string,
  createdAt: string,
];
const attachmentsOfIds = (db: Db) =>
  preparedRows<[string, string], AttachmentOfMessage>(
    db,
    `SELECT 0, a.message_id, 0, ${ATTACHMENT_COLUMNS} FROM attachments a WHERE a.message_id IN (SELECT value FROM json_each(?))
     UNION ALL
     SELECT 1, ma.message_id, ma.position, ${ATTACHMENT_COLUMNS} FROM message_attachments ma JOIN attachments a ON a.id = ma.attachment_id
       WHERE ma.message_id IN (SELECT value FROM json_each(?))
     ORDER BY 1, 3, 4`,
  );

/**
 * The attachments of the messages `messageIds`: `own`, those that arrived with them (by id), and
 * `linked`, the uploads they were sent with (in the order they were given).
 */
export async function listAttachmentsOfMessages(db: Db, messageIds: string[]): Promise<{ own: AttachmentRow[]; linked: Array<{ messageId: string; row: AttachmentRow }> }> {
  const ids = JSON.stringify(messageIds);
  const own: AttachmentRow[] = [];
  const linked: Array<{ messageId: string; row: AttachmentRow }> = [];
  for (const [kind, messageId, , id, accountId, ownMessageId, filename, contentType, size, sha256, storagePath, createdAt] of await preparedQuery(db, attachmentsOfIds).all(ids, ids)) {
    const row: AttachmentRow = { id, accountId, messageId: ownMessageId, filename, contentType, size: Number(size), sha256, storagePath, createdAt };
    if (Number(kind) === 0) own.push(row);
    else linked.push({ messageId, row });
  }
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

/**
 * The account's uploads not sent yet: no message of their own (index attachments_uploads) and
 * linked to no sent message (a draft's still count).
 */
export async function countUnsentUploadsOfAccount(db: Db, accountId: string): Promise<number> {
  const [row] = await rawRows<[number | string]>(
    db,
    'SELECT count(*) FROM attachments a WHERE a.account_id = ? AND a.message_id IS NULL AND NOT EXISTS (SELECT 1 FROM message_attachments ma WHERE ma.attachment_id = a.id)',
    [accountId],
  );
  return Number(row?.[0] ?? 0);
}
