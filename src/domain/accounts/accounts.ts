// Accounts: every API resource belongs to one. Created by the CLI (and on first start).
import { asc, eq } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import { accounts } from '../../db/schema.ts';
import { newId } from '../../ids.ts';
import { isoNow } from '../time.ts';

export type Account = typeof accounts.$inferSelect;

export async function createAccount(ctx: AppContext, name: string): Promise<Account> {
  const row: Account = { id: newId('acc'), name, createdAt: isoNow(ctx.clock) };
  await ctx.db.insert(accounts).values(row).run();
  return row;
}

export function listAccounts(ctx: AppContext): Promise<Account[]> {
  return ctx.db.select().from(accounts).orderBy(asc(accounts.createdAt)).all();
}

/** The oldest account, created as "default" when there is none. */
export async function defaultAccount(ctx: AppContext): Promise<{ account: Account; created: boolean }> {
  const first = await ctx.db.select().from(accounts).orderBy(asc(accounts.createdAt)).limit(1).get();
  if (first) return { account: first, created: false };
  return { account: await createAccount(ctx, 'default'), created: true };
}

export function getAccount(ctx: AppContext, id: string): Promise<Account | undefined> {
  return ctx.db.select().from(accounts).where(eq(accounts.id, id)).get();
}
