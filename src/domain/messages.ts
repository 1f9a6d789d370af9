// Messages: the API shape of a stored message (inbound or outbound). Listing, reading and
// deleting messages live here too; receiving is in inbound.ts, sending in sending.ts.
import { and, asc, desc, eq, sql } from 'drizzle-orm';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/client.ts';
import { preparedQuery } from '../db/prepared.ts';
import { attachments, inboxMessageCounts, messages } from '../db/schema.ts';
import { attachmentMetaForMany } from './attachments.ts';
import { AppError } from './errors.ts';
import { findInboxRow } from './inboxes.ts';
import type { Page, PageResult } from './pagination.ts';
import { afterMessageRemoved, findThreadRow, threadView, type Thread } from './threads.ts';

export type MessageRow = typeof messages.$inferSelect;

export interface AttachmentMeta {
  id: string;
  filename: string;
  contentType: string;
  size: number;
}

export interface RecipientOutcome {
  address: string;
  /** 'queued' | 'sending' | 'sent' | 'delivered' | 'failed' | 'bounced' | 'complained' | 'deferred' */
  status: string;
  /** The remote server's last reply, or what happened instead. */
  response: string | null;
}

export interface Message {
  id: string;
  inboxId: string;
  threadId: string;
  direction: 'inbound' | 'outbound';
  fromAddress: string;
  fromName: string | null;
  toAddresses: string[];
  ccAddresses: string[];
  bccAddresses?: string[];
  subject: string;
  bodyText: string | null;
  bodyHtml: string | null;
  delivery?: string;
  status: string;
  attachments: AttachmentMeta[];
  messageIdHeader: string;
  inReplyTo: string | null;
  recipients?: RecipientOutcome[];
  authentication?: unknown;
  size: number;
  createdAt: string;
  updatedAt: string;
}

export function messageView(row: MessageRow, attachments: AttachmentMeta[]): Message {
  const m: Message = {
    id: row.id,
    inboxId: row.inboxId,
    threadId: row.threadId,
    direction: row.direction as Message['direction'],
    fromAddress: row.fromAddress,
    fromName: row.fromName,
    toAddresses: JSON.parse(row.toAddresses),
    ccAddresses: JSON.parse(row.ccAddresses),
    subject: row.subject,
    bodyText: row.bodyText,
    bodyHtml: row.bodyHtml,
    status: row.status,
    attachments,
    messageIdHeader: row.messageIdHeader,
    inReplyTo: row.inReplyTo,
    size: row.size,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
  if (row.direction === 'outbound') {
    m.bccAddresses = JSON.parse(row.bccAddresses);
    m.delivery = row.delivery ?? 'email';
    m.recipients = JSON.parse(row.recipients);
  } else {
    m.authentication = row.authentication ? JSON.parse(row.authentication) : null;
  }
  return m;
}

/** Views of many rows with their attachments, in two queries rather than one per message. */
export function messageViews(ctx: AppContext, rows: MessageRow[]): Message[] {
  const metas = attachmentMetaForMany(ctx, rows.map((r) => r.id));
  return rows.map((r) => messageView(r, metas.get(r.id) ?? []));
}

export const MESSAGE_STATUSES = ['queued', 'sending', 'sent', 'delivered', 'failed', 'bounced', 'complained', 'received'] as const;

// The reads behind GET /messages/{id} and the message list: prepared once (src/db/prepared.ts).
const messageById = (db: Db) => db.select().from(messages).where(eq(messages.id, sql.placeholder('id'))).prepare();
const pageOf = (db: Db, withStatus: boolean) =>
  db
    .select()
    .from(messages)
    .where(withStatus ? and(eq(messages.inboxId, sql.placeholder('inboxId')), eq(messages.status, sql.placeholder('status'))) : eq(messages.inboxId, sql.placeholder('inboxId')))
    .orderBy(desc(messages.createdAt), desc(messages.id))
    .limit(sql.placeholder('limit'))
    .offset(sql.placeholder('offset'))
    .prepare();
const pageOfInbox = (db: Db) => pageOf(db, false);
const pageOfInboxStatus = (db: Db) => pageOf(db, true);
// Kept by triggers (schema.ts inboxMessageCounts): constant time however large the inbox.
const totalOf = (db: Db, withStatus: boolean) =>
  db
    .select({ n: sql<number>`coalesce(sum(${inboxMessageCounts.n}), 0)` })
    .from(inboxMessageCounts)
    .where(withStatus ? and(eq(inboxMessageCounts.inboxId, sql.placeholder('inboxId')), eq(inboxMessageCounts.status, sql.placeholder('status'))) : eq(inboxMessageCounts.inboxId, sql.placeholder('inboxId')))
    .prepare();
const totalOfInbox = (db: Db) => totalOf(db, false);
const totalOfInboxStatus = (db: Db) => totalOf(db, true);

export function findMessageRow(ctx: AppContext, accountId: string, id: string): MessageRow {
  const row = preparedQuery(ctx.db, messageById).get({ id });
  // Another account's message is reported exactly like a missing one.
  if (!row || row.accountId !== accountId) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} not found`);
  return row;
}

/** Messages of an inbox, newest first, optionally of one status. */
export function listMessages(ctx: AppContext, accountId: string, inboxId: string, opts: Page & { status?: string | null }): PageResult<Message> {
  findInboxRow(ctx, accountId, inboxId);
  if (opts.status && !(MESSAGE_STATUSES as readonly string[]).includes(opts.status)) {
    throw new AppError('VALIDATION_ERROR', `query parameter \`status\` must be one of ${MESSAGE_STATUSES.join(', ')}`);
  }
  const params = { inboxId, status: opts.status ?? '', limit: opts.limit, offset: opts.offset };
  const rows = preparedQuery(ctx.db, opts.status ? pageOfInboxStatus : pageOfInbox).all(params);
  const total = preparedQuery(ctx.db, opts.status ? totalOfInboxStatus : totalOfInbox).get(params)!.n;
  return { data: messageViews(ctx, rows), total, limit: opts.limit, offset: opts.offset };
}

export function getMessage(ctx: AppContext, accountId: string, id: string): Message {
  return messageViews(ctx, [findMessageRow(ctx, accountId, id)])[0];
}

/** The RFC 5322 source as stored (inbound: as received; outbound: as built for sending). */
export async function rawMessage(ctx: AppContext, accountId: string, id: string): Promise<Buffer> {
  const row = findMessageRow(ctx, accountId, id);
  if (!row.rawPath) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} has no stored source yet`);
  try {
    return await ctx.blobs.read(row.rawPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new AppError('MESSAGE_NOT_FOUND', `the source of message ${id} is no longer stored`);
    throw err;
  }
}

/**
 * Deletes a message, its own attachments (inbound ones) and its thread when it was the thread's
 * only message. Rows go in one transaction, then files, so a crash leaves at worst an orphan
 * file, never a row pointing at nothing. Uploaded attachments it was sent with stay.
 */
export async function deleteMessage(ctx: AppContext, accountId: string, id: string): Promise<void> {
  const files = ctx.db.transaction((tx) => {
    const row = tx.select().from(messages).where(eq(messages.id, id)).get();
    if (!row || row.accountId !== accountId) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} not found`);
    const own = tx.select({ p: attachments.storagePath }).from(attachments).where(eq(attachments.messageId, id)).all();
    tx.delete(messages).where(eq(messages.id, id)).run();
    afterMessageRemoved(tx, row.threadId);
    return [row.rawPath, ...own.map((a) => a.p)];
  });
  await ctx.blobs.remove(files);
}

export interface ThreadWithMessages extends Thread {
  messages: Message[];
}

/** A thread with its messages, oldest first. */
export function getThread(ctx: AppContext, accountId: string, id: string): ThreadWithMessages {
  const thread = findThreadRow(ctx, accountId, id);
  const rows = ctx.db.select().from(messages).where(eq(messages.threadId, id)).orderBy(asc(messages.createdAt), asc(messages.id)).all();
  return { ...threadView(thread), messages: messageViews(ctx, rows) };
}
