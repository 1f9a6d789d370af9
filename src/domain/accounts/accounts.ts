// Accounts: every API resource belongs to one. Created by the CLI (and on first start).
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { findAccountById, findOldestAccount, insertAccount, listAccountsOldestFirst, type AccountRow } from '../../store/repo/accounts.ts';
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
