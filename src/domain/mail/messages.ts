// Messages: the API shape of a stored message (inbound or outbound). Listing, reading and
// deleting messages live here too; receiving is in inbound.ts, sending in sending.ts.
import type { AppContext } from '../../context.ts';
import type { Db } from '../../store/client.ts';
import { forgetIdempotentResponses } from '../accounts/idempotency.ts';
import { listStoragePathsOfMessage } from '../../store/repo/attachments.ts';
import {
  deleteMessageById,
  findMessageById,
  insertMessage,
  listMessagePage,
  listMessagePageAfter,
  listOwnInboxPage,
  listMessagesOfThread,
  type MessageRow,
  type MessageViewRow,
  type RowPage,
} from '../../store/repo/messages.ts';
import { attachmentMetaForMany, presignAttachment, type AttachmentMeta } from './attachments.ts';
import { AppError } from '../errors.ts';
import { FEED_SETTINGS, watchEvents } from '../events/event-feed.ts';
import { openStreamSlot, type StreamOwner, type StreamSlot } from '../events/stream-slots.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import type { Page, PageResult } from '../pagination.ts';
import { hasFilters, listScope, matchFilters, type InboxSelection, type MessageFilters } from './filters.ts';
import { checkMarks, labelsOfMessages, markMessage, markThread, type Marks } from './labels.ts';
import { afterMessageRemoved, findThreadRow, threadViews, type Thread } from './threads.ts';
import { releaseBlobs } from '../../store/blobs/blob-refs.ts';
import { replyHtml, replyText } from './reply-text.ts';
import { runSearch } from './search.ts';
import { cutBodies } from './body-cut.ts';
import { hasHiddenText, visibleBodies } from '../screening/visible.ts';
import type { Screening } from '../screening/screen.ts';
import type { Hold } from '../sending/holds.ts';

export type { MessageRow, MessageViewRow };

/**
 * Inserts a message row inside the caller's transaction (the statement runs on `db`'s
 * connection); with `vector`, its search column as searchVector() made it (PostgreSQL).
 */
export function insertMessageRow(db: Db, row: MessageRow, vector?: string | null): Promise<void> {
  return insertMessage(db, row, vector);
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
  /** Outbound: when a message sent with `sendAt` leaves (status `scheduled` until then); else null. */
  sendAt?: string | null;
  /** Outbound: the reasons a send was held for a person (status `held`); else null. */
  hold?: Hold | null;
  authentication?: unknown;
  /** Inbound: the screener's verdict, score and reasons (src/domain/screening/); null when not screened. */
  screening?: Screening | null;
  /**
   * The new content of a reply, without the quoted history and signature (src/domain/mail/reply-text.ts);
   * for a message that is not a reply (no In-Reply-To), the body itself. In API answers only,
   * computed on read; event and webhook payloads carry the bodies alone.
   */
  extractedText?: string | null;
  extractedHtml?: string | null;
  /**
   * In list answers (PRODUCT.md "Bounded cost"), true when a body (or its extraction) was longer
   * than `[limits] list_body_bytes` and is cut to it there; GET /messages/{id} has it whole (false).
   */
  bodyTruncated?: boolean;
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
    // Why the policy held it (src/domain/sending/holds.ts); kept after a release or cancel.
    m.hold = row.hold ? (JSON.parse(row.hold) as Hold) : null;
  } else {
    m.authentication = row.authentication ? JSON.parse(row.authentication) : null;
    m.screening = row.screening ? (JSON.parse(row.screening) as Screening) : null;
  }
  return m;
}

/**
 * Views of many rows with their attachments and labels, in three queries rather than three per
 * message. `bodies` 'cut' (a list: its rows were read cut, src/store/repo/messages.ts): each body
 * is cut to `[limits] list_body_bytes` before the reply text is extracted from it, so extraction
 * too works on bounded input; 'whole' (one message) keeps them whole.
 */
export async function messageViews(ctx: AppContext, rows: MessageViewRow[], bodies: 'cut' | 'whole'): Promise<Message[]> {
  // Rows read with a page of an inbox say whether they have labels and attachments: those that
  // have none are left out of these reads, and a page without any needs neither.
  const metas = await attachmentMetaForMany(
    ctx,
    rows.filter((r) => r.hasAttachments !== false).map((r) => r.id),
  );
  const labels = await labelsOfMessages(
    ctx,
    rows.filter((r) => r.hasLabels !== false).map((r) => r.id),
  );
  // An agent reads an attachment straight from the message, without asking for a URL first.
  const withUrls = (list: AttachmentMeta[]) => list.map((a) => ({ ...a, url: presignAttachment(ctx, a.id).url }));
  return rows.map((r) => {
    const m = messageView(r, withUrls(metas.get(r.id) ?? []), labels.get(r.id) ?? []);
    if (bodies === 'cut') cutBodies(m, ctx.config.limits.list_body_bytes);
    else m.bodyTruncated = false;
    return withExtracted(m);
  });
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
  const hidden = hasHiddenText(m.screening);
  if (m.inReplyTo === null && !hidden) {
    m.extractedText = m.bodyText;
    m.extractedHtml = m.bodyHtml;
    return m;
  }
  // The extraction of a cut body is not that of the whole one.
  const key = m.bodyTruncated ? `${m.id} cut` : m.id;
  let hit = extracted.get(key);
  if (hit) {
    extracted.delete(key);
  } else {
    // What the screener found hidden is left out: the agent reads what a person sees.
    const shown = hidden ? visibleBodies(m.bodyText, m.bodyHtml) : { text: m.bodyText, html: m.bodyHtml };
    const text = shown.text === null ? null : m.inReplyTo === null ? shown.text : replyText(shown.text);
    const html = shown.html === null ? null : m.inReplyTo === null ? shown.html : replyHtml(shown.html);
    hit = { text, html, size: (text?.length ?? 0) + (html?.length ?? 0) };
    extractedChars += hit.size;
    for (const [id, old] of extracted) {
      if (extractedChars <= EXTRACTED_CHARS_MAX) break;
      extracted.delete(id);
      extractedChars -= old.size;
    }
  }
  extracted.set(key, hit);
  m.extractedText = hit.text;
  m.extractedHtml = hit.html;
  return m;
}

export const MESSAGE_STATUSES = ['scheduled', 'queued', 'sending', 'sent', 'delivered', 'failed', 'bounced', 'complained', 'received', 'canceled', 'held'] as const;

export async function findMessageRow(ctx: AppContext, accountId: string, id: string, db: Db = ctx.db): Promise<MessageRow> {
  const row = await findMessageById(db, id);
  // Another account's message is reported exactly like a missing one.
  if (!row || row.accountId !== accountId) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} not found`);
  return row;
}

const MESSAGE_ID = /^msg_[0-9a-z]{26}$/;

/**
 * Messages of an inbox (or, `inboxId` null, of the whole account), newest first, passing `filters`
 * (src/domain/mail/filters.ts).
 */
export interface MessageListOptions extends Page, MessageFilters {
  /**
   * Only messages stored after this one (a message id of the inbox), still newest first: the
   * long-poll's cursor. Per inbox, with `status` only.
   */
  after?: string | null;
}

export async function listMessages(ctx: AppContext, accountId: string, inboxes: InboxSelection, opts: MessageListOptions): Promise<PageResult<Message>> {
  const { limit, offset, after, ...filters } = opts;
  const { status, ...rest } = filters;
  const inboxId = typeof inboxes === 'string' ? inboxes : null;
  if (inboxId !== null && !after && !hasFilters(rest)) {
    // The plain page: the inbox is found with the total (two statements, not three).
    const page = await listOwnInboxPage(ctx.db, accountId, inboxId, status || null, limit, offset, ctx.config.limits.list_body_bytes);
    // Another account's inbox is reported exactly like a missing one (findInboxRow).
    if (!page) throw new AppError('INBOX_NOT_FOUND', `inbox ${inboxId} not found`);
    return pageOf(ctx, page, limit, offset);
  }
  if (inboxId !== null) await findInboxRow(ctx, accountId, inboxId);
  if (after) {
    if (inboxId === null || hasFilters(rest)) throw new AppError('VALIDATION_ERROR', 'query parameter `after` lists one inbox and combines with `status` only');
    if (!MESSAGE_ID.test(after)) throw new AppError('VALIDATION_ERROR', 'query parameter `after` must be a message id (msg_…)');
    return pageOf(ctx, await listMessagePageAfter(ctx.db, inboxId, after, status || null, limit, offset, ctx.config.limits.list_body_bytes), limit, offset);
  }
  const { search_matches, list_body_bytes, search_terms } = ctx.config.limits;
  const scope = listScope(accountId, inboxes);
  const f = matchFilters(filters, search_terms);
  const list = (db: Db) => listMessagePage(db, scope, f, limit, offset, search_matches, list_body_bytes);
  // A search runs within the search budgets (src/domain/mail/search.ts); other filters use the indexes' order.
  return pageOf(ctx, await (f.search ? runSearch(ctx, accountId, list) : list(ctx.db)), limit, offset);
}

/** The API page of a page of rows. */
async function pageOf(ctx: AppContext, page: RowPage<MessageViewRow>, limit: number, offset: number): Promise<PageResult<Message>> {
  const result = { data: await messageViews(ctx, page.rows, 'cut'), total: page.total, limit, offset };
  return page.totalIsLowerBound === undefined ? result : { ...result, totalIsLowerBound: page.totalIsLowerBound };
}

/** PATCH /messages/{id}: read state and labels; the message as it is afterwards. */
export async function updateMessage(ctx: AppContext, accountId: string, id: string, marks: Marks): Promise<Message> {
  checkMarks(marks);
  await ctx.store.transaction(async (tx) => {
    await findMessageRow(ctx, accountId, id, tx);
    await markMessage(tx, id, marks, ctx.config.limits.labels_per_message);
  });
  return getMessage(ctx, accountId, id);
}

/** PATCH /threads/{id}: read state and labels of every message of the thread; the thread afterwards. */
export async function updateThread(ctx: AppContext, accountId: string, id: string, marks: Marks): Promise<Thread> {
  checkMarks(marks);
  const row = await findThreadRow(ctx, accountId, id);
  await markThread(ctx, id, marks);
  return (await threadViews(ctx, [row]))[0];
}

/**
 * GET /messages/{id}. With `reader` (a key), held inbound mail is missing unless the key has the
 * `review` scope: it was held from the agent (src/domain/screening/hold.ts). A held send stays
 * readable by id: the agent that made it follows it there until a person releases or cancels it.
 */
export async function getMessage(ctx: AppContext, accountId: string, id: string, reader?: { scopes: ReadonlySet<string> }): Promise<Message> {
  const row = await findMessageRow(ctx, accountId, id);
  if (reader && row.status === 'held' && row.direction === 'inbound' && !reader.scopes.has('review')) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} not found`);
  return (await messageViews(ctx, [row], 'whole'))[0];
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
    const row = await findMessageRow(ctx, accountId, id, tx);
    const own = await listStoragePathsOfMessage(tx, id);
    await deleteMessageById(tx, id);
    await forgetIdempotentResponses(tx, [id]);
    await afterMessageRemoved(tx, row.threadId);
    return [row.rawPath, ...own];
  });
  await releaseBlobs(ctx, files);
  // As deleteInbox: the write-ahead log still holds the message's page images until checkpointed.
  await ctx.store.checkpoint();
}

/** GET /threads/{id}: a page of its messages, as big as `limit` may be at most (PRODUCT.md). */
export const THREAD_PAGE = { defaultLimit: 100, maxLimit: 100 } as const;

export interface ThreadWithMessages extends Thread, Page {
  /** Messages `offset` to `offset + limit` of the thread, oldest first; `messageCount` counts all. */
  messages: Message[];
}

/** A thread with one page of its messages, oldest first (bodies cut as in any list). */
export async function getThread(ctx: AppContext, accountId: string, id: string, page: Page): Promise<ThreadWithMessages> {
  const thread = await findThreadRow(ctx, accountId, id);
  const rows = await listMessagesOfThread(ctx.db, id, page.limit, page.offset, ctx.config.limits.list_body_bytes);
  return { ...(await threadViews(ctx, [thread]))[0], messages: await messageViews(ctx, rows, 'cut'), limit: page.limit, offset: page.offset };
}

export const MAX_WAIT_SECONDS = 60;

/**
 * The long-poll of GET /inboxes/{id}/messages?wait=: the list as listMessages gives it, as soon
 * as it is not empty, else after `waitSeconds` (empty). While it waits it holds one of the
 * account's stream slots (`slot` when the caller holds one already, as wait_for_message does):
 * past `[limits] streams_per_account`, TOO_MANY_STREAMS; once the key is revoked, UNAUTHORIZED.
 *
 * The list (with `q`, a search) runs again only when something may have changed it: an event of
 * this inbox (an inbound message records message.received in its own transaction), or, checked
 * every FEED_SETTINGS.pollMs, a change of the inbox's newest message or count (two indexed reads:
 * a message sent from the inbox records no event until its outcome). `gone` resolves when the
 * client left: the wait ends early; at shutdown the feed ends it too.
 */
export async function waitForMessages(
  ctx: AppContext,
  who: StreamOwner,
  inboxId: string,
  opts: MessageListOptions,
  waitSeconds: number,
  gone?: Promise<unknown>,
  slot?: StreamSlot,
): Promise<PageResult<Message>> {
  const mark = async () => {
    const page = await listOwnInboxPage(ctx.db, who.accountId, inboxId, null, 1, 0, 0);
    return page ? `${page.total}/${page.rows[0]?.id ?? ''}` : 'gone';
  };
  let seen = await mark();
  let result = await listMessages(ctx, who.accountId, inboxId, opts);
  if (result.data.length || waitSeconds <= 0) return result;
  const own = slot ? undefined : openStreamSlot(ctx, who);
  const held = (slot ?? own)!;
  const deadline = Date.now() + waitSeconds * 1000;
  let over = false;
  let revoked = false;
  /** What woke the wait; an event wins over a tick (it re-lists without looking at the mark). */
  let woken: 'event' | 'tick' | undefined;
  let resolveWait: (() => void) | undefined;
  const wake = (why: 'event' | 'tick' | 'end') => {
    if (why === 'event' || (why === 'tick' && !woken)) woken = why;
    resolveWait?.();
  };
  const stop = watchEvents(ctx, { accountId: who.accountId, inboxId }, { wake: () => wake('event'), close: () => ((over = true), wake('end')) });
  const tick = setInterval(() => wake('tick'), FEED_SETTINGS.pollMs);
  void gone?.then(() => ((over = true), wake('end')));
  void held.revoked.then(() => ((revoked = true), wake('end')));
  try {
    for (;;) {
      if (revoked) throw new AppError('UNAUTHORIZED', 'the API key was revoked or expired while this request waited');
      const left = deadline - Date.now();
      if (left <= 0 || over) return result;
      if (!woken) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          resolveWait = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        resolveWait = undefined;
      }
      const why = woken;
      woken = undefined;
      if (!why || over || revoked) continue;
      const now = await mark();
      if (why === 'tick' && now === seen) continue;
      seen = now;
      result = await listMessages(ctx, who.accountId, inboxId, opts);
      if (result.data.length) return result;
    }
  } finally {
    stop();
    clearInterval(tick);
    own?.release();
  }
}
