// POST /inboxes/:inboxId/messages: send a message; POST /messages/:id/reply and /forward:
// answer or pass on a stored one. Each answers 202 with the Message in `queued` (`scheduled`
// with `sendAt`); delivery happens in the background (jobs/handlers/send.ts) and is reported on
// the message. POST /messages/:id/cancel stops a scheduled one (src/domain/sending/scheduled.ts).
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { keyActor } from '../../domain/audit/audit.ts';
import { forwardMessage, replyToMessage } from '../../domain/sending/replies.ts';
import { cancelMessage } from '../../domain/sending/scheduled.ts';
import { checkSend } from '../../domain/sending/policy.ts';
import { MAX_RECIPIENTS, queueSend } from '../../domain/sending/sending.ts';
import type { Routes } from '../routes.ts';
import { headerSafe, parseInput } from '../validate.ts';

// Addresses end up in headers and SMTP commands: CR, LF and NUL are refused (400) before any
// address parsing; malformed addresses are 400 INVALID_ADDRESS from the domain rules.
const address = headerSafe(320);
export const addressList = z.array(address).max(MAX_RECIPIENTS, `must list at most ${MAX_RECIPIENTS} addresses`);
/** ISO 8601 date-time with a zone; the window (future, at most 30 days) is checked by the domain. */
export const SendAt = z.string().max(64, 'must be at most 64 characters').nullable().optional();
/** One-click unsubscribe headers (RFC 8058; src/domain/sending/unsubscribe.ts). */
export const ListUnsubscribe = z.boolean().optional();

export const SendMessageBody = z.strictObject({
  to: addressList.min(1, 'must list at least one recipient'),
  cc: addressList.optional(),
  bcc: addressList.optional(),
  // RFC 5322 §2.1.1: a line is at most 998 characters; the spec applies it to the subject.
  subject: headerSafe(998),
  bodyText: z.string().nullable().optional(),
  bodyHtml: z.string().nullable().optional(),
  threadId: z.string().max(100).optional(),
  attachmentIds: z.array(z.string().max(100)).max(100, 'must list at most 100 attachments').optional(),
  sendAt: SendAt,
  listUnsubscribe: ListUnsubscribe,
});

export const attachmentIds = z.array(z.string().max(100)).max(100, 'must list at most 100 attachments');

/** Recipients, subject and threading come from the original (src/domain/sending/replies.ts). */
export const ReplyBody = z.strictObject({
  bodyText: z.string().nullable().optional(),
  bodyHtml: z.string().nullable().optional(),
  attachmentIds: attachmentIds.optional(),
  replyAll: z.boolean().optional(),
  bcc: addressList.optional(),
  sendAt: SendAt,
  listUnsubscribe: ListUnsubscribe,
});

/** The note goes above the quoted original; the original's attachments are carried over. */
export const ForwardBody = z.strictObject({
  to: addressList.min(1, 'must list at least one recipient'),
  cc: addressList.optional(),
  bcc: addressList.optional(),
  bodyText: z.string().nullable().optional(),
  bodyHtml: z.string().nullable().optional(),
  sendAt: SendAt,
  listUnsubscribe: ListUnsubscribe,
});

export function registerSendingRoutes(r: Routes, ctx: AppContext): void {
  r.post('/inboxes/:inboxId/messages', async (req) => {
    const body = parseInput(SendMessageBody, await req.json());
    return { status: 202, body: await queueSend(ctx, req.principal.accountId, req.params.inboxId, body) };
  });
  // What a send would meet (lists, suppressions, holds), with nothing sent: src/domain/sending/policy.ts.
  r.post('/inboxes/:inboxId/messages/check', async (req) => ({
    status: 200,
    body: await checkSend(ctx, req.principal.accountId, req.params.inboxId, parseInput(SendMessageBody, await req.json())),
  }));
  r.post('/messages/:id/reply', async (req) => {
    const body = parseInput(ReplyBody, await req.json());
    return { status: 202, body: await replyToMessage(ctx, req.principal.accountId, req.params.id, body) };
  });
  r.post('/messages/:id/forward', async (req) => {
    const body = parseInput(ForwardBody, await req.json());
    return { status: 202, body: await forwardMessage(ctx, req.principal.accountId, req.params.id, body) };
  });
  r.post('/messages/:id/cancel', async (req) => ({ status: 200, body: await cancelMessage(ctx, req.principal.accountId, req.params.id, keyActor(req.principal.keyId)) }));
}
