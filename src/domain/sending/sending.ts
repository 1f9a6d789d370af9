// Sending: queueSend accepts a message from an inbox (validation, daily limit, thread, MIME
// built and DKIM-signed once, stored) and queues one delivery job per recipient domain, all in
// one transaction. recordOutcomes turns per-recipient results into the message's status, its
// counters and its events, inside the transaction that finishes the job (PRODUCT.md rules):
//
//   queued → sending → sent | delivered | bounced | failed   (complained comes from ARF reports)
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { newId } from '../../ids.ts';
import { enqueueJob } from '../../jobs/table.ts';
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { dkimSignature, signMessage, SignedParts } from '../../outbound/dkim.ts';
import { buildMime, mimeStream, textFromHtml, type ComposeInput, type MailAddress } from '../../outbound/mime.ts';
import { keepSource, STREAMED_SOURCE_BYTES } from '../../outbound/source-cache.ts';
import { Blobs, ROW_BLOB_MAX_BYTES } from '../../store/blobs/blobs.ts';
import { StagedWriter } from '../../store/blobs/staging.ts';
import { normalizeRecipient, splitAddress } from '../addresses.ts';
import { attachmentMeta, attachmentMetaFor, getAttachmentRows, type AttachmentRow } from '../mail/attachments.ts';
import { assertStorageRoom } from '../accounts/quotas.ts';
import { AppError } from '../errors.ts';
import { recordEvent, type EventType } from '../events/events.ts';
import { assertSendRoom, countSend, findInboxByAddress, findInboxRow, type InboxRow } from '../inboxes/inboxes.ts';
import { assertRecipientsAllowed } from '../inboxes/lists.ts';
import { parseSendAt, scheduleRelease } from './send-at.ts';
import { assertOneRecipient, listUnsubscribeHeaders } from './unsubscribe.ts';
import { contentReasons, holdJson, holdReasons, recordHold, type HoldCandidate } from './holds.ts';
import { findThreadIdOfParents } from '../../store/repo/messages.ts';
import { allSuppressed, suppressedAmong, suppressIn, SUPPRESSED_RESPONSE } from './suppressions.ts';
import { insertMessageRow, messageView, type Message, type MessageRow, type RecipientOutcome } from '../mail/messages.ts';
import { findThreadRow, messageIdsIn, threadForMessage } from '../mail/threads.ts';
import { releaseBlobs } from '../../store/blobs/blob-refs.ts';
import { findLastMessageOfThread, findMessageAccountId, linkAttachments, listStoredAttachmentIds, updateMessageState, updateMessageStateIf } from '../../store/repo/outbound.ts';
import { insertAttachments } from '../../store/repo/attachments.ts';
import { incrementInboxBounces, incrementInboxComplaints } from '../../store/repo/inboxes.ts';
import { findMessageById } from '../../store/repo/messages.ts';

export const SEND_JOB = 'send';

/** Most recipients (to + cc + bcc, after removing duplicates) of one message. */
export const MAX_RECIPIENTS = 100;

/** Recipient states after which nothing more is attempted for that recipient. */
export const FINAL_RECIPIENT_STATES = new Set(['sent', 'delivered', 'bounced', 'failed', 'suppressed']);

/** What a send job carries: which message, and which of its recipients this job delivers to. */
export interface SendJobPayload {
  messageId: string;
  /** Recipient domain ('' for the local job). */
  domain: string;
  /** Recipients that are inboxes of this appliance (or on the shared domain). */
  local: boolean;
  recipients: string[];
}

export interface SendInput {
  to: string[];
  cc?: string[];
  bcc?: string[];
  subject: string;
  bodyText?: string | null;
  bodyHtml?: string | null;
  threadId?: string;
  attachmentIds?: string[];
  /** ISO 8601, future, at most 30 days ahead: the message is `scheduled` until then. */
  sendAt?: string | null;
  /** Add List-Unsubscribe and List-Unsubscribe-Post (RFC 8058; src/domain/sending/unsubscribe.ts): one recipient only. */
  listUnsubscribe?: boolean;
}

/**
 * What a reply or a forward (src/domain/sending/replies.ts) adds to a send: the message it answers,
 * the threading headers it computed, and for a forward the original's attachments.
 */
export interface SendOrigin {
  /** The message replied to or forwarded: it must still exist when the send commits. */
  messageId: string;
  /** Reply: the original's thread. Forward: undefined (a new thread). */
  threadId?: string;
  inReplyTo: string | null;
  references: string[];
  /**
   * Forward: the original's attachments. Each becomes an attachment row of the new message
   * naming the same stored bytes (src/store/blobs/blob-refs.ts removes a file with its last row),
   * so deleting the original later leaves the forward's attachments readable.
   */
  carried: AttachmentRow[];
}

/** `addr@example.com` or `Name <addr@example.com>` → {name, address}. */
export function parseRecipient(field: string, raw: string): MailAddress {
  const m = /^\s*(?:"([^"]*)"|([^"<>]*?))\s*<([^<>]*)>\s*$/.exec(raw);
  if (m) {
    const name = (m[1] ?? m[2] ?? '').trim();
    return { name: name || null, address: normalizeRecipient(field, m[3]) };
  }
  return { name: null, address: normalizeRecipient(field, raw) };
}

const dedupe = (list: MailAddress[]) => [...new Map(list.map((a) => [a.address.toLowerCase(), a])).values()];

/** What a caller adds to the send's transaction (a draft send deletes the draft there). */
export interface SendOptions {
  /** Runs inside the transaction that stores the message; a throw refuses the send. */
  inTransaction?: (tx: Tx) => Promise<void>;
}

/**
 * Accepts a message for sending and returns it in `queued`, or in `scheduled` when it has a
 * `sendAt` (src/domain/sending/scheduled.ts). Everything that can be refused is checked before the
 * message is built; the message row, its counters (re-checked), its thread and its jobs are
 * committed together, and the stored source is removed if that fails. A scheduled message is
 * counted against the daily limit, and built and signed, when it is released at its time.
 */
export async function queueSend(ctx: AppContext, accountId: string, inboxId: string, input: SendInput, origin?: SendOrigin, opts: SendOptions = {}): Promise<Message> {
  const inbox = await findInboxRow(ctx, accountId, inboxId);
  if (inbox.status !== 'active') throw new AppError('INBOX_SUSPENDED', `inbox ${inbox.address} is suspended and cannot send`);
  const sendAt = input.sendAt ? parseSendAt(ctx, input.sendAt) : undefined;
  // Checked again (and counted) in the transaction; this spares building a message for nothing.
  if (!sendAt) assertSendRoom(ctx, inbox);
  if (!input.bodyText && !input.bodyHtml) {
    throw new AppError('VALIDATION_ERROR', '`bodyText`: give bodyText, bodyHtml or both');
  }

  const parse = (field: string, list: string[] | undefined) => (list ?? []).map((r, i) => parseRecipient(`${field}[${i}]`, r));
  const to = parse('to', input.to);
  const cc = parse('cc', input.cc);
  const bcc = parse('bcc', input.bcc);
  const everyone = dedupe([...to, ...cc, ...bcc]);
  if (everyone.length > MAX_RECIPIENTS) {
    throw new AppError('VALIDATION_ERROR', `\`to\`: at most ${MAX_RECIPIENTS} recipients (to, cc and bcc together) per message`);
  }
  if (input.listUnsubscribe) assertOneRecipient(everyone.map((a) => a.address));

  // A reply: In-Reply-To is the thread's last message, References its chain (RFC 5322 §3.6.4).
  let threadId: string | undefined;
  let inReplyTo: string | null = null;
  let references: string[] = [];
  if (origin) {
    threadId = origin.threadId;
    inReplyTo = origin.inReplyTo;
    references = origin.references;
  } else if (input.threadId !== undefined) {
    const thread = await findThreadRow(ctx, accountId, input.threadId);
    if (thread.inboxId !== inbox.id) throw new AppError('THREAD_NOT_FOUND', `thread ${input.threadId} not found in inbox ${inbox.id}`);
    threadId = thread.id;
    const last = await findLastMessageOfThread(ctx.db, thread.id);
    if (last) {
      inReplyTo = last.messageIdHeader;
      // RFC 5322 suggests trimming long chains; keep the first and the most recent ones.
      const chain = messageIdsIn(JSON.parse(last.references) as string[], last.messageIdHeader);
      references = chain.length > 20 ? [chain[0], ...chain.slice(-19)] : chain;
    }
  }

  const attRows = await getAttachmentRows(ctx, accountId, input.attachmentIds ?? []);
  const now = ctx.clock.now();
  const iso = now.toISOString();
  const id = newId('msg', now.getTime());
  const carried: AttachmentRow[] = (origin?.carried ?? []).map((a) => ({ ...a, id: newId('att', now.getTime()), messageId: id, createdAt: iso }));
  // The message is built in memory: its attachments together get the limit one upload has.
  const attBytes = [...attRows, ...carried].reduce((n, a) => n + a.size, 0);
  if (attBytes > ctx.config.limits.max_attachment_bytes) {
    throw new AppError('PAYLOAD_TOO_LARGE', `\`attachmentIds\`: attachments total ${attBytes} bytes; one message may carry at most ${ctx.config.limits.max_attachment_bytes}`);
  }

  const messageIdHeader = `<${id}@${splitAddress(inbox.address)!.domain}>`;
  const bodyText = input.bodyText || (input.bodyHtml ? await textFromHtml(input.bodyHtml) : null);
  const bodyHtml = input.bodyHtml || null;

  return queueOutbound(ctx, {
    inbox,
    id,
    now,
    fromName: inbox.displayName,
    to,
    cc,
    bcc,
    recipients: everyone.map((a) => a.address),
    subject: input.subject,
    bodyText,
    bodyHtml,
    messageIdHeader,
    inReplyTo,
    references,
    threadId,
    parents: [],
    own: carried,
    linked: attRows,
    origin,
    sendAt,
    inTransaction: opts.inTransaction,
    listUnsubscribe: input.listUnsubscribe,
  });
}

/**
 * An outbound message checked and ready to build and queue: what its source and its row carry.
 * Made by queueSend (the API) and by SMTP submission (src/domain/sending/submission.ts).
 */
export interface OutboundDraft {
  inbox: InboxRow;
  id: string;
  now: Date;
  /** The From display name. */
  fromName: string | null;
  to: MailAddress[];
  cc: MailAddress[];
  bcc: MailAddress[];
  /** Every address the message is delivered to (to, cc and bcc without duplicates). */
  recipients: string[];
  subject: string;
  bodyText: string | null;
  bodyHtml: string | null;
  messageIdHeader: string;
  inReplyTo: string | null;
  references: string[];
  /** The thread it joins, when known; else found from `parents` (Message-IDs), else a new one. */
  threadId?: string;
  parents: string[];
  /** Attachment rows of this message alone (messageId set), inserted with it. */
  own: AttachmentRow[];
  /** Uploaded attachments it carries (linked through message_attachments). */
  linked: AttachmentRow[];
  /**
   * The bytes of `own` rows stored by content (Blobs.contentKey): put back at commit if the
   * deletion of another message sharing them removed them meanwhile.
   */
  shared?: Map<string, Buffer | { staged: string }>;
  /** Content-IDs of `own` attachments the HTML shows inline (cid: URLs), by attachment id. */
  cids?: Map<string, string>;
  origin?: SendOrigin;
  /** A scheduled send: stored `scheduled` without a source, released at this time. */
  sendAt?: Date;
  /** Runs inside the transaction that stores the message (SendOptions.inTransaction). */
  inTransaction?: (tx: Tx) => Promise<void>;
  /** One-click unsubscribe headers (SendInput.listUnsubscribe). */
  listUnsubscribe?: boolean;
}

/**
 * The part of sending every way in shares: build the MIME source (mailroom's From, no Bcc
 * header), DKIM-sign and store it, then commit the message row, its counters (daily limit
 * re-checked), its thread, its attachments and one job per recipient domain together. The
 * stored source is removed if that fails. Recipients on the suppression list are marked
 * `suppressed` there and get no job; with none left the send is 422 RECIPIENTS_SUPPRESSED.
 */
export async function queueOutbound(ctx: AppContext, draft: OutboundDraft): Promise<Message> {
  const { inbox, id, now } = draft;
  // Send lists (src/domain/inboxes/lists.ts) hold for every way in: the API, drafts and SMTP submission.
  await assertRecipientsAllowed(ctx, inbox.accountId, inbox.id, draft.recipients);
  await assertStorageRoom(ctx, inbox.accountId);
  const iso = now.toISOString();
  const { sendAt } = draft;
  const mode = ctx.config.outbound.mode;
  const row: MessageRow = {
    id,
    accountId: inbox.accountId,
    inboxId: inbox.id,
    threadId: '',
    direction: 'outbound',
    fromAddress: inbox.address,
    fromName: inbox.displayName,
    toAddresses: JSON.stringify(draft.to.map((a) => a.address)),
    ccAddresses: JSON.stringify(draft.cc.map((a) => a.address)),
    bccAddresses: JSON.stringify(draft.bcc.map((a) => a.address)),
    subject: draft.subject,
    bodyText: draft.bodyText,
    bodyHtml: draft.bodyHtml,
    delivery: mode,
    status: sendAt ? 'scheduled' : 'queued',
    messageIdHeader: draft.messageIdHeader,
    inReplyTo: draft.inReplyTo,
    references: JSON.stringify(draft.references),
    recipients: JSON.stringify(draft.recipients.map((address): RecipientOutcome => ({ address, status: sendAt ? 'scheduled' : 'queued', response: null }))),
    authentication: null,
    // A scheduled message has no source until it is released (GET /messages/{id}/raw: 404).
    rawPath: null,
    contentHash: null,
    unread: false,
    size: 0,
    sendAt: sendAt?.toISOString() ?? null,
    hold: null,
    createdAt: iso,
    updatedAt: iso,
    screening: null,
  };
  // The holds that read the message (src/domain/sending/holds.ts); a scheduled send is checked again when it is due.
  const thread = draft.threadId ?? (draft.parents.length ? await findThreadIdOfParents(ctx.db, inbox.accountId, inbox.id, draft.parents) : undefined);
  const candidate: HoldCandidate = {
    inbox,
    recipients: draft.recipients,
    subject: draft.subject,
    bodyText: draft.bodyText,
    bodyHtml: draft.bodyHtml,
    files: [...draft.own, ...draft.linked],
    inReplyTo: draft.inReplyTo,
    threadId: thread,
  };
  const found = await contentReasons(ctx, candidate);
  const source = sendAt
    ? undefined
    : await renderSource(
        ctx,
        { address: inbox.address, displayName: draft.fromName },
        row,
        { to: draft.to, cc: draft.cc, listUnsubscribe: draft.listUnsubscribe },
        [...draft.own, ...draft.linked],
        now,
        draft.cids,
      );
  if (source) {
    row.rawPath = source.rawPath;
    row.size = source.size;
  }

  try {
    // Shared with the other sends committing at this moment (Store.grouped, src/store/sqlite.ts): one WAL
    // fsync, off the event loop, for all of them; the 202 still follows the fsync.
    await ctx.store.grouped(async (tx) => {
      // Re-read: counters and status may have changed while the message was being built.
      const fresh = await findInboxRow(ctx, inbox.accountId, inbox.id);
      if (fresh.status !== 'active') throw new AppError('INBOX_SUSPENDED', `inbox ${fresh.address} is suspended and cannot send`);
      if (draft.origin) await assertOriginStored(tx, inbox.accountId, draft.origin);
      await draft.inTransaction?.(tx);
      // The suppression list (src/domain/sending/suppressions.ts), read here so an entry added
      // while the message was built still counts: its recipients are not attempted.
      const suppressed = await suppressedAmong(tx, inbox.accountId, draft.recipients);
      const attempted = draft.recipients.filter((a) => !suppressed.has(a.toLowerCase()));
      if (!attempted.length) throw allSuppressed(draft.recipients);
      if (suppressed.size) {
        const list = JSON.parse(row.recipients) as RecipientOutcome[];
        row.recipients = JSON.stringify(list.map((r) => (suppressed.has(r.address.toLowerCase()) ? { ...r, status: 'suppressed', response: SUPPRESSED_RESPONSE } : r)));
      }
      // Holds for a person (src/domain/sending/holds.ts), on the recipients left: a held send is
      // stored `held`, not counted and not queued until a person releases it. A scheduled one is
      // judged now and again at its time (releaseIn), unless a person released it.
      const { reasons } = await holdReasons(tx, ctx, { ...candidate, inbox: fresh, recipients: attempted }, found);
      if (reasons.length) {
        row.status = 'held';
        row.hold = holdJson(reasons);
        row.recipients = JSON.stringify((JSON.parse(row.recipients) as RecipientOutcome[]).map((r) => (r.status !== 'suppressed' ? { ...r, status: 'held' } : r)));
      } else if (!sendAt) await countSend(tx, ctx, fresh);
      row.threadId = await threadForMessage(tx, { accountId: inbox.accountId, inboxId: inbox.id, parents: draft.parents, subject: draft.subject, at: iso, threadId: draft.threadId });
      await insertMessageRow(tx, row);
      if (source) await writeSourceIn(tx, ctx, source);
      for (const [path, content] of [...(draft.shared ?? [])].sort(([a], [b]) => (a < b ? -1 : 1))) await ctx.blobs.ensure(tx, path, content);
      if (draft.own.length) await insertAttachments(tx, draft.own);
      if (draft.linked.length)
        await linkAttachments(
          tx,
          id,
          draft.linked.map((a) => a.id),
        );
      // A held scheduled send keeps its release job: at its time, still held, the job does nothing (releaseHeldSend queues another).
      if (sendAt) await scheduleRelease(tx, ctx, now, { messageId: id, to: draft.to, cc: draft.cc, ...(draft.listUnsubscribe ? { listUnsubscribe: true } : {}) }, sendAt);
      if (reasons.length) await recordHold(tx, ctx, row, reasons);
      else if (!sendAt) await enqueueDeliveries(tx, ctx, now, id, await planDelivery(ctx, attempted));
    });
  } catch (err) {
    // A source kept as rows went with the transaction; a file is left behind.
    if (source && !source.bytes) await releaseBlobs(ctx, [source.rawPath]);
    throw err;
  }
  // A scheduled release too: the runner re-arms its timer for the new earliest due time.
  ctx.notify('jobs');
  return messageView(row, [...draft.own, ...draft.linked].map(attachmentMeta));
}

/** A signed outbound source: its blob key and size, for the message row. */
export interface RenderedSource {
  rawPath: string;
  size: number;
  /**
   * A small source: its bytes, to be written with the rows that name it (writeSourceIn) under a
   * row blob key (Blobs.rowKey). Absent for a larger source: its file is written already.
   */
  bytes?: Buffer;
}

/**
 * Builds the RFC 5322 source of outbound message `row` (Date: `now`) and DKIM-signs it.
 * Recipients carry their display names. A source of at most ROW_BLOB_MAX_BYTES is kept in the
 * database, written in the transaction that commits its message (writeSourceIn): as a file, its
 * create, fsync, rename and directory fsync cost more than everything else a send does
 * (docs/performance.md). A larger one is written to a file (fsynced) here, streamed there when
 * its bodies and attachments pass STREAMED_SOURCE_BYTES.
 */
export async function renderSource(
  ctx: AppContext,
  inbox: Pick<InboxRow, 'address' | 'displayName'>,
  row: Pick<MessageRow, 'id' | 'subject' | 'bodyText' | 'bodyHtml' | 'messageIdHeader' | 'inReplyTo' | 'references'>,
  headers: { to: MailAddress[]; cc: MailAddress[]; listUnsubscribe?: boolean },
  files: AttachmentRow[],
  now: Date,
  /** Content-IDs of attachments the HTML shows inline (cid: URLs), by attachment id. */
  cids?: Map<string, string>,
): Promise<RenderedSource> {
  const domain = splitAddress(inbox.address)!.domain;
  const input: ComposeInput = {
    from: { name: inbox.displayName, address: inbox.address },
    to: headers.to,
    cc: headers.cc,
    subject: row.subject,
    text: row.bodyText,
    html: row.bodyHtml,
    messageId: row.messageIdHeader,
    date: now,
    inReplyTo: row.inReplyTo,
    references: JSON.parse(row.references) as string[],
    attachments: files.map((a) => ({ filename: a.filename, contentType: a.contentType, content: ctx.blobs.stream(a.storagePath), cid: cids?.get(a.id) })),
    // One recipient (assertOneRecipient): the link names who unsubscribes.
    headers: headers.listUnsubscribe ? listUnsubscribeHeaders(ctx, row.id, headers.to[0]?.address ?? headers.cc[0].address, domain) : undefined,
  };
  const bytes = files.reduce((n, a) => n + a.size, (row.bodyText?.length ?? 0) + (row.bodyHtml?.length ?? 0));
  if (bytes <= STREAMED_SOURCE_BYTES) {
    const raw = await signMessage(ctx, await buildMime(input), domain);
    const kept = raw.length <= ROW_BLOB_MAX_BYTES;
    const rawPath = kept ? Blobs.rowKey(row.id, '.eml') : Blobs.key('raw', row.id, '.eml');
    if (!kept) await ctx.blobs.write(rawPath, raw);
    keepSource(ctx, rawPath, raw);
    return { rawPath, size: raw.length, bytes: kept ? raw : undefined };
  }
  const rawPath = Blobs.key('raw', row.id, '.eml');
  // Composed into a staged file while the body hash of its signature is taken, then stored
  // after the DKIM-Signature: memory holds a few chunks at a time, never the message (held
  // whole, composing and signing took about five copies of it).
  const parts = new SignedParts();
  const staged = StagedWriter.create(ctx.config.data_dir, 'source');
  try {
    for await (const chunk of await mimeStream(input)) {
      parts.update(chunk as Buffer);
      await staged.write(chunk as Buffer);
    }
    // Not fsynced: it is copied into place, and that copy is.
    const file = await staged.finish(false);
    const signature = (await dkimSignature(ctx, domain, parts)) ?? Buffer.alloc(0);
    await ctx.blobs.writeStream(rawPath, Readable.from(prefixed(signature, file.path)));
    return { rawPath, size: signature.length + file.size };
  } finally {
    await staged.discard(ctx.log);
  }
}

/** In the transaction committing the message that names `source`: writes it, when it is kept in the database. */
export async function writeSourceIn(tx: Tx, ctx: AppContext, source: RenderedSource): Promise<void> {
  if (source.bytes) await ctx.blobs.writeRowsIn(tx, source.rawPath, source.bytes);
}

async function* prefixed(head: Buffer, path: string): AsyncGenerator<Buffer> {
  yield head;
  yield* createReadStream(path);
}

/** Queues the delivery jobs of message `messageId` inside `tx` (the caller notifies 'jobs' after the commit). */
export async function enqueueDeliveries(tx: Tx, ctx: AppContext, now: Date, messageId: string, plan: Array<Omit<SendJobPayload, 'messageId'>>): Promise<void> {
  const maxAttempts = ctx.config.outbound.retry_schedule.length + 1;
  for (const job of plan) {
    const payload: SendJobPayload = { messageId, ...job };
    // Remote jobs share a partition per recipient domain: the runner bounds concurrency there.
    await enqueueJob(tx, now, { kind: SEND_JOB, payload, partition: job.local ? '' : job.domain, maxAttempts });
  }
}

/**
 * Inside the send's transaction: the original is still stored (a concurrent delete answers
 * 404 rather than a reply in a thread that no longer exists), and so are the attachment rows a
 * forward carries over: while one of them names a file, no delete removes it, and once the
 * forward's rows commit they name it too.
 */
async function assertOriginStored(tx: Tx, accountId: string, origin: SendOrigin): Promise<void> {
  if ((await findMessageAccountId(tx, origin.messageId)) !== accountId) throw new AppError('MESSAGE_NOT_FOUND', `message ${origin.messageId} not found`);
  if (!origin.carried.length) return;
  const ids = origin.carried.map((a) => a.id);
  const still = await listStoredAttachmentIds(tx, ids);
  if (still.length !== ids.length) throw new AppError('MESSAGE_NOT_FOUND', `message ${origin.messageId} not found`);
}

/**
 * Groups recipients into jobs: one for recipients that are inboxes here (or claim to be, on the
 * shared domain), delivered through acceptInbound; one per remote domain.
 */
export async function planDelivery(ctx: AppContext, addresses: string[]): Promise<Array<Omit<SendJobPayload, 'messageId'>>> {
  const shared = ctx.config.shared_domain.toLowerCase();
  const local: string[] = [];
  const remote = new Map<string, string[]>();
  for (const address of addresses) {
    const domain = splitAddress(address)!.domain;
    if (domain === shared || (await findInboxByAddress(ctx, address))) local.push(address);
    else remote.set(domain, [...(remote.get(domain) ?? []), address]);
  }
  const jobs: Array<Omit<SendJobPayload, 'messageId'>> = [];
  if (local.length) jobs.push({ domain: '', local: true, recipients: local });
  for (const [domain, recipients] of remote) jobs.push({ domain, local: false, recipients });
  return jobs;
}

// ---------------------------------------------------------------------------------------------
// Delivery state

export async function findOutboundRow(ctx: AppContext, id: string): Promise<MessageRow | undefined> {
  const row = await findMessageById(ctx.db, id);
  return row?.direction === 'outbound' ? row : undefined;
}

const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/** The recipients of `addresses` that still need an attempt. */
export function pendingRecipients(row: MessageRow, addresses: string[]): string[] {
  const list = JSON.parse(row.recipients) as RecipientOutcome[];
  return addresses.filter((a) => {
    const r = list.find((x) => sameAddress(x.address, a));
    return !r || !FINAL_RECIPIENT_STATES.has(r.status);
  });
}

/** States set by reports after delivery; a late job result never undoes them. */
const STICKY = new Set(['bounced', 'complained']);

/** The message status that follows from its recipients (PRODUCT.md; README "Sending mail"). */
export function aggregateStatus(all: RecipientOutcome[]): string {
  // Suppressed recipients were never attempted: the status is that of the others.
  const list = all.filter((r) => r.status !== 'suppressed');
  if (!list.length) return 'failed';
  if (list.some((r) => !FINAL_RECIPIENT_STATES.has(r.status))) return list.some((r) => r.status === 'sending') ? 'sending' : 'queued';
  if (list.some((r) => r.status === 'bounced')) return 'bounced';
  if (list.some((r) => r.status === 'failed')) return 'failed';
  if (list.every((r) => r.status === 'delivered')) return 'delivered';
  return 'sent';
}

const EVENT_OF: Record<string, EventType | undefined> = {
  sent: 'message.sent',
  delivered: 'message.delivered',
  bounced: 'message.bounced',
  // No event type exists for `failed`; it is reported as a bounce (the message could not be
  // delivered), with status `failed` in the payload.
  failed: 'message.bounced',
  complained: 'message.complained',
  canceled: 'message.canceled',
};

/**
 * Writes new recipients and status; on entering a final status, updates the inbox counters and
 * records the event, all in `tx`. Returns whether anything changed. With `onlyIfUnchanged`,
 * writes only if the stored recipients and status are still those of `row` (nothing is written
 * or recorded otherwise) and returns 'stale' then.
 */
export async function writeMessageState(tx: Tx, ctx: AppContext, row: MessageRow, list: RecipientOutcome[], status: string, onlyIfUnchanged = false): Promise<boolean | 'stale'> {
  const recipients = JSON.stringify(list);
  if (recipients === row.recipients && status === row.status && !onlyIfUnchanged) return false;
  const updatedAt = ctx.clock.now().toISOString();
  const state = { recipients, status, updatedAt, id: row.id };
  if (!onlyIfUnchanged) await updateMessageState(tx, state);
  else if (!(await updateMessageStateIf(tx, state, { recipients: row.recipients, status: row.status }))) return 'stale';
  // A hard bounce puts the recipient on the account's suppression list, in this transaction
  // (the stored list is read again only when this write holds a bounce: this runs on every attempt).
  if (list.some((r) => r.status === 'bounced')) {
    const before = new Map((JSON.parse(row.recipients) as RecipientOutcome[]).map((r) => [r.address.toLowerCase(), r.status]));
    const bounced = list.filter((r) => r.status === 'bounced' && before.get(r.address.toLowerCase()) !== 'bounced').map((r) => r.address);
    if (bounced.length) await suppressIn(ctx, tx, row.accountId, bounced, 'bounce', row.id, updatedAt);
  }
  if (status === row.status) return recipients !== row.recipients;
  if (status === 'bounced') await incrementInboxBounces(tx, row.inboxId);
  else if (status === 'complained') await incrementInboxComplaints(tx, row.inboxId);
  const event = EVENT_OF[status];
  // The view (with its attachments) is built only for the event: this runs on every attempt.
  if (event) await recordEvent(tx, ctx, row.accountId, event, messageView({ ...row, recipients, status, updatedAt }, await attachmentMetaFor(ctx, row.id)));
  return true;
}

/**
 * Marks the recipients of `addresses` that still need an attempt as being attempted now
 * (status `sending` while a worker holds them), inside `tx`: the transaction that claims the
 * send job. Returns the message row as it now is (the attempt needs no second read), or
 * undefined when the message is gone.
 */
export async function markSending(tx: Tx, ctx: AppContext, messageId: string, addresses: string[]): Promise<MessageRow | undefined> {
  const row = await findOutboundRow(ctx, messageId);
  if (!row) return undefined;
  const pending = pendingRecipients(row, addresses);
  if (!pending.length) return row;
  const list = (JSON.parse(row.recipients) as RecipientOutcome[]).map((r) => (pending.some((a) => sameAddress(a, r.address)) ? { ...r, status: 'sending' } : r));
  const status = STICKY.has(row.status) ? row.status : aggregateStatus(list);
  await writeMessageState(tx, ctx, row, list, status);
  return { ...row, recipients: JSON.stringify(list), status };
}

/**
 * Applies one attempt's per-recipient results (inside the job's finishing transaction). `known`
 * is the message row as the attempt's claim left it: when the stored row still has its
 * recipients and status, the results are written on it without reading the row again (one
 * statement less per send); when anything changed it meanwhile (a report, the job of another
 * recipient domain), the row is read and the results merged into what it holds now.
 */
export async function recordOutcomes(tx: Tx, ctx: AppContext, messageId: string, outcomes: RecipientOutcome[], known?: MessageRow): Promise<void> {
  if (known && (await applyOutcomes(tx, ctx, known, outcomes, true)) !== 'stale') return;
  const row = await findMessageById(ctx.db, messageId);
  if (row) await applyOutcomes(tx, ctx, row, outcomes, false);
}

function applyOutcomes(tx: Tx, ctx: AppContext, row: MessageRow, outcomes: RecipientOutcome[], onlyIfUnchanged: boolean): Promise<boolean | 'stale'> {
  const list = (JSON.parse(row.recipients) as RecipientOutcome[]).map((r) => {
    const o = outcomes.find((x) => sameAddress(x.address, r.address));
    return o && !FINAL_RECIPIENT_STATES.has(r.status) ? { ...r, status: o.status, response: o.response } : r;
  });
  return writeMessageState(tx, ctx, row, list, STICKY.has(row.status) ? row.status : aggregateStatus(list), onlyIfUnchanged);
}
