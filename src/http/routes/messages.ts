// /inboxes/:inboxId/messages and /messages (lists, with filters), /messages/:id (get, update
// read state and labels, delete), /messages/:id/raw (RFC 5322 source). Sending, replying and
// forwarding (POST) live in sending.ts.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { DIRECTIONS } from '../../domain/mail/filters.ts';
import { LABEL_PATTERN, LABEL_RULE } from '../../domain/mail/labels.ts';
import { deleteMessage, findMessageRow, getMessage, listMessages, MAX_WAIT_SECONDS, MESSAGE_STATUSES, rawMessage, updateMessage, waitForMessages } from '../../domain/mail/messages.ts';
import { accountWideInbox, requireScope, type Principal } from '../../domain/accounts/apikeys.ts';
import { keyActor } from '../../domain/audit/audit.ts';
import { releaseHeldInbound } from '../../domain/screening/hold.ts';
import { notHeld, releaseHeldSend } from '../../domain/sending/holds.ts';
import { intParam, parsePage } from '../../domain/pagination.ts';
import type { Routes } from '../routes.ts';
import { parseInput, parseQuery } from '../validate.ts';

export const Label = z.string().regex(LABEL_PATTERN, { error: (iss) => `label ${JSON.stringify(iss.input).slice(0, 80)} must be ${LABEL_RULE}` });

/** The filters of every message and thread list (src/domain/mail/filters.ts). */
export const ListFilterQuery = z.object({
  q: z.string().optional(),
  label: Label.optional(),
  unread: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional(),
  direction: z.enum(DIRECTIONS).optional(),
  status: z.enum(MESSAGE_STATUSES).optional(),
});

const labelList = z.array(Label).max(100, 'must list at most 100 labels');

/** PATCH /messages/{id} and PATCH /threads/{id}. */
export const UpdateMarksBody = z.strictObject({
  unread: z.boolean().optional(),
  addLabels: labelList.optional(),
  removeLabels: labelList.optional(),
});

/** Held mail is listed (`status=held`) and read only with the `review` scope: it was held from the agent's key. */
function heldFilter(principal: Principal, status: string | undefined): void {
  if (status === 'held') requireScope(principal, 'review', false);
}

export function registerMessageRoutes(r: Routes, ctx: AppContext): void {
  r.get('/inboxes/:inboxId/messages', async (req) => {
    const opts = { ...parsePage(req.query), ...parseQuery(ListFilterQuery, req.query), after: req.query.get('after') };
    heldFilter(req.principal, opts.status);
    const wait = intParam('wait', req.query.get('wait'), 0, 0, MAX_WAIT_SECONDS);
    if (!wait) return { status: 200, body: await listMessages(ctx, req.principal.accountId, req.params.inboxId, opts) };
    // The client may leave while it waits: stop waiting then.
    const socket = req.raw.socket;
    let left!: () => void;
    const gone = new Promise<void>((resolve) => (left = resolve));
    if (socket.destroyed) left();
    socket.once('close', left);
    try {
      return { status: 200, body: await waitForMessages(ctx, req.principal, req.params.inboxId, opts, wait, gone) };
    } finally {
      // A keep-alive connection carries many requests: no listener per request may stay on it.
      socket.off('close', left);
    }
  });
  r.get('/messages', async (req) => {
    const filters = parseQuery(ListFilterQuery, req.query);
    heldFilter(req.principal, filters.status);
    return { status: 200, body: await listMessages(ctx, req.principal.accountId, accountWideInbox(req.principal), { ...parsePage(req.query), ...filters }) };
  });
  r.get('/messages/:id', async (req) => ({ status: 200, body: await getMessage(ctx, req.principal.accountId, req.params.id, req.principal) }));
  // Held mail (PRODUCT.md "Guarding agents"): inbound mail held by screening is delivered
  // (src/domain/screening/hold.ts), a held outbound send is queued (src/domain/sending/holds.ts).
  r.post('/messages/:id/release', async (req) => {
    const row = await findMessageRow(ctx, req.principal.accountId, req.params.id);
    if (row.status !== 'held') throw notHeld(row.id, row.status);
    const release = row.direction === 'inbound' ? releaseHeldInbound : releaseHeldSend;
    return { status: 200, body: await release(ctx, req.principal.accountId, row.id, keyActor(req.principal.keyId)) };
  });
  r.patch('/messages/:id', async (req) => ({
    status: 200,
    body: await updateMessage(ctx, req.principal.accountId, req.params.id, parseInput(UpdateMarksBody, await req.json())),
  }));
  r.get('/messages/:id/raw', async (req) => ({
    status: 200,
    stream: await rawMessage(ctx, req.principal.accountId, req.params.id),
    headers: {
      // RFC 5322 source: mail clients open it; browsers must not render it.
      'Content-Type': 'message/rfc822',
      'Content-Disposition': `attachment; filename="${req.params.id.replace(/[^\w.-]/g, '_')}.eml"`,
      'X-Content-Type-Options': 'nosniff',
    },
  }));
  r.delete('/messages/:id', async (req) => {
    await deleteMessage(ctx, req.principal.accountId, req.params.id);
    return { status: 204 };
  });
}
