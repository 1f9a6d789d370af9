// Holds for a person (PRODUCT.md "Outbound policy"): after the suppression list, a send that one
// of these rules catches is stored `held` with `hold: {reasons: [{code, detail}]}` instead of
// being queued; message.held fires and the audit log says why (actor: the system). Nothing is
// counted against the budgets and nothing is attempted until a key with `review` (or a person in
// the dashboard) releases it (POST /messages/{id}/release → `queued`, counted then); POST
// /messages/{id}/cancel or `[policy] hold_expiry` without a release cancel it.
//
//   first_contact    inbox approval "first_contact": a recipient this inbox never exchanged mail
//                    with (received mail from it, or sent it mail that was not held/canceled)
//   always           inbox approval "always": every send
//   secret_detected  src/domain/sending/secrets.ts found a secret in the subject, a body or the
//                    text of an attachment
//   auto_reply_loop  the mail answered (In-Reply-To) is automatic: Auto-Submitted other than "no",
//                    Precedence bulk|list|junk, or a no-reply / MAILER-DAEMON sender
//   thread_budget    the inbox already made `[policy] thread_hourly_sends` sends in this thread in
//                    the last hour
//
// Every way a send comes in goes through queueOutbound (src/domain/sending/sending.ts): the API,
// replies, forwards, drafts, SMTP submission and MCP. A scheduled send is checked when it is made
// and again when it is due (releaseIn, scheduled.ts), on what holds then, unless a person released
// it meanwhile. The rules that read the message (secrets, the
// answered mail's headers) run before the send's transaction; those that read the inbox's mail
// (first contact, thread budget) run inside it, beside the suppression list.
import type { AppContext } from '../../context.ts';
import { enqueueJob } from '../../jobs/table.ts';
import { countSendsOfThreadSince, findLatestInboundOfThread, findNewestJobPayloadOfMessage, hasExchangedWith, listInboundByMessageId, updateMessageHold } from '../../store/repo/holds.ts';
import { findInboxById } from '../../store/repo/inboxes.ts';
import { retireQueuedJobsOfMessage } from '../../store/repo/jobs.ts';
import { findMessageById } from '../../store/repo/messages.ts';
import type { Db, Tx } from '../../store/client.ts';
import { splitAddress } from '../addresses.ts';
import { recordAudit, SYSTEM_ACTOR, type Actor } from '../audit/audit.ts';
import { AppError } from '../errors.ts';
import { recordEvent } from '../events/events.ts';
import { countSend, type InboxRow } from '../inboxes/inboxes.ts';
import { attachmentMetaFor, type AttachmentRow } from '../mail/attachments.ts';
import { attachmentText, decodeText, textKind } from '../mail/attachment-text.ts';
import { getMessage, messageView, type Message, type MessageRow, type RecipientOutcome } from '../mail/messages.ts';
import { RELEASE_JOB, scheduleRelease, type ReleasePayload } from './send-at.ts';
import { enqueueDeliveries, planDelivery, writeMessageState } from './sending.ts';
import { findSecrets } from './secrets.ts';
import { allSuppressed, suppressedAmong, SUPPRESSED_RESPONSE } from './suppressions.ts';

export const HOLD_CODES = ['first_contact', 'always', 'secret_detected', 'auto_reply_loop', 'thread_budget'] as const;
export type HoldCode = (typeof HOLD_CODES)[number];

export interface HoldReason {
  code: HoldCode;
  detail: string;
}

/** What a held Message shows: `hold: {reasons}`, and `released: true` once a person released it. */
export interface Hold {
  reasons: HoldReason[];
  released?: boolean;
}

/** Job kind that cancels a hold nobody released within `[policy] hold_expiry`. */
export const HOLD_EXPIRY_JOB = 'hold_expiry';

/** What the rules read of a send. */
export interface HoldCandidate {
  inbox: Pick<InboxRow, 'id' | 'accountId' | 'approval'>;
  /** The recipients that would be attempted (suppressed ones already taken out). */
  recipients: string[];
  subject: string;
  bodyText: string | null;
  bodyHtml: string | null;
  files: AttachmentRow[];
  /** The Message-ID the send answers. */
  inReplyTo: string | null;
  /** The thread the send joins, when it joins one. */
  threadId?: string;
}

const byCode = (a: HoldReason, b: HoldReason) => HOLD_CODES.indexOf(a.code) - HOLD_CODES.indexOf(b.code);

// ---------------------------------------------------------------------------------------------
// The rules

/**
 * The rules that read the message itself: secrets in it, and whether it answers automatic mail.
 * Run before the send's transaction (they read files and sources).
 */
export async function contentReasons(ctx: AppContext, send: HoldCandidate): Promise<HoldReason[]> {
  const reasons: HoldReason[] = [];
  const places: Array<[string, string | null]> = [
    ['the subject', send.subject],
    ['the text body', send.bodyText],
    ['the HTML body', send.bodyHtml],
  ];
  for (const file of send.files) places.push([`attachment ${file.filename}`, await fileText(ctx, file)]);
  const found: string[] = [];
  for (const [where, text] of places) {
    const kinds = text ? findSecrets(text) : [];
    if (kinds.length) found.push(`${kinds.join(', ')} in ${where}`);
  }
  if (found.length) reasons.push({ code: 'secret_detected', detail: `${found.join('; ')}: a person must release it (POST /messages/{id}/release) before it is sent` });
  const loop = await automaticOriginal(ctx, send);
  if (loop) reasons.push({ code: 'auto_reply_loop', detail: `it answers automatic mail (${loop}); answering it could start a loop between automatic senders` });
  return reasons;
}

/**
 * The text of an attachment for the secret scan: text and HTML files decoded, PDF and DOCX through
 * the text extraction of GET /attachments/{id}/text (uploads: stored rows). A file nothing can be
 * read from (another type, too large, broken) is not scanned.
 */
async function fileText(ctx: AppContext, file: AttachmentRow): Promise<string | null> {
  const kind = textKind(file.contentType, file.filename);
  if (!kind || file.size > ctx.config.attachments.text_max_bytes) return null;
  try {
    if (kind === 'text' || kind === 'html') return decodeText(await ctx.blobs.read(file.storagePath));
    return (await attachmentText(ctx, file.accountId, file.id)).text;
  } catch (err) {
    ctx.log.info('an attachment could not be read for the secret scan', { attachmentId: file.id, error: (err as Error)?.message });
    return null;
  }
}

const NO_REPLY = /^(?:no[-_.]?reply|do[-_.]?not[-_.]?reply|mailer[-_.]?daemon)(?:[-_.+].*)?$/i;
/** The header section of a stored source is read up to this many bytes. */
const HEADER_BYTES = 65_536;

/**
 * Why the mail the send answers is automatic, or undefined. What it answers: the inbound mail
 * with its In-Reply-To Message-ID, else, when it joins a thread, the thread's newest inbound
 * mail (a send into a thread whose last message is a held reply still answers the robot).
 */
async function automaticOriginal(ctx: AppContext, send: HoldCandidate): Promise<string | undefined> {
  let answered = send.inReplyTo ? await listInboundByMessageId(ctx.db, send.inbox.accountId, send.inReplyTo) : [];
  if (!answered.length && send.threadId) answered = [await findLatestInboundOfThread(ctx.db, send.threadId)].filter((m) => m !== undefined);
  for (const original of answered) {
    const local = splitAddress(original.fromAddress)?.local ?? original.fromAddress;
    if (NO_REPLY.test(local)) return `sent from ${original.fromAddress}`;
    const headers = original.rawPath ? await headerSection(ctx, original.rawPath) : '';
    const auto = headerValue(headers, 'auto-submitted');
    if (auto && auto.toLowerCase() !== 'no') return `Auto-Submitted: ${auto}`;
    const precedence = headerValue(headers, 'precedence');
    if (precedence && /^(?:bulk|list|junk)$/i.test(precedence)) return `Precedence: ${precedence}`;
  }
  return undefined;
}

async function headerSection(ctx: AppContext, rawPath: string): Promise<string> {
  let head = '';
  try {
    for await (const chunk of ctx.blobs.stream(rawPath)) {
      head += (chunk as Buffer).toString('latin1');
      const end = head.search(/\r?\n\r?\n/);
      if (end >= 0) return head.slice(0, end);
      if (head.length >= HEADER_BYTES) break;
    }
  } catch {
    // A source gone meanwhile: nothing to read.
  }
  return head.slice(0, HEADER_BYTES);
}

/** The first value of header `name` (lowercase) in a header section, unfolded and trimmed. */
function headerValue(headers: string, name: string): string | undefined {
  const unfolded = headers.replace(/\r?\n[ \t]+/g, ' ');
  for (const line of unfolded.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === name)
      return line
        .slice(colon + 1)
        .trim()
        .split(/[;\s]/)[0];
  }
  return undefined;
}

/**
 * The rules that read the inbox's mail, inside the send's transaction: approval (always, first
 * contact) and the thread budget. `earlier` are the content reasons; the result is every reason,
 * in HOLD_CODES order, and the recipients that are a first contact.
 */
export async function holdReasons(db: Db, ctx: AppContext, send: HoldCandidate, earlier: HoldReason[]): Promise<{ reasons: HoldReason[]; firstContacts: string[] }> {
  const reasons = [...earlier];
  const firstContacts: string[] = [];
  if (send.inbox.approval === 'always') reasons.push({ code: 'always', detail: 'the inbox holds every send for a person (sendPolicy.approval "always")' });
  if (send.inbox.approval === 'first_contact') {
    for (const address of new Set(send.recipients.map((a) => a.toLowerCase()))) if (!(await hasExchangedWith(db, send.inbox.id, address))) firstContacts.push(address);
    if (firstContacts.length) reasons.push({ code: 'first_contact', detail: `this inbox never exchanged mail with ${firstContacts.join(', ')} (sendPolicy.approval "first_contact")` });
  }
  if (send.threadId) {
    const limit = ctx.config.policy.thread_hourly_sends;
    const since = new Date(ctx.clock.now().getTime() - 3_600_000).toISOString();
    const sends = await countSendsOfThreadSince(db, send.threadId, since);
    if (sends >= limit)
      reasons.push({ code: 'thread_budget', detail: `this inbox already sent ${sends} messages in thread ${send.threadId} within the last hour; [policy] thread_hourly_sends is ${limit}` });
  }
  return { reasons: reasons.sort(byCode), firstContacts };
}

// ---------------------------------------------------------------------------------------------
// Holding, releasing, canceling, expiring

export const holdJson = (reasons: HoldReason[]): string => JSON.stringify({ reasons } satisfies Hold);

/**
 * Inside the transaction that stores (or, for a scheduled send, turns) message `row` `held`:
 * the expiry job, message.held and the audit entry.
 */
export async function recordHold(tx: Tx, ctx: AppContext, row: MessageRow, reasons: HoldReason[]): Promise<void> {
  const now = ctx.clock.now();
  await enqueueJob(tx, now, {
    kind: HOLD_EXPIRY_JOB,
    payload: { messageId: row.id },
    maxAttempts: ctx.config.outbound.retry_schedule.length + 1,
    runAt: now.getTime() + ctx.config.policy.hold_expiry,
  });
  await recordEvent(tx, ctx, row.accountId, 'message.held', messageView(row, await attachmentMetaFor(ctx, row.id)));
  await recordAudit(ctx, tx, row.accountId, SYSTEM_ACTOR, 'message.held', row.id, { inboxId: row.inboxId, reasons });
}

/** A scheduled message due now turns `held` (releaseIn): its recipients waiting become `held`. */
export async function holdScheduledIn(
  tx: Tx,
  ctx: AppContext,
  row: MessageRow,
  list: RecipientOutcome[],
  reasons: HoldReason[],
  write: (list: RecipientOutcome[], status: string) => Promise<unknown>,
): Promise<void> {
  const held = list.map((r) => (r.status === 'scheduled' ? { ...r, status: 'held', response: null } : r));
  await write(held, 'held');
  const hold = holdJson(reasons);
  await updateMessageHold(tx, row.id, hold);
  await recordHold(tx, ctx, { ...row, status: 'held', recipients: JSON.stringify(held), hold }, reasons);
}

/** 409 NOT_HELD: release applies only to held mail. */
export const notHeld = (id: string, status: string) => new AppError('NOT_HELD', `message ${id} is ${status}; only a held message can be released`);

/**
 * POST /messages/{id}/release of an outbound held send: in one transaction the suppression list
 * is read again, the send is counted against the inbox and account budgets (429 leaves it held),
 * it turns `queued` with its delivery jobs, the expiry job is retired and message.released is
 * audited with `actor`. 409 NOT_HELD when it is no longer held.
 */
export async function releaseHeldSend(ctx: AppContext, accountId: string, id: string, actor: Actor): Promise<Message> {
  await ctx.store.transaction(async (tx) => {
    const row = await heldRow(tx, accountId, id);
    const inbox = await findInboxById(tx, row.inboxId);
    if (!inbox || inbox.status !== 'active') throw new AppError('INBOX_SUSPENDED', `inbox ${inbox?.address ?? row.inboxId} is suspended and cannot send`);
    let list = JSON.parse(row.recipients) as RecipientOutcome[];
    const suppressed = await suppressedAmong(
      tx,
      accountId,
      list.filter((r) => r.status === 'held').map((r) => r.address),
    );
    list = list.map((r) => (r.status === 'held' && suppressed.has(r.address.toLowerCase()) ? { ...r, status: 'suppressed', response: SUPPRESSED_RESPONSE } : r));
    const pending = list.filter((r) => r.status === 'held').map((r) => r.address);
    if (!pending.length) throw allSuppressed(list.map((r) => r.address));
    const now = ctx.clock.now();
    const hold = JSON.parse(row.hold ?? '{"reasons":[]}') as Hold;
    // A send held when it was scheduled has no source yet: it goes back to `scheduled` and its
    // release job (due at its time, or now if that has passed) builds, counts and queues it,
    // without judging it again. Any other held send is counted and queued now.
    const scheduled = row.rawPath === null && row.sendAt !== null;
    const status = scheduled ? 'scheduled' : 'queued';
    if (!scheduled) await countSend(tx, ctx, inbox);
    list = list.map((r) => (r.status === 'held' ? { ...r, status, response: null } : r));
    // Only while it is still held: a second release or a cancel at the same moment finds it changed.
    if ((await writeMessageState(tx, ctx, row, list, status, true)) === 'stale') throw notHeld(id, 'no longer held');
    await updateMessageHold(tx, id, JSON.stringify({ ...hold, released: true } satisfies Hold));
    if (scheduled) await requeueRelease(tx, ctx, row, now);
    else await enqueueDeliveries(tx, ctx, now, row.id, await planDelivery(ctx, pending));
    await retireQueuedJobsOfMessage(tx, HOLD_EXPIRY_JOB, id, now, 'released');
    await recordAudit(ctx, tx, accountId, actor, 'message.released', id, { inboxId: row.inboxId, reasons: hold.reasons });
  });
  ctx.notify('jobs');
  return getMessage(ctx, accountId, id);
}

/**
 * The release job of a scheduled send released by a person: its first one (queued when it was
 * scheduled, with the To and Cc display names) is retired, or did nothing at its time while the
 * send was held; a new one with the same payload is due at the send time, or now.
 */
async function requeueRelease(tx: Tx, ctx: AppContext, row: MessageRow, now: Date): Promise<void> {
  const stored = await findNewestJobPayloadOfMessage(tx, RELEASE_JOB, row.id);
  const bare = (json: string) => (JSON.parse(json) as string[]).map((address) => ({ name: null, address }));
  const payload: ReleasePayload = stored ? (JSON.parse(stored) as ReleasePayload) : { messageId: row.id, to: bare(row.toAddresses), cc: bare(row.ccAddresses) };
  await retireQueuedJobsOfMessage(tx, RELEASE_JOB, row.id, now, 'released by a person: queued again');
  await scheduleRelease(tx, ctx, now, payload, new Date(Math.max(Date.parse(row.sendAt!), now.getTime())));
}

async function heldRow(tx: Tx, accountId: string, id: string): Promise<MessageRow> {
  const row = await findMessageById(tx, id);
  if (!row || row.accountId !== accountId) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} not found`);
  if (row.status !== 'held' || row.direction !== 'outbound') throw notHeld(id, row.status);
  return row;
}

/**
 * Inside `tx`: a held or scheduled message `row` becomes `canceled` (its waiting recipients too),
 * its release and expiry jobs are retired, message.canceled recorded and audited with `actor`.
 */
export async function cancelHeldOrScheduledIn(tx: Tx, ctx: AppContext, row: MessageRow, actor: Actor, response: string): Promise<void> {
  const list = (JSON.parse(row.recipients) as RecipientOutcome[]).map((r) => (r.status === row.status ? { ...r, status: 'canceled', response } : r));
  if ((await writeMessageState(tx, ctx, row, list, 'canceled', true)) === 'stale') {
    throw new AppError('NOT_CANCELABLE', `message ${row.id} changed meanwhile; read it again`);
  }
  const now = ctx.clock.now();
  // A release job already running finds the message canceled and does nothing.
  await retireQueuedJobsOfMessage(tx, RELEASE_JOB, row.id, now, 'canceled');
  await retireQueuedJobsOfMessage(tx, HOLD_EXPIRY_JOB, row.id, now, 'canceled');
  await recordAudit(ctx, tx, row.accountId, actor, 'message.canceled', row.id, { inboxId: row.inboxId, was: row.status });
}

/** The expiry job: a send still held after `[policy] hold_expiry` is canceled by the system. */
export async function expireHoldIn(tx: Tx, ctx: AppContext, messageId: string): Promise<void> {
  const row = await findMessageById(tx, messageId);
  if (row?.status !== 'held' || row.direction !== 'outbound') return;
  await cancelHeldOrScheduledIn(tx, ctx, row, SYSTEM_ACTOR, 'canceled: nobody released it within [policy] hold_expiry');
}
