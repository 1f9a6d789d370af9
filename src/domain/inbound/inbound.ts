// Receiving mail: which RCPT addresses are ours, and acceptInbound, the one path every inbound
// message takes (SMTP and local delivery by the sender): parse once, write the raw source and
// attachment bytes (fsynced), then in ONE transaction the rows, threads and events.
import type { AddressObject, ParsedMail } from 'mailparser';
import { createHash } from 'node:crypto';
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { newId } from '../../ids.ts';
import { Blobs } from '../../store/blobs/blobs.ts';
import { splitAddress } from '../addresses.ts';
import { cleanContentType, cleanFilename, type AttachmentRow } from '../mail/attachments.ts';
import type { AuthenticationResults } from './authentication.ts';
import { isBounceLocalPart, notAReport, readBounceAddress, type BounceTarget } from './bounce-address.ts';
import type { ServiceTarget } from './service-address.ts';
import { AppError } from '../errors.ts';
import { recordEvent } from '../events/events.ts';
import { releaseBlobs } from '../../store/blobs/blob-refs.ts';
import { findRecipientByAddress, type InboxRow } from '../inboxes/inboxes.ts';
import { assertStoredBelowQuota } from '../accounts/quotas.ts';
import { assertSenderAccepted, receiveListsAdmit, senderNotAccepted } from '../inboxes/lists.ts';
import { insertMessageRow, messageView, type MessageRow } from '../mail/messages.ts';
import { searchVector } from '../../store/search-vector.ts';
import { findOutboundRow } from '../sending/sending.ts';
import { messageIdsIn, threadForMessage } from '../mail/threads.ts';
import { isoNow } from '../time.ts';
import { isStaged, type LargeAttachment, type StagedMessage } from './inbound-large.ts';
import { headerText, traceHeaders } from './inbound-parse.ts';
import { analyseMessage } from './analysis.ts';
import { isHeld, recordHold, screenTargets, screeningModeOf } from '../screening/hold.ts';
import type { Screening } from '../screening/screen.ts';
import { askClassifier } from '../screening/classifier.ts';
import { removeStaged } from '../../store/blobs/staging.ts';
import { domainExists, findStoredDelivery } from '../../store/repo/inbound.ts';
import { insertAttachments } from '../../store/repo/attachments.ts';
import { listLiveInboxIds } from '../../store/repo/inboxes.ts';
import { readOnce, sendAlong } from '../../store/store.ts';

/**
 * Early handlers for reports about our own outbound mail (DSN multipart/report, ARF feedback).
 * Each is called after parsing; the first that returns true has consumed the message, and it is
 * not stored as an ordinary message. The outbound side registers its handler here.
 */
export const INBOUND_REPORT_HANDLERS: Array<(ctx: AppContext, parsed: ParsedMail, input: InboundInput) => boolean | Promise<boolean>> = [];

/**
 * The outbound message and recipient an RCPT TO names when it is one of our per-recipient
 * bounce addresses (domain/inbound/bounce-address.ts); undefined for any other address. An address in
 * the bounce namespace with a wrong token is an unknown mailbox.
 */
export async function resolveBounceRecipient(ctx: AppContext, address: string): Promise<BounceTarget | undefined> {
  const parts = splitAddress(address.trim());
  if (!parts || !isBounceLocalPart(parts.local)) return undefined;
  if (!(await servesDomain(ctx, parts.domain.toLowerCase().replace(/\.$/, '')))) return undefined;
  const target = await readBounceAddress(ctx, parts.local, (id) => findOutboundRow(ctx, id));
  if (!target) throw new AppError('INBOX_NOT_FOUND', 'no such mailbox here');
  return target;
}

/**
 * The inbox that receives mail for an RCPT TO address, or the AppError to answer:
 * FORBIDDEN (relay denied) for anything not on a domain we serve or using routing syntax,
 * INBOX_NOT_FOUND for an unknown mailbox of ours, INBOX_SUSPENDED for a suspended inbox, and,
 * when the envelope `sender` is given ('' for the null sender), FORBIDDEN (550 5.7.1) when the
 * inbox's receive allow/block lists refuse it (src/domain/inboxes/lists.ts): nothing is stored.
 * With `storage`, QUOTA_EXCEEDED (452 4.2.2) once the inbox's account stores its quota, read with
 * the inbox (one statement at every RCPT instead of two).
 */
export async function resolveRecipient(ctx: AppContext, address: string, sender?: string, opts: { storage?: boolean } = {}): Promise<InboxRow> {
  const parts = splitAddress(address.trim());
  // Never an open relay (RFC 5321 §3.6): quoted local parts, `%` hacks and `!` UUCP paths are
  // ways of naming another host; a local part with an `@` left in it is one too.
  if (!parts || parts.local.startsWith('"') || /[%!@]/.test(parts.local)) {
    throw new AppError('FORBIDDEN', 'relaying denied: routing syntax in the recipient address is not accepted');
  }
  const domain = parts.domain.toLowerCase().replace(/\.$/, '');
  if (!(await servesDomain(ctx, domain))) throw new AppError('FORBIDDEN', `relaying denied: ${domain} is not a domain of this server`);
  const found = await findRecipientByAddress(ctx, `${parts.local}@${domain}`);
  if (!found) throw new AppError('INBOX_NOT_FOUND', 'no such mailbox here');
  const { inbox } = found;
  if (inbox.status !== 'active') throw new AppError('INBOX_SUSPENDED', 'mailbox disabled, not accepting messages');
  if (sender !== undefined) await assertSenderAccepted(ctx, inbox.accountId, inbox.id, sender);
  if (opts.storage) assertStoredBelowQuota(ctx, found.storedBytes);
  return inbox;
}

/**
 * A message this inbox already stored from the same sender's bytes (same Message-ID, same
 * content hash) within this window is not stored again. Senders redeliver after a lost reply (a
 * timeout, a reset, a 250 that never reached them); storing it again would make an agent act twice.
 */
export const REDELIVERY_WINDOW_MS = 24 * 3_600_000;

/** The shared domain and every domain in the domains table (any account, any status). */
export async function servesDomain(ctx: AppContext, domain: string): Promise<boolean> {
  if (domain === ctx.config.shared_domain.toLowerCase()) return true;
  return domainExists(ctx.db, domain);
}

export interface InboundInput {
  /** The message: in memory, or staged on disk when large (src/domain/inbound/inbound-large.ts). */
  raw: Buffer | StagedMessage;
  /** Envelope sender (MAIL FROM); '' for the null reverse-path of bounces. */
  mailFrom: string;
  recipients: InboxRow[];
  remoteAddress?: string;
  heloName?: string;
  /** The SMTP session ran over TLS (recorded as ESMTPS in the Received header, RFC 3848). */
  secure?: boolean;
  /** Local delivery from this appliance: there is no remote sender to authenticate. */
  skipAuthentication?: boolean;
  /** When the 250 was given, for mail processed later from the spool (default: now). */
  receivedAt?: Date;
  /** Recipients that were bounce addresses of ours: what a report at them may change. */
  bounces?: BounceTarget[];
  /** Recipients that were service addresses of ours (unsubscribe, DMARC and TLS reports: service-address.ts). */
  services?: ServiceTarget[];
  /**
   * The stored source is already on disk, `trace` then `raw` (a spooled message's row: the blob
   * key `key`, src/store/blobs/spooled.ts): nothing is written, and the first copy is `firstId`,
   * the id its trace fields name.
   */
  source?: { key: string; firstId: string; trace: Buffer };
}

function addressesOf(field: AddressObject | AddressObject[] | undefined): string[] {
  const out: string[] = [];
  const walk = (list: Array<{ address?: string; group?: Array<{ address?: string }> }>) => {
    for (const v of list) {
      if (v.group) walk(v.group);
      else if (v.address) out.push(v.address.slice(0, 320));
    }
  };
  for (const obj of field ? [field].flat() : []) walk(obj.value);
  return out;
}

const VALID_MSGID = /^<[^<>\s]{1,900}>$/;

/** Text never holds NUL (src/store/store.ts withoutNul): what the row stores is what events carry. */
const noNul = <T extends string | undefined>(s: T): T => (s?.includes('\0') ? (s.replaceAll('\0', '\uFFFD') as T) : s);

interface PreparedAttachment {
  filename: string;
  contentType: string;
  size: number;
  sha256: string;
  /** The bytes in memory, or the staged file holding them (a large message's). */
  content: Buffer | { staged: string };
}

/** True for a message with no content at all (only whitespace): refused, not stored. */
export function isEmptyMessage(raw: Buffer): boolean {
  return raw.length === 0 || raw.every((b) => b === 0x0d || b === 0x0a || b === 0x20 || b === 0x09);
}

/**
 * A message parsed, authenticated and with its files written (fsynced), ready to be stored:
 * `store(tx)` inserts its rows, threads and events inside the caller's transaction and returns
 * the ids stored (recipients whose inbox was deleted meanwhile get none). `files` are what to
 * release (releaseBlobs) after that transaction, committed or not: those no row names go.
 */
export interface PreparedInbound {
  files: string[];
  store(tx: Tx): Promise<string[]>;
  /** After `store`: whether a row it inserted names the stored source (a kept `source` that none names is its caller's to delete). */
  sourceNamed(): boolean;
  /** Staged attachment files to remove once `store` has committed or failed. */
  staged: string[];
  /**
   * The locks `store` takes, one per recipient inbox and Message-ID: the second of two deliveries
   * of one message waits there for the first's commit and finds its row. Two stores sharing a key
   * must not run side by side in one transaction, where the lock does not keep them apart.
   */
  keys: string[];
}

/**
 * Stores one received message for each recipient inbox and returns after the commit. The
 * copies share one raw file, and each attachment's bytes are stored once however many messages
 * carry them (Blobs.contentKey): a file goes when the last row naming it does (releaseBlobs).
 */
export async function acceptInbound(ctx: AppContext, input: InboundInput): Promise<{ messageIds: string[] }> {
  const prepared = await prepareInbound(ctx, input);
  if (!prepared) return { messageIds: [] };
  let messageIds: string[];
  try {
    // Shared with the other messages committing at this moment: one fsync for all of them.
    messageIds = await ctx.store.grouped(async (tx) => {
      const ids = await prepared.store(tx);
      if (ids.length === 0) throw new AppError('INBOX_NOT_FOUND', 'no recipient inbox exists any more');
      return ids;
    });
  } catch (err) {
    await releaseBlobs(ctx, prepared.files);
    throw err;
  } finally {
    await removeStaged(prepared.staged);
  }
  // Inboxes gone at `store`, or a redelivery stored nothing new: their planned files go.
  await releaseBlobs(ctx, prepared.files);
  // Webhook fan-out may have enqueued jobs in the transaction.
  ctx.notify('jobs');
  return { messageIds };
}

/**
 * Everything of acceptInbound before the transaction: parse, report handlers, authentication
 * and the files. Null when a report handler consumed the message (nothing to store).
 */
export async function prepareInbound(ctx: AppContext, input: InboundInput): Promise<PreparedInbound | null> {
  const raw = input.raw;
  if (isStaged(raw) ? raw.blank : isEmptyMessage(raw)) throw new AppError('VALIDATION_ERROR', 'empty message');
  // Parsed and authenticated together, on an analysis worker (analysis.ts): a large message
  // from its staged file, its large attachments staged too (removed after the commit).
  const sender = input.skipAuthentication ? null : { mailFrom: input.mailFrom, remoteAddress: input.remoteAddress, heloName: input.heloName };
  const screen = await screenTargets(ctx, input.recipients);
  const analysed = await analyseMessage(ctx, raw, sender, screen);
  const { parsed, files: staged = [] } = analysed;
  try {
    // ---- Reports about our own outbound mail (DSN/ARF): handled by INBOUND_REPORT_HANDLERS. ----
    for (const handle of INBOUND_REPORT_HANDLERS) {
      if (await handle(ctx, parsed, input)) {
        await removeStaged(staged);
        return null;
      }
    }
    return { ...(await prepareStore(ctx, input, parsed, analysed.authentication, analysed.screening)), staged };
  } catch (err) {
    await removeStaged(staged);
    throw err;
  }
}

/** prepareInbound once the message is parsed and is no report: authentication, files, and the store step. */
async function prepareStore(
  ctx: AppContext,
  input: InboundInput,
  parsed: ParsedMail,
  authentication: AuthenticationResults | null,
  /** The analysis worker's screening (null: not asked for, or the message could not be analysed). */
  screened: Screening | null,
): Promise<Omit<PreparedInbound, 'staged'>> {
  const raw = input.raw;

  // Mail at a bounce address that is no report is refused, never stored (bounce-address.ts).
  if (input.recipients.length === 0 && input.bounces?.length) throw notAReport();
  const unique = [...new Map(input.recipients.map((r) => [r.id, r])).values()];
  if (unique.length === 0) throw new AppError('INBOX_NOT_FOUND', 'no recipient inbox');

  const from = addressesOf(parsed.from);
  const fromName = headerText(parsed.from?.value.find((v) => v.address)?.name ?? '') || null;
  const messageIdHeader = parsed.messageId && VALID_MSGID.test(parsed.messageId) ? parsed.messageId : `<${newId('msg')}@${ctx.config.hostname}>`;
  const inReplyTo = messageIdsIn(parsed.inReplyTo)[0] ?? null;
  const references = messageIdsIn(parsed.references);
  const parents = messageIdsIn(references, inReplyTo);
  const atts: PreparedAttachment[] = (parsed.attachments as LargeAttachment[]).map((a, i) => ({
    filename: cleanFilename(a.filename, `attachment-${i + 1}`),
    contentType: cleanContentType(a.contentType),
    size: a.staged?.size ?? a.content.length,
    sha256: a.staged?.sha256 ?? createHash('sha256').update(a.content).digest('hex'),
    content: a.staged ? { staged: a.staged.path } : a.content,
  }));

  // Files first (fsynced), before the commit. One raw file for every copy of this delivery;
  // attachment bytes by their hash. Where blobs are rows (PostgreSQL, BlobStore.writeIn) they
  // are written in the message's own transaction instead (`store`), which saves a transaction
  // and its commit per message.
  // A staged message's trace fields already name the first copy's id, as a kept source's do.
  const source = input.source;
  const messageIds = unique.map((_, i) => (i === 0 && source ? source.firstId : i === 0 && isStaged(raw) ? raw.id : newId('msg')));
  const rawPath = source?.key ?? Blobs.key('raw', messageIds[0], '.eml');
  const plan = unique.map((inbox, i) => ({
    inbox,
    id: messageIds[i],
    attachments: atts.map((a) => ({ ...a, id: newId('att'), storagePath: Blobs.contentKey('attachments', a.sha256) })),
  }));
  const shared = new Map(atts.map((a) => [Blobs.contentKey('attachments', a.sha256), a.content]));
  const writeIn = ctx.blobs.writeIn?.bind(ctx.blobs);
  // In a transaction the raw source is written only with a row naming it: never left over. A
  // kept source is its owner's (the spool's) to remove, never a file of this delivery.
  const files = writeIn || source ? [...shared.keys()] : [rawPath, ...shared.keys()];

  const receivedAt = isStaged(raw) ? raw.receivedAt : (input.receivedAt ?? ctx.clock.now());
  // Trace fields and the message as received, written one after the other (a 25 MB message is
  // not copied to prepend two lines); a staged message has them in its file already, which
  // becomes the raw blob (a rename on disk; streamed into its row on PostgreSQL).
  const trace = source ? source.trace : isStaged(raw) ? Buffer.alloc(0) : traceHeaders(ctx, input, plan[0].id, receivedAt);
  const storedSize = isStaged(raw) ? raw.traceLength + raw.size : trace.length + raw.length;
  const rawData = isStaged(raw) ? { staged: raw.path } : trace.length ? [trace, raw] : raw;
  if (!writeIn) {
    // allSettled, not all: on a failure every write has finished before the cleanup runs, so
    // no file can appear after it.
    const writes = await Promise.allSettled([
      source ? undefined : isStaged(raw) ? ctx.blobs.adopt(rawPath, raw.path) : ctx.blobs.write(rawPath, rawData as Buffer | Buffer[]),
      ...[...shared].map(([path, content]) => (Buffer.isBuffer(content) ? ctx.blobs.write(path, content) : ctx.blobs.link(path, content.staged))),
    ]);
    const failed = writes.find((r) => r.status === 'rejected');
    if (failed) {
      await releaseBlobs(ctx, files);
      throw failed.reason;
    }
  }
  let screening = screened;
  if (screening && ctx.config.screening.classifier_url) screening = await askClassifier(ctx, parsed, screening);
  // The receive lists again, by the header From and its authentication (inboxes/lists.ts).
  // Local delivery is from an inbox here, with the From mailroom wrote: proven by construction.
  const sender = { mailFrom: input.mailFrom, from, authenticatedDomain: input.skipAuthentication ? splitAddress(from[0] ?? '')?.domain.toLowerCase() : authentication?.fromDomain };
  const admitted: typeof plan = [];
  for (const p of plan) if (await receiveListsAdmit(ctx, p.inbox.accountId, p.inbox.id, sender)) admitted.push(p);
  if (!admitted.length) {
    await releaseBlobs(ctx, files);
    throw senderNotAccepted();
  }

  const now = isoNow(ctx.clock);
  const createdAt = receivedAt.toISOString();
  const subject = headerText(parsed.subject ?? '').slice(0, 998);
  const contentHash = isStaged(raw) ? raw.sha256 : createHash('sha256').update(raw).digest('hex');
  const since = new Date(receivedAt.getTime() - REDELIVERY_WINDOW_MS).toISOString();
  const texts = {
    subject,
    fromAddress: from[0] ?? input.mailFrom ?? '',
    fromName,
    toAddresses: JSON.stringify(addressesOf(parsed.to)),
    ccAddresses: JSON.stringify(addressesOf(parsed.cc)),
    // The line break that ends the last body line belongs to MIME framing, not the text.
    bodyText: parsed.text === undefined ? null : noNul(parsed.text.replace(/\r?\n$/, '')),
  };
  // On PostgreSQL the search column of every copy, made here, before the transaction, rather
  // than by the server's text parser (src/store/search-vector.ts); null leaves it to the server.
  const vector = ctx.store.dialect === 'postgres' ? searchVector(texts) : null;
  let sourceNamed = false;
  const lockKey = (inboxId: string) => `inbound:${inboxId}:${messageIdHeader}`;
  const store = async (tx: Tx): Promise<string[]> => {
    sourceNamed = false;
    // An inbox deleted since RCPT gets nothing (its rows would be orphans).
    // Once for the messages of a batch to the same inboxes (readOnce).
    const inboxIds = plan.map((p) => p.inbox.id);
    const alive = new Set(await readOnce(`live inboxes ${inboxIds.join(' ')}`, () => listLiveInboxIds(tx, inboxIds)));
    // The deletion of another message sharing these bytes may have removed them since (or,
    // written in this transaction, they are not there yet).
    for (const [path, content] of [...shared].sort(([a], [b]) => (a < b ? -1 : 1))) {
      await ctx.blobs.ensure(tx, path, content);
    }
    let rawWritten = !writeIn || source !== undefined;
    const ids: string[] = [];
    for (const p of admitted) {
      if (!alive.has(p.inbox.id)) continue;
      // Inside the write transaction, under a lock on this message for this inbox, so two
      // sessions (or nodes) delivering the same message at once are serialised here and the
      // second one finds the first's row. The lock is sent along: the server runs the read
      // after it, once it is held.
      sendAlong(ctx.store.lock(tx, lockKey(p.inbox.id)));
      const before = await findStoredDelivery(tx, { accountId: p.inbox.accountId, messageIdHeader, inboxId: p.inbox.id, contentHash, since });
      if (before) {
        ids.push(before);
        continue;
      }
      const threadId = await threadForMessage(tx, { accountId: p.inbox.accountId, inboxId: p.inbox.id, parents, subject, at: createdAt });
      const mode = screeningModeOf(ctx, p.inbox);
      const own = mode === 'off' ? null : screening;
      const held = isHeld(mode, own);
      const row: MessageRow = {
        id: p.id,
        accountId: p.inbox.accountId,
        inboxId: p.inbox.id,
        threadId,
        direction: 'inbound',
        ...texts,
        bccAddresses: '[]',
        bodyHtml: typeof parsed.html === 'string' ? noNul(parsed.html) : null,
        delivery: null,
        status: held ? 'held' : 'received',
        messageIdHeader,
        inReplyTo,
        references: JSON.stringify(references),
        recipients: '[]',
        authentication: authentication ? JSON.stringify({ ...authentication, fromDomain: undefined, dmarcPolicy: undefined }) : null,
        rawPath,
        size: storedSize,
        contentHash,
        unread: true,
        sendAt: null,
        hold: null,
        createdAt,
        updatedAt: now,
        screening: own ? JSON.stringify(own) : null,
      };
      if (!rawWritten) {
        await writeIn!(tx, rawPath, rawData);
        rawWritten = true;
      }
      sendAlong(insertMessageRow(tx, row, vector));
      sourceNamed = true;
      const attRows: AttachmentRow[] = p.attachments.map((a) => ({
        id: a.id,
        accountId: p.inbox.accountId,
        messageId: p.id,
        filename: a.filename,
        contentType: a.contentType,
        size: a.size,
        sha256: a.sha256,
        storagePath: a.storagePath,
        createdAt,
      }));
      if (attRows.length) sendAlong(insertAttachments(tx, attRows));
      const view = messageView(
        row,
        attRows.map((a) => ({ id: a.id, filename: a.filename, contentType: a.contentType, size: a.size })),
      );
      const event = { ...view, fromName, hasAttachments: attRows.length > 0, receivedAt: createdAt };
      if (held) await recordHold(tx, ctx, row, event, own!);
      else await recordEvent(tx, ctx, p.inbox.accountId, 'message.received', event);
      ids.push(p.id);
    }
    return ids;
  };
  return { files, store, sourceNamed: () => sourceNamed, keys: admitted.map((p) => lockKey(p.inbox.id)) };
}
