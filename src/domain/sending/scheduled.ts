// Scheduled send (PRODUCT.md "Drafts and scheduled send"): a send, reply, forward or draft send
// with `sendAt` stores its message in `scheduled` and one `release` job in the job table, due at
// `sendAt`. When the job runs, the message is built and signed (its Date is the send time), then
// in ONE transaction it is counted against the daily limit of that day, turned `queued` and its
// delivery jobs are queued: from there the normal pipeline goes on (sending → sent | …).
//
//   scheduled → queued → …            at sendAt
//   scheduled → canceled              POST /messages/{id}/cancel (event message.canceled)
//   scheduled → failed                at sendAt: inbox suspended, daily limit reached, or every
//                                     recipient refused by a send list or put on the suppression
//                                     list since (those recipients `failed` / `suppressed`; event
//                                     message.bounced with status failed, as for any failure)
//
// Crash and restart: the job is durable and only claimable once due, so nothing leaves early;
// the release commits only while the message is still `scheduled`, so a rerun after a crash (or
// a cancel that won the race) never queues it twice.
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { messageAttachmentRows } from '../mail/attachments.ts';
import { AppError } from '../errors.ts';
import { countSend } from '../inboxes/inboxes.ts';
import { refusedRecipient } from '../inboxes/lists.ts';
import { findMessageRow, getMessage, type Message, type RecipientOutcome } from '../mail/messages.ts';
import { enqueueDeliveries, findOutboundRow, planDelivery, renderSource, writeMessageState, writeSourceIn, type RenderedSource } from './sending.ts';
import { utcDay } from '../time.ts';
import { suppressedAmong, SUPPRESSED_RESPONSE } from './suppressions.ts';
import { type ReleasePayload } from './send-at.ts';
import { cancelHeldOrScheduledIn, contentReasons, holdReasons, holdScheduledIn, type Hold, type HoldReason } from './holds.ts';
import type { Actor } from '../audit/audit.ts';
import { findInboxById } from '../../store/repo/inboxes.ts';
import { findMessageById } from '../../store/repo/messages.ts';
import { setMessageSource } from '../../store/repo/outbound.ts';

/**
 * Builds and stores the source of a scheduled message for its release (Date: now). Undefined
 * when there is nothing to release: the message was deleted or canceled meanwhile.
 */
export async function renderRelease(ctx: AppContext, payload: ReleasePayload): Promise<{ source: RenderedSource; found: HoldReason[] } | undefined> {
  const row = await findOutboundRow(ctx, payload.messageId);
  if (!row || row.status !== 'scheduled') return undefined;
  const inbox = await findInboxById(ctx.db, row.inboxId);
  if (!inbox) return undefined;
  const files = await messageAttachmentRows(ctx, row.id);
  // The holds that read the message (secrets, an answer to automatic mail) are judged at the send time too.
  const found = await contentReasons(ctx, { inbox, recipients: [], subject: row.subject, bodyText: row.bodyText, bodyHtml: row.bodyHtml, files, inReplyTo: row.inReplyTo, threadId: row.threadId });
  return { source: await renderSource(ctx, inbox, row, payload, files, ctx.clock.now()), found };
}

/** Every recipient still waiting gets `status` and `response`. */
const settle = (list: RecipientOutcome[], status: string, response: string | null) => list.map((r) => (r.status === 'scheduled' ? { ...r, status, response } : r));

/**
 * In the release job's finishing transaction: the scheduled message becomes `queued` with its
 * delivery jobs (counted against today's limit), or `failed` when it cannot be sent now. Does
 * nothing when it is no longer `scheduled`. Returns whether delivery jobs were queued.
 */
export async function releaseIn(tx: Tx, ctx: AppContext, messageId: string, source: RenderedSource, found: HoldReason[] = []): Promise<boolean> {
  const row = await findMessageById(tx, messageId);
  if (!row || row.status !== 'scheduled') return false;
  const inbox = await findInboxById(tx, row.inboxId);
  if (!inbox) return false;
  // The source (its size feeds the account's usage row, a trigger) is written last, after
  // whatever locks the inbox's row (the send count, the status counters): every transaction
  // takes an inbox before the usage row, so two of them never wait on each other (PostgreSQL
  // found sends and releases deadlocked the other way round).
  const withSource = async <T>(result: T): Promise<T> => {
    // A message deleted since it was read (PostgreSQL: another node) gets no source rows.
    if (await setMessageSource(tx, row.id, { rawPath: source.rawPath, size: source.size })) await writeSourceIn(tx, ctx, source);
    return result;
  };
  const fresh = { ...row, rawPath: source.rawPath, size: source.size };
  let list = JSON.parse(row.recipients) as RecipientOutcome[];
  if (inbox.status !== 'active') {
    await writeMessageState(tx, ctx, fresh, settle(list, 'failed', `not sent: inbox ${inbox.address} was suspended at the send time`), 'failed');
    return withSource(false);
  }
  // A send list may have gained an entry since the message was scheduled.
  const refused = new Set<string>();
  for (const r of list) if (r.status === 'scheduled' && (await refusedRecipient(ctx, row.accountId, row.inboxId, [r.address])) !== undefined) refused.add(r.address);
  list = list.map((r) => (refused.has(r.address) ? { ...r, status: 'failed', response: 'not sent: refused by the send allow/block lists at the send time' } : r));
  // So may the suppression list: checked at the send time, not only when it was scheduled.
  const suppressed = await suppressedAmong(
    tx,
    row.accountId,
    list.filter((r) => r.status === 'scheduled').map((r) => r.address),
  );
  list = list.map((r) => (r.status === 'scheduled' && suppressed.has(r.address.toLowerCase()) ? { ...r, status: 'suppressed', response: SUPPRESSED_RESPONSE } : r));
  const pending = list.filter((r) => r.status === 'scheduled').map((r) => r.address);
  if (!pending.length) {
    await writeMessageState(tx, ctx, fresh, list, 'failed');
    return withSource(false);
  }
  // Holds for a person (src/domain/sending/holds.ts) on what holds at the send time: held, not
  // counted, not queued. A send a person released (held when it was scheduled) is not judged again.
  const released = row.hold !== null && (JSON.parse(row.hold) as Hold).released === true;
  const { reasons } = released
    ? { reasons: [] }
    : await holdReasons(
        tx,
        ctx,
        { inbox, recipients: pending, subject: row.subject, bodyText: row.bodyText, bodyHtml: row.bodyHtml, files: [], inReplyTo: row.inReplyTo, threadId: row.threadId },
        found,
      );
  if (reasons.length) {
    await holdScheduledIn(tx, ctx, fresh, list, reasons, (held, status) => writeMessageState(tx, ctx, fresh, held, status));
    return withSource(false);
  }
  try {
    await countSend(tx, ctx, inbox);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    // The inbox's daily limit keeps its long-standing wording; the hourly and account budgets say theirs.
    const inboxDaily = err.code === 'DAILY_SEND_LIMIT_EXCEEDED' && err.message.startsWith('inbox ');
    const reason = inboxDaily
      ? `not sent: inbox ${inbox.address} had reached its daily send limit of ${inbox.dailySendLimit} on ${utcDay(ctx.clock)} (UTC) at the send time`
      : `not sent at the send time: ${err.message}`;
    await writeMessageState(tx, ctx, fresh, settle(list, 'failed', reason), 'failed');
    return withSource(false);
  }
  await writeMessageState(tx, ctx, fresh, settle(list, 'queued', null), 'queued');
  await enqueueDeliveries(tx, ctx, ctx.clock.now(), row.id, await planDelivery(ctx, pending));
  return withSource(true);
}

/**
 * POST /messages/{id}/cancel: a `scheduled` or `held` message becomes `canceled`, its release and
 * expiry jobs are retired, message.canceled recorded and audited with `actor`, in one
 * transaction. 409 NOT_CANCELABLE otherwise.
 */
export async function cancelMessage(ctx: AppContext, accountId: string, id: string, actor: Actor): Promise<Message> {
  await findMessageRow(ctx, accountId, id);
  await ctx.store.transaction(async (tx) => {
    const row = await findMessageById(tx, id);
    if (!row || row.accountId !== accountId) throw new AppError('MESSAGE_NOT_FOUND', `message ${id} not found`);
    if (row.status !== 'scheduled' && !(row.status === 'held' && row.direction === 'outbound')) {
      throw new AppError('NOT_CANCELABLE', `message ${id} is ${row.status}; only a scheduled message (sent with sendAt, not yet due) or a held send can be canceled`);
    }
    await cancelHeldOrScheduledIn(tx, ctx, row, actor, row.status === 'held' ? 'canceled while held for a person' : 'canceled before its send time');
  });
  return getMessage(ctx, accountId, id);
}
