// Idempotency records: the first POST with a given Idempotency-Key stores its response; a
// repeat with the same request within the window gets that response back, a repeat with a
// different request is a conflict. Rows are written before the work starts, with one
// INSERT … ON CONFLICT, so two concurrent requests with one key cannot both run, on one node
// or several.
import type { Tx } from '../../store/client.ts';
import type { AppContext } from '../../context.ts';
import {
  claimIdempotencyKey,
  deleteIdempotencyKey,
  deleteIdempotencyKeysCreatedBefore,
  findIdempotencyKey,
  updateIdempotentResponse,
  updateIdempotentResponsesOfResources,
} from '../../store/repo/idempotency.ts';
import { AppError } from '../errors.ts';

export type IdempotencyStart = { kind: 'new' } | { kind: 'replay'; status: number; body: string };

export function beginIdempotent(ctx: AppContext, accountId: string, key: string, requestHash: string): Promise<IdempotencyStart> {
  const now = ctx.clock.now();
  const cutoff = new Date(now.getTime() - ctx.config.limits.idempotency_window).toISOString();
  return ctx.store.transaction(async (tx): Promise<IdempotencyStart> => {
    // Claim first, read after: reading first would let two concurrent requests (two nodes on
    // one database) both find no record and both run.
    if (await claimIdempotencyKey(tx, accountId, key, requestHash, now.toISOString(), cutoff)) return { kind: 'new' } as const;
    const row = (await findIdempotencyKey(tx, accountId, key))!;
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
  if (status >= 500) await deleteIdempotencyKey(ctx.db, accountId, key);
  else await updateIdempotentResponse(ctx.db, accountId, key, { responseStatus: status, responseBody: body, resourceId: resourceIdOf(body) });
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
  await updateIdempotentResponsesOfResources(tx, ids, gone.status, JSON.stringify({ error: { code: gone.code, message: gone.message, status: gone.status } }));
}

export async function sweepIdempotencyKeys(ctx: AppContext): Promise<number> {
  const cutoff = new Date(ctx.clock.now().getTime() - ctx.config.limits.idempotency_window).toISOString();
  return deleteIdempotencyKeysCreatedBefore(ctx.db, cutoff);
}
