// Accounts: every API resource belongs to one. Created by the CLI (and on first start).
import { asc, eq } from 'drizzle-orm';
import type { AppContext } from '../context.ts';
import { accounts } from '../db/schema.ts';
import { newId } from '../ids.ts';
import { isoNow } from './time.ts';

export type Account = typeof accounts.$inferSelect;

export function createAccount(ctx: AppContext, name: string): Account {
  const row: Account = { id: newId('acc'), name, createdAt: isoNow(ctx.clock) };
  ctx.db.insert(accounts).values(row).run();
  return row;
}

export function listAccounts(ctx: AppContext): Account[] {
  return ctx.db.select().from(accounts).orderBy(asc(accounts.createdAt)).all();
}

/** The oldest account, created as "default" when there is none. */
export function defaultAccount(ctx: AppContext): { account: Account; created: boolean } {
  const first = ctx.db.select().from(accounts).orderBy(asc(accounts.createdAt)).limit(1).get();
  if (first) return { account: first, created: false };
  return { account: createAccount(ctx, 'default'), created: true };
}

export function getAccount(ctx: AppContext, id: string): Account | undefined {
  return ctx.db.select().from(accounts).where(eq(accounts.id, id)).get();
}
