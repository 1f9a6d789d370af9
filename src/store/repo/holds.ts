// Reads the outbound holds (src/domain/sending/holds.ts) make of the messages table: whether an
// inbox ever exchanged mail with an address, how many sends a thread had lately, the message a
// reply answers; and the write of a message's hold.
import { and, count, desc, eq, gt, notInArray, or, sql } from 'drizzle-orm';
import { jobs, messages } from '../schema.ts';
import type { Db } from '../store.ts';

/** Outbound statuses that never reached anybody: they are no exchange and no send of a thread. */
const NOT_SENT = ['held', 'canceled', 'scheduled'];

// A JSON array of addresses holds `"address"`; LIKE's own wildcards in an address are escaped.
const quoted = (address: string) => `%"${address.replace(/[\\%_]/g, (c) => `\\${c}`)}"%`;

/**
 * Whether inbox `inboxId` received mail from `address` (lowercase), or sent mail to it that was
 * not held, canceled or still scheduled.
 */
export async function hasExchangedWith(db: Db, inboxId: string, address: string): Promise<boolean> {
  const like = quoted(address);
  const row = await db
    .select({ id: messages.id })
    .from(messages)
    .where(
      and(
        eq(messages.inboxId, inboxId),
        or(
          and(eq(messages.direction, 'inbound'), sql`lower(${messages.fromAddress}) = ${address}`),
          and(
            eq(messages.direction, 'outbound'),
            notInArray(messages.status, NOT_SENT),
            or(
              sql`lower(${messages.toAddresses}) LIKE ${like} ESCAPE '\\'`,
              sql`lower(${messages.ccAddresses}) LIKE ${like} ESCAPE '\\'`,
              sql`lower(${messages.bccAddresses}) LIKE ${like} ESCAPE '\\'`,
            ),
          ),
        ),
      ),
    )
    .limit(1)
    .get();
  return row !== undefined;
}

/** Sends of thread `threadId` created after `since` (ISO) that were not held, canceled or still scheduled. */
export async function countSendsOfThreadSince(db: Db, threadId: string, since: string): Promise<number> {
  const row = await db
    .select({ n: count() })
    .from(messages)
    .where(and(eq(messages.threadId, threadId), eq(messages.direction, 'outbound'), notInArray(messages.status, NOT_SENT), gt(messages.createdAt, since)))
    .get();
  return Number(row?.n ?? 0);
}

/** The inbound messages of account `accountId` with Message-ID `messageIdHeader`: what a reply answers. */
export function listInboundByMessageId(db: Db, accountId: string, messageIdHeader: string): Promise<Array<{ fromAddress: string; rawPath: string | null }>> {
  return db
    .select({ fromAddress: messages.fromAddress, rawPath: messages.rawPath })
    .from(messages)
    .where(and(eq(messages.accountId, accountId), eq(messages.messageIdHeader, messageIdHeader), eq(messages.direction, 'inbound')))
    .limit(5)
    .all();
}

/** The newest inbound message of thread `threadId`. */
export function findLatestInboundOfThread(db: Db, threadId: string): Promise<{ fromAddress: string; rawPath: string | null } | undefined> {
  return db
    .select({ fromAddress: messages.fromAddress, rawPath: messages.rawPath })
    .from(messages)
    .where(and(eq(messages.threadId, threadId), eq(messages.direction, 'inbound')))
    .orderBy(desc(messages.createdAt), desc(messages.id))
    .limit(1)
    .get();
}

/** Sets message `id`'s hold (JSON {reasons}). */
export async function updateMessageHold(db: Db, id: string, hold: string): Promise<void> {
  await db.update(messages).set({ hold }).where(eq(messages.id, id)).run();
}

/** The payload (JSON) of the newest job of `kind` for message `messageId`, whatever its status. */
export async function findNewestJobPayloadOfMessage(db: Db, kind: string, messageId: string): Promise<string | undefined> {
  const row = await db
    .select({ payload: jobs.payload })
    .from(jobs)
    .where(and(eq(jobs.kind, kind), sql`json_extract(${jobs.payload}, '$.messageId') = ${messageId}`))
    .orderBy(desc(jobs.createdAt), desc(jobs.id))
    .limit(1)
    .get();
  return row?.payload;
}
