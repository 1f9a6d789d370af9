// The reads and writes of storing a received message, for src/domain/inbound/inbound.ts: which
// domains are served (domains), which recipient inboxes still exist (inboxes), whether the same
// message was stored already (messages: the redelivery check) and the attachment rows of a
// stored copy (attachments). The message rows and threads are written by src/domain/mail.
import { and, eq, sql } from 'drizzle-orm';
import { preparedQuery } from '../prepared.ts';
import { domains, messages } from '../schema.ts';
import type { Db } from '../store.ts';

// Equality terms only, so the (account_id, message_id_header) index drives it: with the time
// window in SQL, SQLite's planner took the (account_id, created_at) index instead and read every
// message of the account from the last day for each delivery (bench (a): spooled processing fell
// from 448 to 61 msg/s). The window is applied to the few rows found.
const storedBefore = (db: Db) =>
  db
    .select({ id: messages.id, createdAt: messages.createdAt })
    .from(messages)
    .where(
      and(
        eq(messages.accountId, sql.placeholder('accountId')),
        eq(messages.messageIdHeader, sql.placeholder('messageIdHeader')),
        eq(messages.inboxId, sql.placeholder('inboxId')),
        eq(messages.contentHash, sql.placeholder('contentHash')),
      ),
    )
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
  const { since, ...key } = delivery;
  return (await preparedQuery(db, storedBefore).all({ ...key })).find((r) => r.createdAt > since)?.id;
}

const domainByName = (db: Db) =>
  db
    .select({ id: domains.id })
    .from(domains)
    .where(eq(domains.domain, sql.placeholder('domain')))
    .prepare();

/** True when `domain` is in the domains table (any account, any status). */
export async function domainExists(db: Db, domain: string): Promise<boolean> {
  return (await preparedQuery(db, domainByName).get({ domain })) !== undefined;
}
