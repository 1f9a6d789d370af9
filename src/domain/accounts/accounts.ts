// Accounts: every API resource belongs to one. Created by the CLI (and on first start).
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { findAccountById, findOldestAccount, insertAccount, listAccountsOldestFirst, updateAccountLimits, type AccountRow } from '../../store/repo/accounts.ts';
import { CLI_ACTOR, recordAudit } from '../audit/audit.ts';
import { AppError } from '../errors.ts';
import { isoNow } from '../time.ts';

export type Account = AccountRow;

export async function createAccount(ctx: AppContext, name: string): Promise<Account> {
  const row: Account = { id: newId('acc'), name, createdAt: isoNow(ctx.clock), dailySendLimit: null, inboxLimit: null, sendsToday: 0, sendsDay: null };
  await insertAccount(ctx.db, row);
  return row;
}

export function listAccounts(ctx: AppContext): Promise<Account[]> {
  return listAccountsOldestFirst(ctx.db);
}

/** The oldest account, created as "default" when there is none. */
export async function defaultAccount(ctx: AppContext): Promise<{ account: Account; created: boolean }> {
  const first = await findOldestAccount(ctx.db);
  if (first) return { account: first, created: false };
  return { account: await createAccount(ctx, 'default'), created: true };
}

export function getAccount(ctx: AppContext, id: string): Promise<Account | undefined> {
  return findAccountById(ctx.db, id);
}

/** Largest account limit accepted (the columns are 32-bit counts in practice). */
export const MAX_ACCOUNT_LIMIT = 1_000_000_000;

/**
 * `mailroom accounts set-limits` (a support action): the account's own daily send budget and
 * inbox count, in place of `[limits] account_daily_send_limit` and `inboxes_per_account`.
 */
export async function setAccountLimits(ctx: AppContext, id: string, limits: { daily?: number; inboxes?: number }): Promise<Account> {
  for (const [name, v] of Object.entries(limits)) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0 || v > MAX_ACCOUNT_LIMIT)) {
      throw new AppError('VALIDATION_ERROR', `\`--${name}\`: must be a whole number from 0 to ${MAX_ACCOUNT_LIMIT}, got ${JSON.stringify(v)}`);
    }
  }
  const values = { ...(limits.daily !== undefined ? { dailySendLimit: limits.daily } : {}), ...(limits.inboxes !== undefined ? { inboxLimit: limits.inboxes } : {}) };
  const row = await ctx.store.transaction(async (tx) => {
    const updated = Object.keys(values).length ? await updateAccountLimits(tx, id, values) : await findAccountById(tx, id);
    if (updated && Object.keys(values).length) await recordAudit(ctx, tx, id, CLI_ACTOR, 'account.limits_set', id, values);
    return updated;
  });
  if (!row) throw new AppError('NOT_FOUND', `account ${id} not found`);
  return row;
}
