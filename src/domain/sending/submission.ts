// SMTP submission (PRODUCT.md "SMTP submission"): who may submit (an inbox address and an API
// key of its account that may write), from which address (that inbox's), and how a submitted
// message becomes an outbound Message of the inbox: parsed, rebuilt and queued through the same
// path as the send API (queueOutbound: DKIM, daily limit, thread, job table, events).
import { createHash } from 'node:crypto';
import type { AddressObject, ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import type { MailAddress } from '../../outbound/mime.ts';
import { releaseBlobs } from '../../store/blobs/blob-refs.ts';
import { Blobs } from '../../store/blobs/blobs.ts';
import { normalizeRecipient, splitAddress } from '../addresses.ts';
import { authenticateKey, seesInbox, type Principal } from '../accounts/apikeys.ts';
import { cleanContentType, cleanFilename, type AttachmentRow } from '../mail/attachments.ts';
import { AppError } from '../errors.ts';
import { loadMailparser } from '../inbound/inbound-parse.ts';
import { isStaged, parseStaged, type LargeAttachment, type StagedMessage } from '../inbound/inbound-large.ts';
import { removeStaged } from '../../store/blobs/staging.ts';
import { assertSendRoom, findInboxByAddress, findInboxRow, type InboxRow } from '../inboxes/inboxes.ts';
import type { Message } from '../mail/messages.ts';
import { queueOutbound } from './sending.ts';
import { suppressedAmong } from './suppressions.ts';
import { messageIdsIn } from '../mail/threads.ts';

/** Who a submission session authenticated as. */
export interface Submitter {
  accountId: string;
  inboxId: string;
  /** The inbox's address, lowercase: the only MAIL FROM accepted. */
  address: string;
  keyId: string;
}

/**
 * Checks AUTH credentials: `username` an inbox address, `password` an API key of that inbox's
 * account, with the `send` scope and this inbox (when limited), not revoked nor expired. Every refusal is the same
 * UNAUTHORIZED, so the answer tells nothing about which part was wrong; the key is looked up
 * (hash compared in constant time) whether or not the inbox exists.
 */
export async function authenticateSubmitter(ctx: AppContext, username: string, password: string): Promise<Submitter> {
  const inbox = await findInboxByAddress(ctx, username.trim());
  const principal = await authenticateKey(ctx, password);
  if (!inbox || !principal || principal.accountId !== inbox.accountId || !maySubmit(principal, inbox.id)) {
    throw new AppError('UNAUTHORIZED', 'authentication credentials invalid');
  }
  return { accountId: inbox.accountId, inboxId: inbox.id, address: inbox.address.toLowerCase(), keyId: principal.keyId };
}

/**
 * Whether a logged-in session's key still stands: not revoked, expired or made read-only since
 * the login. Asked at each MAIL FROM, at the end of DATA and on a timer, so a revoked key's
 * sessions end within seconds (PRODUCT.md "Bounded cost"). The key is read through the auth
 * cache (src/domain/accounts/auth-cache.ts), which forgets a key when it is revoked here, by the
 * CLI, or on another node: a check is a map lookup until then. A database failure throws.
 */
export async function submitterStillValid(ctx: AppContext, who: Submitter, presentedKey: string): Promise<boolean> {
  const principal = await authenticateKey(ctx, presentedKey);
  return principal !== undefined && principal.keyId === who.keyId && maySubmit(principal, who.inboxId);
}

/** Submission sends: the key needs `send` and, when it is limited to some inboxes, this one. */
const maySubmit = (principal: Principal, inboxId: string): boolean => principal.scopes.has('send') && seesInbox(principal, inboxId);

/**
 * MAIL FROM of a submission: the authenticated inbox's own address, and the inbox still there
 * and active. Returns the inbox row.
 */
export async function checkSubmissionSender(ctx: AppContext, who: Submitter, mailFrom: string): Promise<InboxRow> {
  if (mailFrom.trim().toLowerCase() !== who.address) {
    throw new AppError('FORBIDDEN', `sender address rejected: this login may send only as ${who.address}`);
  }
  const inbox = await findInboxRow(ctx, who.accountId, who.inboxId);
  if (inbox.status !== 'active') throw new AppError('INBOX_SUSPENDED', `inbox ${inbox.address} is suspended and cannot send`);
  assertSendRoom(ctx, inbox);
  return inbox;
}

/** A recipient (RCPT TO) of a submission, normalized; INVALID_ADDRESS when it is not one. */
export const submissionRecipient = (address: string): string => normalizeRecipient('RCPT TO', address);

/**
 * RCPT TO of a submission: a valid address that the account's suppression list does not hold
 * (550 5.7.1 naming it, so the client learns which recipient was refused). queueOutbound checks
 * again at the end of DATA.
 */
export async function checkSubmissionRecipient(ctx: AppContext, who: Submitter, address: string): Promise<void> {
  const recipient = submissionRecipient(address);
  if ((await suppressedAmong(ctx.db, who.accountId, [recipient])).size) {
    throw new AppError('RECIPIENTS_SUPPRESSED', `recipient ${recipient.toLowerCase()} is on the suppression list of this account`);
  }
}

/** Addresses of a parsed header field with their display names (groups flattened), valid ones only. */
function mailboxesOf(field: AddressObject | AddressObject[] | undefined): MailAddress[] {
  const out: MailAddress[] = [];
  const walk = (list: Array<{ address?: string; name?: string; group?: Array<{ address?: string; name?: string }> }>) => {
    for (const v of list) {
      if (v.group) walk(v.group);
      else if (v.address) {
        try {
          out.push({ name: v.name?.slice(0, 200) || null, address: normalizeRecipient('header', v.address) });
        } catch {
          // An address the header names but nothing could deliver to: left out of the record.
        }
      }
    }
  };
  for (const obj of field ? [field].flat() : []) walk(obj.value);
  return out;
}

const VALID_MSGID = /^<[^<>\s]{1,900}>$/;

/**
 * Turns one submitted message into an outbound Message of the submitter's inbox and returns it
 * once the message and its jobs are committed. To and Cc come from the headers, the Bcc is every
 * envelope recipient they do not name; subject, bodies and attachments from the parsed MIME; the
 * Message-ID is kept when the client set a valid one. The message is rebuilt (mailroom's From,
 * no Bcc header, CRLF) and DKIM-signed like any API send.
 */
export async function submitMessage(ctx: AppContext, who: Submitter, input: { raw: Buffer | StagedMessage; recipients: string[] }): Promise<Message> {
  const inbox = await findInboxRow(ctx, who.accountId, who.inboxId);
  // A large message (staged on disk as it arrived, src/smtp/data-stream.ts) is parsed from its
  // file, its large attachments to staged files of their own (removed once stored).
  const raw = input.raw;
  if (isStaged(raw)) {
    const { parsed, files } = await parseStaged(ctx, raw);
    try {
      return await queueSubmitted(ctx, inbox, parsed, input.recipients);
    } finally {
      await removeStaged(files);
    }
  }
  const { simpleParser } = await loadMailparser();
  const parsed = await simpleParser(raw, { skipTextToHtml: true, skipImageLinks: true, keepCidLinks: true }).catch(() => {
    throw new AppError('VALIDATION_ERROR', 'the message could not be parsed as MIME');
  });
  return queueSubmitted(ctx, inbox, parsed, input.recipients);
}

async function queueSubmitted(ctx: AppContext, inbox: InboxRow, parsed: ParsedMail, submitted: string[]): Promise<Message> {
  const recipients = [...new Map(submitted.map((r) => [r.toLowerCase(), r])).values()];
  const to = mailboxesOf(parsed.to);
  const cc = mailboxesOf(parsed.cc);
  const named = new Set([...to, ...cc].map((a) => a.address.toLowerCase()));
  const bcc = recipients.filter((r) => !named.has(r.toLowerCase())).map((address) => ({ name: null, address }));

  const now = ctx.clock.now();
  const iso = now.toISOString();
  const id = newId('msg', now.getTime());
  const messageIdHeader = parsed.messageId && VALID_MSGID.test(parsed.messageId) ? parsed.messageId : `<${id}@${splitAddress(inbox.address)!.domain}>`;
  const inReplyTo = messageIdsIn(parsed.inReplyTo)[0] ?? null;
  const references = messageIdsIn(parsed.references);
  const subject = (parsed.subject ?? '').slice(0, 998);
  const bodyText = parsed.text === undefined ? null : parsed.text.replace(/\r?\n$/, '');
  const bodyHtml = typeof parsed.html === 'string' ? parsed.html : null;

  // Attachment bytes are stored once by content (like inbound mail's), as rows of this message.
  const parts = (parsed.attachments as LargeAttachment[]).map((a, i) => {
    const sha256 = a.staged?.sha256 ?? createHash('sha256').update(a.content).digest('hex');
    const row: AttachmentRow = {
      id: newId('att', now.getTime()),
      accountId: inbox.accountId,
      messageId: id,
      filename: cleanFilename(a.filename, `attachment-${i + 1}`),
      contentType: cleanContentType(a.contentType),
      size: a.staged?.size ?? a.content.length,
      sha256,
      storagePath: Blobs.contentKey('attachments', sha256),
      createdAt: iso,
    };
    return { row, content: a.staged ? { staged: a.staged.path } : a.content, cid: a.contentDisposition === 'inline' && a.cid ? a.cid : undefined };
  });
  const shared = new Map(parts.map((p) => [p.row.storagePath, p.content]));
  const files = [...shared.keys()];
  try {
    const written = await Promise.allSettled([...shared].map(([path, content]) => (Buffer.isBuffer(content) ? ctx.blobs.write(path, content) : ctx.blobs.link(path, content.staged))));
    const failed = written.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return await queueOutbound(ctx, {
      inbox,
      id,
      now,
      fromName: parsed.from?.value.find((v) => v.address)?.name || inbox.displayName,
      to,
      cc,
      bcc,
      recipients,
      subject,
      bodyText,
      bodyHtml,
      messageIdHeader,
      inReplyTo,
      references,
      parents: messageIdsIn(references, inReplyTo),
      own: parts.map((p) => p.row),
      linked: [],
      shared,
      cids: new Map(parts.flatMap((p) => (p.cid ? [[p.row.id, p.cid] as [string, string]] : []))),
    });
  } finally {
    // Committed rows keep their files; after a failure those no row names go.
    await releaseBlobs(ctx, files);
  }
}
