// Replies and forwards: who a reply goes to, its subject and threading headers, and the quoted
// original of a forward. Each ends in queueSend (src/domain/sending/sending.ts), so the daily limit,
// suspension, DKIM, the job table and the events are the ones every send goes through.
import type { AppContext } from '../../context.ts';
import { textFromHtml } from '../../outbound/mime.ts';
import { normalizeRecipient } from '../addresses.ts';
import { messageAttachmentRows } from '../mail/attachments.ts';
import { AppError } from '../errors.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import { findMessageRow, type Message, type MessageRow } from '../mail/messages.ts';
import { queueSend, type SendOrigin } from './sending.ts';
import { messageIdsIn } from '../mail/threads.ts';

export interface ReplyInput {
  bodyText?: string | null;
  bodyHtml?: string | null;
  attachmentIds?: string[];
  replyAll?: boolean;
  /** Blind copies: the envelope only, as for a send. */
  bcc?: string[];
  sendAt?: string | null;
  listUnsubscribe?: boolean;
}

export interface ForwardInput {
  to: string[];
  cc?: string[];
  bcc?: string[];
  bodyText?: string | null;
  bodyHtml?: string | null;
  sendAt?: string | null;
  listUnsubscribe?: boolean;
}

// RFC 5322 §3.6.5: "Re: " once, however many times the conversation went back and forth.
// Common prefixes of other clients (Outlook's "RE:", "Fw:", German "AW:", "WG:") count too.
const REPLY_PREFIX = /^\s*(?:re|aw|sv|antw)(?:\[\d+\])?\s*:/i;
const FORWARD_PREFIX = /^\s*(?:fwd?|wg|tr)(?:\[\d+\])?\s*:/i;

/** `Re: <subject>`, unless it already is a reply subject; at most 998 characters (RFC 5322 §2.1.1). */
export function replySubject(subject: string): string {
  return (REPLY_PREFIX.test(subject) ? subject : `Re: ${subject}`.trimEnd()).slice(0, 998);
}

/** `Fwd: <subject>`, unless it already is a forward subject. */
export function forwardSubject(subject: string): string {
  return (FORWARD_PREFIX.test(subject) ? subject : `Fwd: ${subject}`.trimEnd()).slice(0, 998);
}

/**
 * References of a reply (RFC 5322 §3.6.4): the parent's References (or, without them, its
 * In-Reply-To) followed by the parent's Message-ID; long chains keep the first and the most
 * recent ones, as queueSend does for a send into a thread.
 */
function referencesFor(row: MessageRow): string[] {
  const parentRefs = JSON.parse(row.references) as string[];
  const chain = messageIdsIn(parentRefs.length ? parentRefs : row.inReplyTo, row.messageIdHeader);
  return chain.length > 20 ? [chain[0], ...chain.slice(-19)] : chain;
}

/** A well-formed address, or undefined (an inbound header may hold anything). */
function validAddress(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  try {
    return normalizeRecipient('to', raw);
  } catch {
    return undefined;
  }
}

let mailparser: Promise<typeof import('mailparser')> | undefined;

/**
 * The Reply-To addresses of a received message, read from the header block of its stored
 * source (only the headers are parsed). Empty when there is none or none is well-formed.
 */
async function replyToOf(ctx: AppContext, row: MessageRow): Promise<string[]> {
  if (!row.rawPath) return [];
  let raw: Buffer;
  try {
    raw = await ctx.blobs.read(row.rawPath);
  } catch {
    return [];
  }
  const end = raw.indexOf('\r\n\r\n');
  const lfEnd = raw.indexOf('\n\n');
  const cut = end === -1 ? lfEnd : lfEnd === -1 ? end : Math.min(end, lfEnd);
  const head = raw.subarray(0, cut === -1 ? raw.length : cut);
  if (!/^reply-to:/im.test(head.toString('latin1'))) return [];
  const { simpleParser } = await (mailparser ??= import('mailparser'));
  const parsed = await simpleParser(Buffer.concat([head, Buffer.from('\r\n\r\n')]), { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true }).catch(() => undefined);
  return (parsed?.replyTo?.value ?? []).map((a) => validAddress(a.address)).filter((a): a is string => !!a);
}

const lower = (a: string) => a.toLowerCase();

/** Addresses without duplicates (case-insensitively), without `exclude`, in order. */
function distinct(list: string[], exclude: Set<string>): string[] {
  const out: string[] = [];
  for (const a of list) {
    if (exclude.has(lower(a))) continue;
    exclude.add(lower(a));
    out.push(a);
  }
  return out;
}

/**
 * Who a reply to `original` from `inbox` goes to (PRODUCT.md "Replying and forwarding"). To: the
 * original's Reply-To, else its From; for a message this inbox sent, its To. With replyAll the
 * original's To and Cc, less this inbox and anyone already in To, go in Cc.
 */
export async function replyRecipients(ctx: AppContext, original: MessageRow, inboxAddress: string, replyAll: boolean): Promise<{ to: string[]; cc: string[] }> {
  const own = lower(inboxAddress);
  const toList = JSON.parse(original.toAddresses) as string[];
  const ccList = JSON.parse(original.ccAddresses) as string[];

  let to: string[];
  let others: string[];
  if (original.direction === 'outbound') {
    to = toList;
    others = ccList;
  } else {
    const replyTo = await replyToOf(ctx, original);
    const from = validAddress(original.fromAddress);
    to = replyTo.length ? replyTo : from ? [from] : [];
    others = [...toList, ...ccList];
  }
  const seen = new Set<string>();
  to = distinct(to, seen);
  seen.add(own);
  const cc = replyAll
    ? distinct(
        others.map(validAddress).filter((a): a is string => !!a),
        seen,
      )
    : [];
  return { to, cc };
}

/** What makes a send a reply to `original`: its thread, In-Reply-To and References. */
export function replyOrigin(original: MessageRow): SendOrigin {
  return { messageId: original.id, threadId: original.threadId, inReplyTo: original.messageIdHeader, references: referencesFor(original), carried: [] };
}

/** Replies from the inbox holding message `id` (recipients as replyRecipients says). */
export async function replyToMessage(ctx: AppContext, accountId: string, id: string, input: ReplyInput): Promise<Message> {
  const original = await findMessageRow(ctx, accountId, id);
  const inbox = await findInboxRow(ctx, accountId, original.inboxId);
  const { to, cc } = await replyRecipients(ctx, original, inbox.address, !!input.replyAll);
  if (!to.length) throw new AppError('VALIDATION_ERROR', `message ${id} names no address a reply could go to`);
  return queueSend(
    ctx,
    accountId,
    inbox.id,
    {
      to,
      cc,
      bcc: input.bcc,
      subject: replySubject(original.subject),
      bodyText: input.bodyText,
      bodyHtml: input.bodyHtml,
      attachmentIds: input.attachmentIds,
      sendAt: input.sendAt,
      listUnsubscribe: input.listUnsubscribe,
    },
    replyOrigin(original),
  );
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** `Name <address>` when there is a name. */
const person = (name: string | null, address: string) => (name ? `${name} <${address}>` : address);

/** The header block a forward quotes, as Gmail and Thunderbird write it. */
function forwardedHeaders(row: MessageRow): Array<[string, string]> {
  const lines: Array<[string, string]> = [
    ['From', person(row.fromName, row.fromAddress)],
    ['Date', new Date(row.createdAt).toUTCString()],
    ['Subject', row.subject],
    ['To', (JSON.parse(row.toAddresses) as string[]).join(', ')],
  ];
  const cc = JSON.parse(row.ccAddresses) as string[];
  if (cc.length) lines.push(['Cc', cc.join(', ')]);
  return lines;
}

const SEPARATOR = '---------- Forwarded message ---------';

/**
 * What is inside <body>, or the whole fragment when it has no body element. Found by scanning
 * (a regex `<body[^>]*>([\s\S]*)<\/body>` backtracks on HTML repeating `<body>` without an
 * end: 1 MB took 55 s).
 */
export function htmlBody(html: string): string {
  const lower = html.toLowerCase();
  const open = lower.indexOf('<body');
  const start = open === -1 ? -1 : lower.indexOf('>', open);
  const end = lower.lastIndexOf('</body>');
  return start !== -1 && end > start ? html.slice(start + 1, end) : html;
}

/**
 * Forwards message `id` from the inbox holding it: `Fwd:` subject, the note above the
 * original's headers and body quoted inline, the original's attachments carried over, and a
 * new thread (a forward starts a conversation with someone else).
 */
export async function forwardMessage(ctx: AppContext, accountId: string, id: string, input: ForwardInput): Promise<Message> {
  const original = await findMessageRow(ctx, accountId, id);
  const headers = forwardedHeaders(original);
  const noteText = input.bodyText || (input.bodyHtml ? await textFromHtml(input.bodyHtml) : '');
  const originalText = original.bodyText ?? (original.bodyHtml ? await textFromHtml(original.bodyHtml) : '');
  const bodyText = [noteText, noteText ? '\n\n' : '', SEPARATOR, '\n', ...headers.map(([k, v]) => `${k}: ${v}\n`), '\n', originalText].join('');
  let bodyHtml: string | null = null;
  // An HTML part only when one side has HTML; a text-only forward stays text-only.
  if (input.bodyHtml || original.bodyHtml) {
    const note = input.bodyHtml ? htmlBody(input.bodyHtml) : noteText ? `<div>${escapeHtml(noteText).replace(/\n/g, '<br>')}</div>` : '';
    const quoted = original.bodyHtml ? htmlBody(original.bodyHtml) : `<div>${escapeHtml(originalText).replace(/\n/g, '<br>')}</div>`;
    bodyHtml = `${note}${note ? '<br><br>' : ''}<div class="mailroom_forward">${SEPARATOR}<br>` + headers.map(([k, v]) => `${k}: ${escapeHtml(v)}<br>`).join('') + `<br>${quoted}</div>`;
  }
  return queueSend(
    ctx,
    accountId,
    original.inboxId,
    { to: input.to, cc: input.cc, bcc: input.bcc, subject: forwardSubject(original.subject), bodyText, bodyHtml, sendAt: input.sendAt, listUnsubscribe: input.listUnsubscribe },
    { messageId: original.id, inReplyTo: null, references: [], carried: await messageAttachmentRows(ctx, original.id) },
  );
}
