// When a send leaves: the `sendAt` of a send, reply, forward or draft send (PRODUCT.md "Drafts
// and scheduled send"), checked, and the release job queued in the send's transaction. What a
// release does at its time is src/domain/sending/scheduled.ts.
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { enqueueJob } from '../../jobs/table.ts';
import type { MailAddress } from '../../outbound/mime.ts';
import { AppError } from '../errors.ts';

/** Job kind of the release of a scheduled message. */
export const RELEASE_JOB = 'release';

/** How far ahead a message may be scheduled (PRODUCT.md: at most 30 days). */
export const MAX_SCHEDULE_DAYS = 30;

/** What a release job carries: the message, and its To and Cc with display names (the row keeps addresses only). */
export interface ReleasePayload {
  messageId: string;
  to: MailAddress[];
  cc: MailAddress[];
  /** One-click unsubscribe headers (src/domain/sending/unsubscribe.ts). */
  listUnsubscribe?: boolean;
}

// RFC 3339 (the ISO 8601 profile the API uses everywhere): a date, a time and a zone.
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** `sendAt` as a time: ISO 8601 with a zone, in the future, at most MAX_SCHEDULE_DAYS ahead; else 400 naming the field. */
export function parseSendAt(ctx: AppContext, raw: string, field = 'sendAt'): Date {
  const m = DATE_TIME.exec(raw);
  const ms = m ? Date.parse(raw.replace(' ', 'T')) : NaN;
  // Date.parse rolls 2030-02-31 over to March: the fields must be what they say.
  const daysInMonth = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]), 0)).getUTCDate() : 0;
  if (!m || Number.isNaN(ms) || Number(m[2]) < 1 || Number(m[2]) > 12 || Number(m[3]) < 1 || Number(m[3]) > daysInMonth || Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6] ?? 0) > 59) {
    throw new AppError('VALIDATION_ERROR', `\`${field}\`: must be an ISO 8601 date-time with a time zone, e.g. 2030-01-31T09:00:00Z; got ${JSON.stringify(raw).slice(0, 60)}`);
  }
  const now = ctx.clock.now();
  const at = new Date(ms);
  if (ms <= now.getTime()) throw new AppError('VALIDATION_ERROR', `\`${field}\`: must be in the future (it is ${now.toISOString()} now)`);
  const latest = new Date(now.getTime() + MAX_SCHEDULE_DAYS * 86_400_000);
  if (at > latest) throw new AppError('VALIDATION_ERROR', `\`${field}\`: must be at most ${MAX_SCHEDULE_DAYS} days ahead (until ${latest.toISOString()})`);
  return at;
}

/** Inside the send's transaction: the release job, due at `sendAt`. */
export async function scheduleRelease(tx: Tx, ctx: AppContext, now: Date, payload: ReleasePayload, sendAt: Date): Promise<void> {
  // Retried like a send when building the source fails (a full disk).
  await enqueueJob(tx, now, { kind: RELEASE_JOB, payload, maxAttempts: ctx.config.outbound.retry_schedule.length + 1, runAt: sendAt.getTime() });
}
