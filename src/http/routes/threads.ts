// /inboxes/:inboxId/threads (most recent activity first) and /threads/:id (with its messages,
// oldest first). Beyond the spec (PRODUCT.md), for agents that read conversations.
import type { AppContext } from '../../context.ts';
import { getThread } from '../../domain/messages.ts';
import { parsePage } from '../../domain/pagination.ts';
import { listThreads } from '../../domain/threads.ts';
import type { Routes } from '../routes.ts';

export function registerThreadRoutes(r: Routes, ctx: AppContext): void {
  r.get('/inboxes/:inboxId/threads', (req) => ({
    status: 200,
    body: listThreads(ctx, req.principal.accountId, req.params.inboxId, parsePage(req.query)),
  }));
  r.get('/threads/:id', (req) => ({ status: 200, body: getThread(ctx, req.principal.accountId, req.params.id) }));
}
