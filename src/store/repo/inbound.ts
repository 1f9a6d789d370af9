// The reads and writes of storing a received message, for src/domain/inbound/inbound.ts: which
// domains are served (domains), which recipient inboxes still exist (inboxes), whether the same
// message was stored already (messages: the redelivery check) and the attachment rows of a
// stored copy (attachments). The message rows and threads are written by src/domain/mail.
import { and, eq, gt, inArray, sql } from 'drizzle-orm';
import { preparedQuery } from '../../db/prepared.ts';
import { attachments, domains, inboxes, messages } from '../../db/schema.ts';
import type { Db } from '../store.ts';

type InboxRow = typeof inboxes.$inferSelect;

// Run for every stored message inside the group commit: prepared once (src/db/prepared.ts).
const liveInboxes = (db: Db) =>
  db
    .select({ id: inboxes.id })
    .from(inboxes)
    .where(sql`${inboxes.id} IN (SELECT value FROM json_each(${sql.placeholder('ids')}))`)
    .prepare();

/** The ids of `ids` that still name an inbox. */
export async function listLiveInboxIds(db: Db, ids: string[]): Promise<string[]> {
  return (await preparedQuery(db, liveInboxes).all({ ids: JSON.stringify(ids) })).map((r) => r.id);
}

/** The inboxes of `ids` (those still stored). */
export function listInboxesByIds(db: Db, ids: string[]): Promise<InboxRow[]> {
  return db.select().from(inboxes).where(inArray(inboxes.id, ids)).all();
}

const storedBefore = (db: Db) =>
  db
    .select({ id: messages.id })
    .from(messages)
    .where(
      and(
        eq(messages.accountId, sql.placeholder('accountId')),
        eq(messages.messageIdHeader, sql.placeholder('messageIdHeader')),
        eq(messages.inboxId, sql.placeholder('inboxId')),
        eq(messages.contentHash, sql.placeholder('contentHash')),
        gt(messages.createdAt, sql.placeholder('since')),
      ),
    )
    .limit(1)
    .prepare();

/** What identifies one sender's delivery of a message to one inbox. */
export interface Delivery {
  accountId: string;
  inboxId: string;
  messageIdHeader: string;
  contentHash: string;
  /** ISO time: only copies stored after it count. */
  since: string;
}

/** The id of a message stored from the same delivery after `since`, if any. */
export async function findStoredDelivery(db: Db, delivery: Delivery): Promise<string | undefined> {
  return (await preparedQuery(db, storedBefore).get({ ...delivery }))?.id;
}

const domainByName = (db: Db) => db.select({ id: domains.id }).from(domains).where(eq(domains.domain, sql.placeholder('domain'))).prepare();

/** True when `domain` is in the domains table (any account, any status). */
export async function domainExists(db: Db, domain: string): Promise<boolean> {
  return (await preparedQuery(db, domainByName).get({ domain })) !== undefined;
}

/** The attachment rows of a stored copy. */
export async function insertReceivedAttachments(db: Db, rows: Array<typeof attachments.$inferInsert>): Promise<void> {
  await db.insert(attachments).values(rows).run();
}
