// The reads and writes of storing a received message, for src/domain/inbound/inbound.ts: which
// domains are served (domains), which recipient inboxes still exist (inboxes), whether the same
// message was stored already (messages: the redelivery check) and the attachment rows of a
// stored copy (attachments). The message rows and threads are written by src/domain/mail.
import { eq, sql } from 'drizzle-orm';
import { preparedQuery } from '../prepared.ts';
import { domains } from '../schema.ts';
import { PLAN_EACH_TIME, rawRows, type Db } from '../store.ts';

// Equality terms only, so the (account_id, message_id_header) index drives it: with the time
// window in SQL, SQLite's planner took the (account_id, created_at) index instead and read every
// message of the account from the last day for each delivery (bench (a): spooled processing fell
// from 448 to 61 msg/s). The window is applied to the few rows found. On PostgreSQL it is planned
// for each run (PLAN_EACH_TIME): the generic plan a prepared statement keeps was made while the
// table was nearly empty, when every index looked alike, and it took (inbox_id, tx, seq) and read
// the inbox's every message per delivery (pg_stat_statements, bench (o), 10,000 messages into a
// fresh database: 6.7 ms a run, 67 s of the database's time).
const STORED_DELIVERY = `${PLAN_EACH_TIME}SELECT id, created_at FROM messages WHERE account_id = ? AND message_id_header = ? AND inbox_id = ? AND content_hash = ?`;

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
  const rows = await rawRows<[string, string]>(db, STORED_DELIVERY, [delivery.accountId, delivery.messageIdHeader, delivery.inboxId, delivery.contentHash]);
  return rows.find(([, createdAt]) => createdAt > delivery.since)?.[0];
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
