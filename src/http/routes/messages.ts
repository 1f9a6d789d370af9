// /inboxes/:inboxId/messages (list), /messages/:id (get, delete), /messages/:id/raw (RFC 5322
// source). Sending (POST /inboxes/:inboxId/messages) lives in sending.ts.
import type { AppContext } from '../../context.ts';
import { deleteMessage, getMessage, listMessages, MAX_WAIT_SECONDS, rawMessage, waitForMessages } from '../../domain/messages.ts';
import { intParam, parsePage } from '../../domain/pagination.ts';
import type { Routes } from '../routes.ts';

export function registerMessageRoutes(r: Routes, ctx: AppContext): void {
  r.get('/inboxes/:inboxId/messages', async (req) => {
    const opts = { ...parsePage(req.query), status: req.query.get('status'), after: req.query.get('after') };
    const wait = intParam('wait', req.query.get('wait'), 0, 0, MAX_WAIT_SECONDS);
    if (!wait) return { status: 200, body: listMessages(ctx, req.principal.accountId, req.params.inboxId, opts) };
    // The client may leave while it waits: stop waiting then.
    const socket = req.raw.socket;
    let left!: () => void;
    const gone = new Promise<void>((resolve) => (left = resolve));
    if (socket.destroyed) left();
    socket.once('close', left);
    try {
      return { status: 200, body: await waitForMessages(ctx, req.principal.accountId, req.params.inboxId, opts, wait, gone) };
    } finally {
      // A keep-alive connection carries many requests: no listener per request may stay on it.
      socket.off('close', left);
    }
  });
  r.get('/messages/:id', (req) => ({ status: 200, body: getMessage(ctx, req.principal.accountId, req.params.id) }));
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
