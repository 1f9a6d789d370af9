// Storage of the suppression list: reads and writes the `suppressions` table for
// src/domain/sending/suppressions.ts. Addresses arrive lowercase; the rules stay in the domain.
import { and, asc, count, desc, eq, type SQL } from 'drizzle-orm';
import { preparedQuery, preparedRows } from '../prepared.ts';
import { suppressions } from '../schema.ts';
import { changes, type Db } from '../store.ts';
import type { Window } from './inboxes.ts';

export type SuppressionRow = typeof suppressions.$inferSelect;

/** Adds the entry unless the account has one for that address already; returns whether it did. */
export async function insertSuppression(db: Db, row: SuppressionRow): Promise<boolean> {
  return changes(await db.insert(suppressions).values(row).onConflictDoNothing().run()) > 0;
}

export function findSuppression(db: Db, accountId: string, address: string): Promise<SuppressionRow | undefined> {
  return db
    .select()
    .from(suppressions)
    .where(and(eq(suppressions.accountId, accountId), eq(suppressions.address, address)))
    .get();
}

/** Which of `addresses` (lowercase) the account suppresses. */
export async function listSuppressedAmong(db: Db, accountId: string, addresses: string[]): Promise<string[]> {
  if (!addresses.length) return [];
  return (await preparedQuery(db, suppressedOf).all(accountId, JSON.stringify(addresses))).map(([address]) => address);
}

// Every send reads it in its transaction: a plain statement prepared once (src/store/prepared.ts),
// the addresses passed as one JSON array (an IN list of its own length made a new statement).
const suppressedOf = (db: Db) =>
  preparedRows<[accountId: string, addresses: string], [address: string]>(db, 'SELECT address FROM suppressions WHERE account_id = ? AND address IN (SELECT value FROM json_each(?))');

export async function deleteSuppression(db: Db, accountId: string, address: string): Promise<boolean> {
  return (
    changes(
      await db
        .delete(suppressions)
        .where(and(eq(suppressions.accountId, accountId), eq(suppressions.address, address)))
        .run(),
    ) > 0
  );
}

const where = (accountId: string, address: string | undefined): SQL | undefined => and(eq(suppressions.accountId, accountId), ...(address === undefined ? [] : [eq(suppressions.address, address)]));

/** A page of the account's entries, newest first (optionally the one of `address`). */
export function listSuppressionsOfAccount(db: Db, accountId: string, query: Window & { address?: string }): Promise<SuppressionRow[]> {
  return db.select().from(suppressions).where(where(accountId, query.address)).orderBy(desc(suppressions.createdAt), asc(suppressions.address)).limit(query.limit).offset(query.offset);
}

export async function countSuppressionsOfAccount(db: Db, accountId: string, address?: string): Promise<number> {
  return (await db.select({ n: count() }).from(suppressions).where(where(accountId, address)).get())!.n;
}
