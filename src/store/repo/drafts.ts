// Drafts' rows and their attachment links (tables drafts, draft_attachments), for
// src/domain/sending/drafts.ts. Which fields a draft may hold, and when it may be changed or
// sent, is decided there; every function takes the handle (the store's or a transaction's) it
// runs on.
import { and, asc, count, desc, eq } from 'drizzle-orm';
import { draftAttachments, drafts } from '../schema.ts';
import { changes, rawRows, type Db } from '../store.ts';

export type DraftRow = typeof drafts.$inferSelect;

export function findDraftById(db: Db, id: string): Promise<DraftRow | undefined> {
  return db.select().from(drafts).where(eq(drafts.id, id)).get();
}

/** True while draft `id` of account `accountId` exists, whatever its version. */
export async function draftExists(db: Db, accountId: string, id: string): Promise<boolean> {
  return (
    (await db
      .select({ id: drafts.id })
      .from(drafts)
      .where(and(eq(drafts.id, id), eq(drafts.accountId, accountId)))
      .get()) !== undefined
  );
}

/** The attachments a draft carries, in their order. */
export async function listDraftAttachmentIds(db: Db, draftId: string): Promise<string[]> {
  const rows = await db.select({ id: draftAttachments.attachmentId }).from(draftAttachments).where(eq(draftAttachments.draftId, draftId)).orderBy(asc(draftAttachments.position));
  return rows.map((r) => r.id);
}

/** A page of an inbox's drafts, newest first. */
export function listDraftsOfInbox(db: Db, inboxId: string, limit: number, offset: number): Promise<DraftRow[]> {
  return db.select().from(drafts).where(eq(drafts.inboxId, inboxId)).orderBy(desc(drafts.createdAt), desc(drafts.id)).limit(limit).offset(offset);
}

export async function countDraftsOfInbox(db: Db, inboxId: string): Promise<number> {
  return (await db.select({ n: count() }).from(drafts).where(eq(drafts.inboxId, inboxId)).get())!.n;
}

export async function insertDraft(db: Db, row: DraftRow): Promise<void> {
  await db.insert(drafts).values(row).run();
}

/** Overwrites every field of the draft `row.id` with `row`'s. */
export async function updateDraftRow(db: Db, row: DraftRow): Promise<void> {
  await db.update(drafts).set(row).where(eq(drafts.id, row.id)).run();
}

/** The draft's attachment links become `attachmentIds`, in that order. */
export async function replaceDraftAttachments(db: Db, draftId: string, attachmentIds: string[]): Promise<void> {
  await db.delete(draftAttachments).where(eq(draftAttachments.draftId, draftId)).run();
  if (attachmentIds.length)
    await db
      .insert(draftAttachments)
      .values(attachmentIds.map((attachmentId, position) => ({ draftId, attachmentId, position })))
      .run();
}

/**
 * Deletes the draft (its attachment links go with it); with `version`, only while its
 * updatedAt is still that one. False when no row was deleted.
 */
export async function deleteDraftRow(db: Db, accountId: string, id: string, version?: string): Promise<boolean> {
  const where = and(eq(drafts.id, id), eq(drafts.accountId, accountId), version === undefined ? undefined : eq(drafts.updatedAt, version));
  return changes(await db.delete(drafts).where(where).run()) > 0;
}

/** Drafts of the account, through its inboxes (drafts are indexed by inbox). */
export async function countDraftsOfAccount(db: Db, accountId: string): Promise<number> {
  const [row] = await rawRows<[number | string]>(db, 'SELECT count(*) FROM drafts WHERE inbox_id IN (SELECT id FROM inboxes WHERE account_id = ?)', [accountId]);
  return Number(row?.[0] ?? 0);
}
