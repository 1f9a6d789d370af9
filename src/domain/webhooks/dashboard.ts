// Actions only the dashboard offers over HTTP (the spec puts replay "in the dashboard" and the
// public API has no replay endpoint): each is the CLI's operator action, scoped to the
// account of the API key that asks.
import type { AppContext } from '../../context.ts';
import { AppError } from '../errors.ts';
import { replayDelivery } from './webhook-fanout.ts';
import { getDeliveryAttempt } from './webhooks.ts';

/**
 * Replays a failed webhook delivery of `accountId` as one new attempt. A delivery of another
 * account is reported exactly like a missing one (404 NOT_FOUND), as everywhere in the API.
 */
export async function replayAccountDelivery(ctx: AppContext, accountId: string, attemptId: string): ReturnType<typeof replayDelivery> {
  const attempt = await getDeliveryAttempt(ctx, attemptId);
  if (!attempt || attempt.accountId !== accountId) throw new AppError('NOT_FOUND', `delivery ${attemptId} not found`);
  return replayDelivery(ctx, attemptId);
}
