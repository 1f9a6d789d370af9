// AppError → SMTP reply: the SMTP side of "one error type, two transports". smtp-server sends
// `err.responseCode` and `err.message`; the RFC 3463 enhanced status code leads the message.
import type { AppContext } from '../context.ts';
import { isAppError, type ErrorCode } from '../domain/errors.ts';
import { errorFields } from '../log.ts';
import { SpoolFullError } from '../domain/inbound/spool.ts';

export interface SmtpReplyError extends Error {
  responseCode: number;
}

export function smtpReply(code: number, enhanced: string, text: string): SmtpReplyError {
  const err = new Error(`${enhanced} ${text}`) as SmtpReplyError;
  err.responseCode = code;
  return err;
}

/** 552 5.3.4: the message is over smtp.max_message_bytes (after DATA: the client sent it all). */
export const messageTooLarge = (maxBytes: number) => smtpReply(552, '5.3.4', `message exceeds the maximum size of ${maxBytes} bytes`);

/** 452 4.3.1: over smtp.memory_budget while other transactions hold memory; the sender retries later. */
export const tooMuchInProgress = () => smtpReply(452, '4.3.1', 'too much mail in progress, try again later');

/** Reply code and enhanced status (RFC 3463) for each domain error that reaches SMTP. */
const REPLIES: Partial<Record<ErrorCode, [number, string]>> = {
  INBOX_NOT_FOUND: [550, '5.1.1'], // bad destination mailbox address
  INBOX_SUSPENDED: [550, '5.2.1'], // mailbox disabled, not accepting messages
  FORBIDDEN: [550, '5.7.1'], // delivery not authorized (relay denied)
  INVALID_ADDRESS: [553, '5.1.3'], // bad destination mailbox address syntax
  VALIDATION_ERROR: [554, '5.6.0'], // other or undefined media error
  PAYLOAD_TOO_LARGE: [552, '5.3.4'], // message too big for system
  RATE_LIMITED: [451, '4.7.1'],
  // Submission: the inbox's daily limit resets at midnight UTC; a client retrying later succeeds.
  DAILY_SEND_LIMIT_EXCEEDED: [451, '4.7.1'],
  HOURLY_SEND_LIMIT_EXCEEDED: [451, '4.7.1'],
  // Submission to an address a send-block list refuses (src/domain/inboxes/lists.ts): a permanent refusal.
  RECIPIENT_BLOCKED: [550, '5.7.1'],
  // Submission to an address on the account's suppression list: a permanent refusal too.
  RECIPIENTS_SUPPRESSED: [550, '5.7.1'],
  // The account's storage quota (src/domain/accounts/quotas.ts): mailbox full, the sender retries later.
  QUOTA_EXCEEDED: [452, '4.2.2'],
};

/**
 * The reply for an error thrown while handling a command. Anything unexpected is a temporary
 * local error (451 4.3.0): the sender keeps the message and retries, nothing is lost.
 */
export function replyFor(err: unknown): SmtpReplyError {
  // 4.3.1: mail system full (RFC 3463); the sender keeps the message and retries.
  if (err instanceof SpoolFullError) return smtpReply(451, '4.3.1', err.message);
  if (isAppError(err)) {
    const r = REPLIES[err.code];
    if (r) return smtpReply(r[0], r[1], err.message);
  }
  return smtpReply(451, '4.3.0', 'local error in processing, try again later');
}

/**
 * The reply for a message that was not taken, logged: an unexpected failure (a 451 that no
 * domain rule chose) at error level with its stack, a refusal by a rule as an ordinary event.
 */
export function refuseMessage(ctx: AppContext, err: unknown, session: string, what: 'smtp message' | 'submission'): SmtpReplyError {
  const reply = replyFor(err);
  if (reply.responseCode === 451 && !isAppError(err)) ctx.log.error(`${what} not taken`, { session, ...errorFields(err) });
  else ctx.log.info(`${what} refused`, { session, reply: reply.message });
  return reply;
}
