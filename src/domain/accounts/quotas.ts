// Per-account quotas (`[limits]`, docs/security.md): one tenant cannot fill the disk or the tables
// for everybody. Each check counts cheaply: stored bytes are a counter the database keeps
// (account_usage, migration 0013), the rest are counts bounded by their own quota. A check runs
// before the write, so requests racing past it can go over by what they add; the next is refused.
import type { AppContext } from '../../context.ts';
import type { Db } from '../../store/client.ts';
import { findAccountById, findAccountUsageBytes } from '../../store/repo/accounts.ts';
import { countUnsentUploadsOfAccount } from '../../store/repo/attachments.ts';
import { countDraftsOfAccount } from '../../store/repo/drafts.ts';
import { countInboxesOfAccount } from '../../store/repo/inboxes.ts';
import { AppError } from '../errors.ts';

/** Bytes the account may still store before `[limits] storage_bytes_per_account` (0 when full). */
export async function storageRoom(ctx: AppContext, accountId: string): Promise<number> {
  return Math.max(0, ctx.config.limits.storage_bytes_per_account - (await findAccountUsageBytes(ctx.db, accountId)));
}

export const storageFull = (ctx: AppContext) =>
  new AppError('QUOTA_EXCEEDED', `the account stores ${ctx.config.limits.storage_bytes_per_account} bytes, its quota (limits.storage_bytes_per_account); delete messages to make room`);

/**
 * Refuses once the account's stored bytes reach its quota: inbound mail at RCPT (SMTP 452 4.2.2,
 * src/smtp/replies.ts), sends and uploads (403 QUOTA_EXCEEDED).
 */
export async function assertStorageRoom(ctx: AppContext, accountId: string): Promise<void> {
  assertStoredBelowQuota(ctx, await findAccountUsageBytes(ctx.db, accountId));
}

/** assertStorageRoom for an account whose stored bytes were read already (with the inbox at RCPT). */
export function assertStoredBelowQuota(ctx: AppContext, storedBytes: number): void {
  if (storedBytes >= ctx.config.limits.storage_bytes_per_account) throw storageFull(ctx);
}

/** POST /inboxes: 403 INBOX_LIMIT_REACHED at `[limits] inboxes_per_account`. */
export async function assertInboxRoom(ctx: AppContext, accountId: string): Promise<void> {
  // The account's own limit (mailroom accounts set-limits --inboxes) before the config's.
  const max = (await findAccountById(ctx.db, accountId))?.inboxLimit ?? ctx.config.limits.inboxes_per_account;
  if ((await countInboxesOfAccount(ctx.db, accountId)) >= max) {
    throw new AppError('INBOX_LIMIT_REACHED', `the account has ${max} inboxes, its limit (limits.inboxes_per_account, or its own set by support); delete one first`);
  }
}

/** POST /inboxes/{id}/drafts: 403 QUOTA_EXCEEDED at `[limits] drafts_per_account`. */
export async function assertDraftRoom(ctx: AppContext, accountId: string, db: Db = ctx.db): Promise<void> {
  const max = ctx.config.limits.drafts_per_account;
  if ((await countDraftsOfAccount(db, accountId)) >= max) {
    throw new AppError('QUOTA_EXCEEDED', `the account has ${max} drafts, its quota (limits.drafts_per_account); send or delete some first`);
  }
}

/** POST /attachments: 403 QUOTA_EXCEEDED at `[limits] uploads_per_account` uploads not sent yet. */
export async function assertUploadRoom(ctx: AppContext, accountId: string): Promise<void> {
  const max = ctx.config.limits.uploads_per_account;
  if ((await countUnsentUploadsOfAccount(ctx.db, accountId)) >= max) {
    throw new AppError('QUOTA_EXCEEDED', `the account has ${max} uploads no message was sent with, its quota (limits.uploads_per_account); send them first`);
  }
}
