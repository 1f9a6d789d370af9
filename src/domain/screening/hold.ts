// Hold mode (PRODUCT.md "Screening of inbound mail"): in an inbox whose screening is `hold`, a
// message the screener gives `review` is stored with status `held` and `message.held` recorded
// instead of `message.received`, so nothing reaches the agent (webhook, stream, long-poll,
// wait_for_message; lists show it only with `status=held` to keys with the `review` scope) until
// a person releases it: releaseHeldInbound, behind POST /messages/{id}/release (scope `review`).
// Every hold and release is an audit entry written in the transaction that makes it.
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { sharedReadsOf } from '../../store/store.ts';
import { updateMessageStatusIf } from '../../store/repo/messages.ts';
import { recordAudit, SYSTEM_ACTOR, type Actor } from '../audit/audit.ts';
import { AppError } from '../errors.ts';
import { recordEvent } from '../events/events.ts';
import type { InboxRow } from '../inboxes/inboxes.ts';
import { findMessageRow, getMessage, messageView, type Message, type MessageRow } from '../mail/messages.ts';
import { attachmentMetaForMany } from '../mail/attachments.ts';
import type { ScreenFor, Screening } from './screen.ts';
import { listDomainNamesOfAccounts } from '../../store/repo/domains.ts';

export const SCREENING_MODES = ['off', 'monitor', 'hold'] as const;
export type ScreeningMode = (typeof SCREENING_MODES)[number];

/** The inbox's own setting, else `[screening] mode`. */
export const screeningModeOf = (ctx: AppContext, inbox: Pick<InboxRow, 'screening'>): ScreeningMode => (inbox.screening as ScreeningMode | null) ?? ctx.config.screening.mode;

/** Whether a message screened `screening` is held in an inbox screening in `mode`. */
export const isHeld = (mode: ScreeningMode, screening: Screening | null): boolean => mode === 'hold' && screening?.verdict === 'review';

/** Records the hold of a message just stored held (inside its transaction): the event and the audit entry. */
export async function recordHold(tx: Tx, ctx: AppContext, row: MessageRow, event: unknown, screening: Screening): Promise<void> {
  await recordEvent(tx, ctx, row.accountId, 'message.held', event);
  await recordAudit(ctx, tx, row.accountId, SYSTEM_ACTOR, 'message.held', row.id, {
    direction: 'inbound',
    inboxId: row.inboxId,
    score: screening.score,
    reasons: [...new Set(screening.reasons.map((r) => r.code))],
  });
}

/**
 * Releases a held inbound message: status `received`, then `message.received` as on arrival,
 * and the `message.released` audit entry naming `actor`, all in one transaction. 409 NOT_HELD
 * when it is not held (released already, or never held).
 */
export async function releaseHeldInbound(ctx: AppContext, accountId: string, id: string, actor: Actor): Promise<Message> {
  // Attachments never change: read before the transaction, outside its connection.
  const atts = (await attachmentMetaForMany(ctx, [id])).get(id) ?? [];
  await ctx.store.transaction(async (tx) => {
    const row = await findMessageRow(ctx, accountId, id, tx);
    const now = ctx.clock.now().toISOString();
    if (row.direction !== 'inbound' || !(await updateMessageStatusIf(tx, id, 'held', 'received', now))) {
      throw new AppError('NOT_HELD', `message ${id} is not held`);
    }
    const view = messageView({ ...row, status: 'received', updatedAt: now }, atts);
    await recordEvent(tx, ctx, accountId, 'message.received', { ...view, hasAttachments: atts.length > 0, receivedAt: row.createdAt });
    await recordAudit(ctx, tx, accountId, actor, 'message.released', id, { direction: 'inbound', inboxId: row.inboxId });
  });
  ctx.notify('jobs');
  return getMessage(ctx, accountId, id);
}

/** An account's domain names, read once for the messages screened at the same moment (sharedReadsOf). */
const readDomainNames = sharedReadsOf((ctx: AppContext, accountIds: string[]) => listDomainNamesOfAccounts(ctx.db, accountIds));

/**
 * Whom a message for `recipients` is screened for: their addresses, and the domains of those
 * addresses and of their accounts; undefined when every recipient's inbox screens nothing.
 */
export async function screenTargets(ctx: AppContext, recipients: InboxRow[]): Promise<ScreenFor | undefined> {
  const screened = recipients.filter((r) => screeningModeOf(ctx, r) !== 'off');
  if (!screened.length) return undefined;
  const domains = new Set(screened.map((r) => r.address.slice(r.address.lastIndexOf('@') + 1).toLowerCase()));
  for (const accountId of new Set(screened.map((r) => r.accountId))) {
    for (const d of (await readDomainNames(ctx, accountId)) ?? []) domains.add(d.toLowerCase());
  }
  return { ownDomains: [...domains], ownAddresses: screened.map((r) => r.address.toLowerCase()) };
}
