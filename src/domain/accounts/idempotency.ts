// Idempotency records: the first POST with a given Idempotency-Key stores its response; a
// repeat with the same request within the window gets that response back, a repeat with a
// different request is a conflict. Rows are written before the work starts, with one
// INSERT … ON CONFLICT, so two concurrent requests with one key cannot both run, on one node
// or several.
import { and, eq, inArray, lt } from 'drizzle-orm';
import type { Tx } from '../../db/client.ts';
import type { AppContext } from '../../context.ts';
import { idempotencyKeys } from '../../db/schema.ts';
import { AppError } from '../errors.ts';
import { changes } from '../../store/store.ts';

export type IdempotencyStart = { kind: 'new' } | { kind: 'replay'; status: number; body: string };

export function beginIdempotent(ctx: AppContext, accountId: string, key: string, requestHash: string): Promise<IdempotencyStart> {
  const now = ctx.clock.now();
  const cutoff = new Date(now.getTime() - ctx.config.limits.idempotency_window).toISOString();
  return ctx.store.transaction(async (tx): Promise<IdempotencyStart> => {
    const where = and(eq(idempotencyKeys.accountId, accountId), eq(idempotencyKeys.key, key));
    // The insert claims the key; the unique key decides between concurrent requests (on a shared
    // database a SELECT first would let both see nothing and the second insert fail with a 500).
    // A claim older than the window is taken over by the same guarded statement.
    const claimed = await tx
      .insert(idempotencyKeys)
      .values({ accountId, key, requestHash, createdAt: now.toISOString() })
      .onConflictDoUpdate({
        target: [idempotencyKeys.accountId, idempotencyKeys.key],
        set: { requestHash, createdAt: now.toISOString(), responseStatus: null, responseBody: null, resourceId: null },
        setWhere: lt(idempotencyKeys.createdAt, cutoff),
      })
      .run();
    if (changes(claimed) === 1) return { kind: 'new' } as const;
    const row = (await tx.select().from(idempotencyKeys).where(where).get())!;
    if (row.requestHash !== requestHash) {
      throw new AppError('IDEMPOTENCY_KEY_REUSED', 'this Idempotency-Key was already used with a different request');
    }
    if (row.responseStatus === null || row.responseBody === null) {
      throw new AppError('IDEMPOTENCY_KEY_REUSED', 'a request with this Idempotency-Key is still in progress');
    }
    return { kind: 'replay', status: row.responseStatus, body: row.responseBody } as const;
  });
}

/** Stores the response; a server error is not stored, so the client may retry with the key. */
export async function finishIdempotent(ctx: AppContext, accountId: string, key: string, status: number, body: string): Promise<void> {
  const where = and(eq(idempotencyKeys.accountId, accountId), eq(idempotencyKeys.key, key));
  if (status >= 500) await ctx.db.delete(idempotencyKeys).where(where).run();
  else await ctx.db.update(idempotencyKeys).set({ responseStatus: status, responseBody: body, resourceId: resourceIdOf(body) }).where(where).run();
}

/** The `id` of the object a response shows, so deleting that object deletes this copy of it. */
function resourceIdOf(body: string): string | null {
  try {
    const id = (JSON.parse(body) as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}

/**
 * Replaces stored responses that show these resources (deleted messages) with a 409, inside
 * the deleting transaction: the copy of the content goes, and a repeat of the request still
 * does not run again (it would send the message a second time).
 */
export async function forgetIdempotentResponses(tx: Tx, ids: string[]): Promise<void> {
  if (!ids.length) return;
  const gone = new AppError('IDEMPOTENCY_KEY_REUSED', 'this Idempotency-Key was used for a message that has since been deleted');
  await tx.update(idempotencyKeys)
    .set({ responseStatus: gone.status, responseBody: JSON.stringify({ error: { code: gone.code, message: gone.message, status: gone.status } }), resourceId: null })
    .where(inArray(idempotencyKeys.resourceId, ids))
    .run();
}

export async function sweepIdempotencyKeys(ctx: AppContext): Promise<number> {
  const cutoff = new Date(ctx.clock.now().getTime() - ctx.config.limits.idempotency_window).toISOString();
  return changes(await ctx.db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, cutoff)).run());
}
