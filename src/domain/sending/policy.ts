// POST /inboxes/{id}/messages/check and the MCP tool check_message (PRODUCT.md "Outbound
// policy"): what a send with this body would meet, in the order a send meets it — the send
// lists (blocked), the suppression list (suppressed), the holds for a person (hold) — with
// nothing stored and nothing sent. The same rules as queueOutbound (sending.ts) and holds.ts.
import type { AppContext } from '../../context.ts';
import { findLastMessageOfThread } from '../../store/repo/outbound.ts';
import { AppError } from '../errors.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import { refusedRecipient } from '../inboxes/lists.ts';
import { getAttachmentRows } from '../mail/attachments.ts';
import { findThreadRow } from '../mail/threads.ts';
import { contentReasons, holdReasons, type HoldReason } from './holds.ts';
import { parseSendAt } from './send-at.ts';
import { MAX_RECIPIENTS, parseRecipient, type SendInput } from './sending.ts';
import { suppressedAmong } from './suppressions.ts';

export type RecipientDecision = 'send' | 'suppressed' | 'blocked' | 'hold';

export interface SendCheck {
  /** The send would be accepted (202): no recipient blocked, at least one not suppressed, the inbox active. */
  allowed: boolean;
  /** Accepted, it would be held for a person (`reasons`). */
  held: boolean;
  reasons: HoldReason[];
  recipients: Array<{ address: string; decision: RecipientDecision }>;
}

export async function checkSend(ctx: AppContext, accountId: string, inboxId: string, input: SendInput): Promise<SendCheck> {
  const inbox = await findInboxRow(ctx, accountId, inboxId);
  if (input.sendAt) parseSendAt(ctx, input.sendAt);
  const parse = (field: string, list: string[] | undefined) => (list ?? []).map((r, i) => parseRecipient(`${field}[${i}]`, r).address);
  const addresses = [...new Map([...parse('to', input.to), ...parse('cc', input.cc), ...parse('bcc', input.bcc)].map((a) => [a.toLowerCase(), a])).values()];
  if (addresses.length > MAX_RECIPIENTS) throw new AppError('VALIDATION_ERROR', `\`to\`: at most ${MAX_RECIPIENTS} recipients (to, cc and bcc together) per message`);
  let threadId: string | undefined;
  let inReplyTo: string | null = null;
  if (input.threadId !== undefined) {
    const thread = await findThreadRow(ctx, accountId, input.threadId);
    if (thread.inboxId !== inbox.id) throw new AppError('THREAD_NOT_FOUND', `thread ${input.threadId} not found in inbox ${inbox.id}`);
    threadId = thread.id;
    inReplyTo = (await findLastMessageOfThread(ctx.db, thread.id))?.messageIdHeader ?? null;
  }
  const files = await getAttachmentRows(ctx, accountId, input.attachmentIds ?? []);

  const blocked = new Set<string>();
  for (const a of addresses) if ((await refusedRecipient(ctx, accountId, inbox.id, [a])) !== undefined) blocked.add(a);
  const suppressed = await suppressedAmong(ctx.db, accountId, addresses);
  const left = addresses.filter((a) => !blocked.has(a) && !suppressed.has(a.toLowerCase()));
  const candidate = { inbox, recipients: left, subject: input.subject ?? '', bodyText: input.bodyText ?? null, bodyHtml: input.bodyHtml ?? null, files, inReplyTo, threadId };
  const { reasons, firstContacts } = left.length ? await holdReasons(ctx.db, ctx, candidate, await contentReasons(ctx, candidate)) : { reasons: [], firstContacts: [] };
  // first_contact holds the send for its new addresses; any other reason holds it for everyone.
  const wholeMessage = reasons.some((r) => r.code !== 'first_contact');
  const decision = (a: string): RecipientDecision => {
    if (blocked.has(a)) return 'blocked';
    if (suppressed.has(a.toLowerCase())) return 'suppressed';
    return wholeMessage || firstContacts.includes(a.toLowerCase()) ? 'hold' : 'send';
  };
  const allowed = inbox.status === 'active' && !blocked.size && left.length > 0;
  return { allowed, held: allowed && reasons.length > 0, reasons, recipients: addresses.map((address) => ({ address, decision: decision(address) })) };
}
