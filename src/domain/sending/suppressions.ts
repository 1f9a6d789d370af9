// The suppression list (PRODUCT.md "Outbound policy"): addresses of an account that no send
// attempts. An entry comes from a person or an agent (POST /suppressions, reason `manual`), a
// hard bounce of a recipient (`bounce`: an RCPT 5xx or a failed DSN, written by
// writeMessageState in the transaction that records the bounce), or an ARF complaint
// (`complaint`, src/domain/inbound/reports.ts). Every send passes queueOutbound
// (src/domain/sending/sending.ts) and a scheduled one its release (scheduled.ts): a suppressed
// recipient gets the recipient status `suppressed` and is not attempted; with nobody left the
// send is 422 RECIPIENTS_SUPPRESSED and nothing is stored.
//
// Addresses are stored lowercase and compared that way (PRODUCT.md: addresses compare
// case-insensitively).
import type { AppContext } from '../../context.ts';
import {
  countSuppressionsOfAccount,
  deleteSuppression,
  insertSuppression,
  findSuppression,
  listSuppressedAmong,
  listSuppressionsOfAccount,
  type SuppressionRow,
} from '../../store/repo/suppressions.ts';
import type { Db, Tx } from '../../store/client.ts';
import { normalizeRecipient } from '../addresses.ts';
import { AppError } from '../errors.ts';
import type { Page, PageResult } from '../pagination.ts';
import { isoNow } from '../time.ts';
import { CLI_ACTOR, recordAudit, SYSTEM_ACTOR, type Actor } from '../audit/audit.ts';

export const SUPPRESSION_REASONS = ['manual', 'bounce', 'complaint', 'unsubscribe'] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

export interface Suppression {
  address: string;
  reason: SuppressionReason;
  createdAt: string;
  /** The message whose bounce or complaint added the entry (absent for manual entries, or once that message is deleted). */
  messageId?: string;
}

const view = (r: SuppressionRow): Suppression => ({
  address: r.address,
  reason: r.reason as SuppressionReason,
  createdAt: r.createdAt,
  ...(r.messageId ? { messageId: r.messageId } : {}),
});

/** An address as the list keys it: a valid address, lowercase; 400 naming `field` otherwise. */
export const suppressionKey = (field: string, raw: string): string => normalizeRecipient(field, raw).toLowerCase();

/**
 * POST /suppressions: adds `address` (reason `manual`). An address already on the list is
 * answered as it is, reason and time unchanged: `created` false (200 rather than 201).
 */
export async function addSuppression(ctx: AppContext, accountId: string, address: string, actor: Actor = CLI_ACTOR): Promise<{ entry: Suppression; created: boolean }> {
  const key = suppressionKey('address', address);
  return ctx.store.transaction(async (tx) => {
    const row: SuppressionRow = { accountId, address: key, reason: 'manual', messageId: null, createdAt: isoNow(ctx.clock) };
    if (await insertSuppression(tx, row)) {
      await recordAudit(ctx, tx, accountId, actor, 'suppression.added', key, { reason: 'manual' });
      return { entry: view(row), created: true };
    }
    return { entry: view((await findSuppression(tx, accountId, key))!), created: false };
  });
}

/** GET /suppressions: newest first; `address` narrows it to that address (any case). */
export async function listSuppressions(ctx: AppContext, accountId: string, opts: Page & { address?: string }): Promise<PageResult<Suppression>> {
  const address = opts.address === undefined ? undefined : suppressionKey('address', opts.address);
  const rows = await listSuppressionsOfAccount(ctx.db, accountId, { ...opts, address });
  const total = await countSuppressionsOfAccount(ctx.db, accountId, address);
  return { data: rows.map(view), total, limit: opts.limit, offset: opts.offset };
}

/** DELETE /suppressions/{address}: 404 SUPPRESSION_NOT_FOUND when the account has no entry for it. */
export async function removeSuppression(ctx: AppContext, accountId: string, address: string, actor: Actor = CLI_ACTOR): Promise<void> {
  // The address names the entry in the path: one that is no address is on no list.
  let key: string;
  try {
    key = suppressionKey('address', address);
  } catch {
    throw new AppError('SUPPRESSION_NOT_FOUND', 'that address is not on the suppression list');
  }
  await ctx.store.transaction(async (tx) => {
    if (!(await deleteSuppression(tx, accountId, key))) throw new AppError('SUPPRESSION_NOT_FOUND', `${key} is not on the suppression list`);
    await recordAudit(ctx, tx, accountId, actor, 'suppression.removed', key);
  });
}

/**
 * Inside `tx` (the transaction that records the bounce or complaint): puts `addresses` on the
 * account's list. One already there keeps its entry (a manual one stays manual).
 */
export async function suppressIn(ctx: AppContext, tx: Tx, accountId: string, addresses: string[], reason: SuppressionReason, messageId: string | null, at: string): Promise<void> {
  for (const address of new Set(addresses.map((a) => a.toLowerCase()))) {
    if (await insertSuppression(tx, { accountId, address, reason, messageId, createdAt: at })) await recordAudit(ctx, tx, accountId, SYSTEM_ACTOR, 'suppression.added', address, { reason, messageId });
  }
}

/** Which of `addresses` the account suppresses, lowercase. */
export async function suppressedAmong(db: Db, accountId: string, addresses: string[]): Promise<Set<string>> {
  return new Set(await listSuppressedAmong(db, accountId, [...new Set(addresses.map((a) => a.toLowerCase()))]));
}

/** The response a suppressed recipient's outcome carries. */
export const SUPPRESSED_RESPONSE = 'not attempted: the address is on the suppression list of this account (GET /suppressions)';

/** 422 RECIPIENTS_SUPPRESSED: no recipient of a send is left once the suppressed ones are taken out. */
export const allSuppressed = (addresses: string[]) =>
  new AppError(
    'RECIPIENTS_SUPPRESSED',
    `every recipient is on the suppression list of this account: ${addresses.map((a) => a.toLowerCase()).join(', ')}; nothing was sent (GET /suppressions, DELETE /suppressions/{address})`,
  );
