// Messages: the API shape of a stored message (inbound or outbound). Listing, reading and
// deleting messages live here too; receiving is in inbound.ts, sending in sending.ts.
import { asc, eq, getTableColumns, sql } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { forgetIdempotentResponses } from '../accounts/idempotency.ts';
import { preparedQuery, preparedRows } from '../../db/prepared.ts';
import { attachments, messages } from '../../db/schema.ts';
import { attachmentMetaForMany, presignAttachment, type AttachmentMeta } from './attachments.ts';
import { AppError } from '../errors.ts';
import { FEED_SETTINGS, watchEvents } from '../events/event-feed.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import type { Page, PageResult } from '../pagination.ts';
import { hasFilters, matchMessages, rawRows, type MessageFilters } from './filters.ts';
import { applyMarks, checkMarks, labelsOfMessages, type Marks } from './labels.ts';
import { afterMessageRemoved, findThreadRow, threadViews, type Thread } from './threads.ts';
import { releaseBlobs } from '../../storage/blob-refs.ts';
import { replyHtml, replyText } from './reply-text.ts';

export type MessageRow = typeof messages.$inferSelect;
// Every stored message, received or sent, is one insert: prepared once (src/db/prepared.ts).
const MESSAGE_COLUMNS = Object.keys(getTableColumns(messages)) as Array<keyof MessageRow>;
const insertMessage = (db: Db) =>
  db
    .insert(messages)
    .values(Object.fromEntries(MESSAGE_COLUMNS.map((k) => [k, sql.placeholder(k)])) as unknown as MessageRow)
    .prepare();

/** Inserts a message row inside the caller's transaction (the statement runs on `db`'s connection). */
export async function insertMessageRow(db: Db, row: MessageRow): Promise<void> {
  await preparedQuery(db, insertMessage).run(row as unknown as Record<string, unknown>);
}

/** The columns a Message is made of (what list pages read). */
export type MessageViewRow = Omit<MessageRow, 'accountId' | 'references' | 'rawPath' | 'contentHash'>;


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
  /** Outbound: when a message sent with `sendAt` leaves (status `scheduled` until then); else null. */
  sendAt?: string | null;
  authentication?: unknown;
  /**
   * The new content of a reply, without the quoted history and signature (src/domain/mail/reply-text.ts);
   * for a message that is not a reply (no In-Reply-To), the body itself. In API answers only,
   * computed on read; event and webhook payloads carry the bodies alone.
   */
  extractedText?: string | null;
  extractedHtml?: string | null;
  /** Inbound messages arrive unread; outbound ones are read (PATCH /messages/{id} changes it). */
  unread: boolean;
  labels: string[];
  size: number;
  createdAt: string;
  updatedAt: string;
}

export function messageView(row: MessageViewRow, attachments: AttachmentMeta[], labels: string[] = []): Message {
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
    unread: row.unread,
    labels,
    size: row.size,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
  if (row.direction === 'outbound') {
    m.bccAddresses = JSON.parse(row.bccAddresses);
    m.delivery = row.delivery ?? 'email';
    m.recipients = JSON.parse(row.recipients);
    m.sendAt = row.sendAt ?? null;
  } else {
    m.authentication = row.authentication ? JSON.parse(row.authentication) : null;
  }
  return m;
}

/** Views of many rows with their attachments and labels, in three queries rather than three per message. */
export async function messageViews(ctx: AppContext, rows: MessageViewRow[]): Promise<Message[]> {
  const ids = rows.map((r) => r.id);
  const metas = await attachmentMetaForMany(ctx, ids);
  const labels = await labelsOfMessages(ctx, ids);
  // An agent reads an attachment straight from the message, without asking for a URL first.
  const withUrls = (list: AttachmentMeta[]) => list.map((a) => ({ ...a, url: presignAttachment(ctx, a.id).url }));
  return rows.map((r) => withExtracted(messageView(r, withUrls(metas.get(r.id) ?? []), labels.get(r.id) ?? [])));
}

/**
 * Extractions already made, by message id (a stored body never changes): a list or a thread
 * shown again costs nothing, and an outside sender's bodies (crafted to be slow, up to 40 ms
 * each at reply-text's size cap) cost their time once. Bounded by the characters it holds,
 * least recently used first out.
 */
const extracted = new Map<string, { text: string | null; html: string | null; size: number }>();
let extractedChars = 0;
const EXTRACTED_CHARS_MAX = 16 * 1024 * 1024;

/** Adds extractedText and extractedHtml: the reply's new content, or the body of a message that is no reply. */
function withExtracted(m: Message): Message {
  if (m.inReplyTo === null) {
    m.extractedText = m.bodyText;
    m.extractedHtml = m.bodyHtml;
    return m;
  }
  let hit = extracted.get(m.id);
  if (hit) {
    extracted.delete(m.id);
  } else {
    const text = m.bodyText === null ? null : replyText(m.bodyText);
    const html = m.bodyHtml === null ? null : replyHtml(m.bodyHtml);
    hit = { text, html, size: (text?.length ?? 0) + (html?.length ?? 0) };
    extractedChars += hit.size;
    for (const [id, old] of extracted) {
      if (extractedChars <= EXTRACTED_CHARS_MAX) break;
      extracted.delete(id);
      extractedChars -= old.size;
    }
  }
  extracted.set(m.id, hit);
  m.extractedText = hit.text;
  m.extractedHtml = hit.html;
  return m;
}

export const MESSAGE_STATUSES = ['scheduled', 'queued', 'sending', 'sent', 'delivered', 'failed', 'bounced', 'complained', 'received', 'canceled'] as const;

// The reads behind GET /messages/{id} and the message list: prepared once (src/db/prepared.ts).
const messageById = (db: Db) => db.select().from(messages).where(eq(messages.id, sql.placeholder('id'))).prepare();

// A list page is 20-100 rows of 21 columns: read with plain statements in raw mode (rows as
// arrays, src/db/prepared.ts), each turned into a MessageViewRow once. drizzle mapped every
// value through its column decoders into one object and messageView copied it into another.
type ViewTuple = [
  id: string,
  inboxId: string,
  threadId: string,
  direction: string,
  fromAddress: string,
  fromName: string | null,
  toAddresses: string,
  ccAddresses: string,
  bccAddresses: string,
  subject: string,
  bodyText: string | null,
  bodyHtml: string | null,
  delivery: string | null,
  status: string,
  messageIdHeader: string,
  inReplyTo: string | null,
  recipients: string,
  authentication: string | null,
  size: number,
  createdAt: string,
  updatedAt: string,
  unread: number,
  sendAt: string | null,
];
const VIEW_COLUMNS = `id, inbox_id, thread_id, direction, from_address, from_name, to_addresses, cc_addresses, bcc_addresses, subject,
  body_text, body_html, delivery, status, message_id_header, in_reply_to, recipients, authentication, size, created_at, updated_at, unread, send_at`;
// In VIEW_COLUMNS order.
const viewRow = (r: ViewTuple): MessageViewRow => ({
  id: r[0],
  inboxId: r[1],
  threadId: r[2],
  direction: r[3],
  fromAddress: r[4],
  fromName: r[5],
  toAddresses: r[6],
  ccAddresses: r[7],
  bccAddresses: r[8],
  subject: r[9],
  bodyText: r[10],
  bodyHtml: r[11],
  delivery: r[12],
  status: r[13],
  messageIdHeader: r[14],
  inReplyTo: r[15],
  recipients: r[16],
  authentication: r[17],
  size: r[18],
  createdAt: r[19],
  updatedAt: r[20],
  unread: r[21] === 1,
  sendAt: r[22],
});
const pageOfInbox = (db: Db) =>
  preparedRows<[string, number, number], ViewTuple>(db, `SELECT ${VIEW_COLUMNS} FROM messages WHERE inbox_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`);
const pageOfInboxStatus = (db: Db) =>
  preparedRows<[string, string, number, number], ViewTuple>(
    db,
    `SELECT ${VIEW_COLUMNS} FROM messages WHERE inbox_id = ? AND status = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
  );
// Kept by triggers (schema.ts inboxMessageCounts): constant time however large the inbox.
const totalOfInbox = (db: Db) => preparedRows<[string], [number]>(db, 'SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id = ?');
const totalOfInboxStatus = (db: Db) =>
  preparedRows<[string, string], [number]>(db, 'SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id = ? AND status = ?');

export async function findMessageRow(ctx: AppContext, accountId: string, id: string, db: Db = ctx.db): Promise<MessageRow> {
  const row = await preparedQuery(db, messageById).get({ id });
  // Another account's message is reported exactly like a missing one.
  if (!row || row.accountId !== accountId) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} not found`);
  return row;
}

// `after`: the messages stored after a given one. Message ids are made before an inbound message's
// files are written, so two arriving at once may commit in the other order than their ids. The
// order they were stored in: SQLite's rowid (assigned at insert, one writer at a time; only
// reused after the newest row is deleted, and the `after` message still exists, looked up each
// time); on PostgreSQL (tx, seq) of rows whose transaction is older than any still running
// (migrations/pg 0006). When the `after` message is gone (deleted), its id is compared instead:
// ids are time-ordered.
const AFTER = {
  sqlite: {
    position: 'SELECT rowid, NULL FROM messages WHERE id = ? AND inbox_id = ?',
    where: 'inbox_id = ? AND (? IS NULL OR rowid > ?) AND (? IS NULL OR id > ?) AND (? IS NULL OR status = ?)',
    cursor: (p: [unknown, unknown] | undefined) => (p ? [p[0], p[0]] : [null, null]),
  },
  postgres: {
    position: 'SELECT tx::text, seq FROM messages WHERE id = ? AND inbox_id = ?',
    where:
      'inbox_id = ? AND (?::text IS NULL OR (tx, seq) > (?::xid8, ?::bigint)) AND (?::text IS NULL OR id > ?) AND (?::text IS NULL OR status = ?) AND tx < pg_snapshot_xmin(pg_current_snapshot())',
    cursor: (p: [unknown, unknown] | undefined) => (p ? [p[0], p[0], p[1]] : [null, null, null]),
  },
};

async function messagesAfter(ctx: AppContext, inboxId: string, after: string, status: string | null, limit: number, offset: number): Promise<PageResult<Message>> {
  const sql = AFTER[ctx.store.dialect];
  const [position] = await rawRows<[unknown, unknown]>(ctx.db, sql.position, [after, inboxId]);
  const params = [inboxId, ...sql.cursor(position), position ? null : after, position ? null : after, status, status];
  const rows = await rawRows<ViewTuple>(ctx.db, `SELECT ${VIEW_COLUMNS} FROM messages WHERE ${sql.where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`, [...params, limit, offset]);
  const [[total]] = await rawRows<[number]>(ctx.db, `SELECT count(*) FROM messages WHERE ${sql.where}`, params);
  return { data: await messageViews(ctx, rows.map(viewRow)), total, limit, offset };
}

const MESSAGE_ID = /^msg_[0-9a-z]{26}$/;

// Account-wide totals from the same counters: the account's inboxes' rows.
const totalOfAccount = (db: Db) =>
  preparedRows<[string], [number]>(db, 'SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id IN (SELECT id FROM inboxes WHERE account_id = ?)');
const totalOfAccountStatus = (db: Db) =>
  preparedRows<[string, string], [number]>(
    db,
    'SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id IN (SELECT id FROM inboxes WHERE account_id = ?) AND status = ?',
  );
const M_VIEW_COLUMNS = VIEW_COLUMNS.split(',').map((c) => `m.${c.trim()}`).join(', ');

/**
 * Messages of an inbox (or, `inboxId` null, of the whole account), newest first, passing `filters`
 * (src/domain/mail/filters.ts). Without filters, or with only `status`, totals come from the
 * counters kept by triggers; otherwise they are counted over the same index range as the page.
 */
export interface MessageListOptions extends Page, MessageFilters {
  /**
   * Only messages stored after this one (a message id of the inbox), still newest first: the
   * long-poll's cursor. Per inbox, with `status` only.
   */
  after?: string | null;
}

export async function listMessages(ctx: AppContext, accountId: string, inboxId: string | null, opts: MessageListOptions): Promise<PageResult<Message>> {
  const { limit, offset, after, ...filters } = opts;
  if (inboxId !== null) await findInboxRow(ctx, accountId, inboxId);
  const { status, ...rest } = filters;
  if (after) {
    if (inboxId === null || hasFilters(rest)) throw new AppError('VALIDATION_ERROR', 'query parameter `after` lists one inbox and combines with `status` only');
    if (!MESSAGE_ID.test(after)) throw new AppError('VALIDATION_ERROR', 'query parameter `after` must be a message id (msg_…)');
    return messagesAfter(ctx, inboxId, after, status || null, limit, offset);
  }
  if (inboxId !== null && !hasFilters(rest)) {
    const rows = await (status ? preparedQuery(ctx.db, pageOfInboxStatus).all(inboxId, status, limit, offset) : preparedQuery(ctx.db, pageOfInbox).all(inboxId, limit, offset));
    const [total] = (await (status ? preparedQuery(ctx.db, totalOfInboxStatus).get(inboxId, status) : preparedQuery(ctx.db, totalOfInbox).get(inboxId)))!;
    return { data: await messageViews(ctx, rows.map(viewRow)), total, limit, offset };
  }
  const m = matchMessages(inboxId !== null ? { inboxId } : { accountId }, filters, ctx.store.dialect);
  const rows = await rawRows<ViewTuple>(ctx.db, `SELECT ${M_VIEW_COLUMNS} FROM ${m.from} WHERE ${m.where} ORDER BY ${m.order} LIMIT ? OFFSET ?`, [...m.params, limit, offset]);
  let total: number;
  if (inboxId === null && !hasFilters(rest)) {
    [total] = (await (status ? preparedQuery(ctx.db, totalOfAccountStatus).get(accountId, status) : preparedQuery(ctx.db, totalOfAccount).get(accountId)))!;
  } else {
    [[total]] = await rawRows<[number]>(ctx.db, `SELECT count(*) FROM ${m.from} WHERE ${m.where}`, m.params);
  }
  return { data: await messageViews(ctx, rows.map(viewRow)), total, limit, offset };
}

/** PATCH /messages/{id}: read state and labels; the message as it is afterwards. */
export async function updateMessage(ctx: AppContext, accountId: string, id: string, marks: Marks): Promise<Message> {
  checkMarks(marks);
  await ctx.store.transaction(async (tx) => {
    await findMessageRow(ctx, accountId, id, tx);
    await applyMarks(tx, 'message', id, marks);
  });
  return getMessage(ctx, accountId, id);
}

/** PATCH /threads/{id}: read state and labels of every message of the thread; the thread afterwards. */
export async function updateThread(ctx: AppContext, accountId: string, id: string, marks: Marks): Promise<Thread> {
  checkMarks(marks);
  const row = await ctx.store.transaction(async (tx) => {
    const thread = await findThreadRow(ctx, accountId, id, tx);
    await applyMarks(tx, 'thread', id, marks);
    return thread;
  });
  return (await threadViews(ctx, [row]))[0];
}

export async function getMessage(ctx: AppContext, accountId: string, id: string): Promise<Message> {
  return (await messageViews(ctx, [await findMessageRow(ctx, accountId, id)]))[0];
}

/** The RFC 5322 source as stored (inbound: as received; outbound: as built for sending). */
export async function rawMessage(ctx: AppContext, accountId: string, id: string): Promise<Buffer> {
  const row = await findMessageRow(ctx, accountId, id);
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
  const files = await ctx.store.transaction(async (tx) => {
    const row = await tx.select().from(messages).where(eq(messages.id, id)).get();
    if (!row || row.accountId !== accountId) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} not found`);
    const own = await tx.select({ p: attachments.storagePath }).from(attachments).where(eq(attachments.messageId, id));
    await tx.delete(messages).where(eq(messages.id, id)).run();
    await forgetIdempotentResponses(tx, [id]);
    await afterMessageRemoved(tx, row.threadId);
    return [row.rawPath, ...own.map((a) => a.p)];
  });
  await releaseBlobs(ctx, files);
}

export interface ThreadWithMessages extends Thread {
  messages: Message[];
}

/** A thread with its messages, oldest first. */
export async function getThread(ctx: AppContext, accountId: string, id: string): Promise<ThreadWithMessages> {
  const thread = await findThreadRow(ctx, accountId, id);
  const rows = await ctx.db.select().from(messages).where(eq(messages.threadId, id)).orderBy(asc(messages.createdAt), asc(messages.id));
  return { ...(await threadViews(ctx, [thread]))[0], messages: await messageViews(ctx, rows) };
}

export const MAX_WAIT_SECONDS = 60;

/**
 * The long-poll of GET /inboxes/{id}/messages?wait=: the list as listMessages gives it, as soon
 * as it is not empty, else after `waitSeconds` (empty). Woken by the event feed (an inbound
 * message records message.received in its own transaction) and checked every FEED_SETTINGS.pollMs
 * anyway (a message sent from the inbox records no event until its outcome). `gone` resolves
 * when the client left: the wait ends early; at shutdown the feed ends it too.
 */
export async function waitForMessages(ctx: AppContext, accountId: string, inboxId: string, opts: MessageListOptions, waitSeconds: number, gone?: Promise<unknown>): Promise<PageResult<Message>> {
  let result = await listMessages(ctx, accountId, inboxId, opts);
  if (result.data.length || waitSeconds <= 0) return result;
  const deadline = Date.now() + waitSeconds * 1000;
  let wake!: () => void;
  let over = false;
  const stop = watchEvents(ctx, { wake: () => wake(), close: () => ((over = true), wake()) });
  const tick = setInterval(() => wake(), FEED_SETTINGS.pollMs);
  void gone?.then(() => ((over = true), wake()));
  try {
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0 || over) return result;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      result = await listMessages(ctx, accountId, inboxId, opts);
      if (result.data.length) return result;
    }
  } finally {
    stop();
    clearInterval(tick);
  }
}
