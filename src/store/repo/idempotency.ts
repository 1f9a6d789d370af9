// Storage of idempotency records: reads and writes the `idempotency_keys` table for
// src/domain/accounts/idempotency.ts, which decides what a repeated request gets back.
import { and, eq, inArray, lt } from 'drizzle-orm';
import { idempotencyKeys } from '../schema.ts';
import { changes, type Db } from '../store.ts';

export type IdempotencyRow = typeof idempotencyKeys.$inferSelect;

/** A stored response, and the id of the object it shows (null: none). */
export interface IdempotentResponse {
  responseStatus: number;
  responseBody: string;
  resourceId: string | null;
}

const keyIs = (accountId: string, key: string) => and(eq(idempotencyKeys.accountId, accountId), eq(idempotencyKeys.key, key));

/**
 * Claims `key` of `accountId` for a request: answers true when this call inserted the record,
 * or took over one created before `staleBefore` (its stored response is cleared); false when a
 * record within the window holds the key.
 */
export async function claimIdempotencyKey(db: Db, accountId: string, key: string, requestHash: string, createdAt: string, staleBefore: string): Promise<boolean> {
  // The insert claims the key; the unique key decides between concurrent requests (on a shared
  // database a SELECT first would let both see nothing and the second insert fail with a 500).
  // A claim older than the window is taken over by the same guarded statement.
  const claimed = await db
    .insert(idempotencyKeys)
    .values({ accountId, key, requestHash, createdAt })
    .onConflictDoUpdate({
      target: [idempotencyKeys.accountId, idempotencyKeys.key],
      set: { requestHash, createdAt, responseStatus: null, responseBody: null, resourceId: null },
      setWhere: lt(idempotencyKeys.createdAt, staleBefore),
    })
    .run();
  return changes(claimed) === 1;
}

export function findIdempotencyKey(db: Db, accountId: string, key: string): Promise<IdempotencyRow | undefined> {
  return db.select().from(idempotencyKeys).where(keyIs(accountId, key)).get();
}

export async function deleteIdempotencyKey(db: Db, accountId: string, key: string): Promise<void> {
  await db.delete(idempotencyKeys).where(keyIs(accountId, key)).run();
}

export async function updateIdempotentResponse(db: Db, accountId: string, key: string, response: IdempotentResponse): Promise<void> {
  await db.update(idempotencyKeys).set(response).where(keyIs(accountId, key)).run();
}

/** Replaces every stored response that shows one of `resourceIds` (they no longer name it). */
export async function updateIdempotentResponsesOfResources(db: Db, resourceIds: string[], responseStatus: number, responseBody: string): Promise<void> {
  await db.update(idempotencyKeys).set({ responseStatus, responseBody, resourceId: null }).where(inArray(idempotencyKeys.resourceId, resourceIds)).run();
}

/** Deletes the records created before `cutoff`; answers how many. */
export async function deleteIdempotencyKeysCreatedBefore(db: Db, cutoff: string): Promise<number> {
  return changes(await db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, cutoff)).run());
}
