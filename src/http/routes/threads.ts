// /inboxes/:inboxId/threads and /threads (most recent activity first, with the message list
// filters), /threads/:id (with a page of its messages, oldest first; PATCH marks every message).
// Beyond the spec (PRODUCT.md), for agents that read conversations.
import type { AppContext } from '../../context.ts';
import { getThread, THREAD_PAGE, updateThread } from '../../domain/mail/messages.ts';
import { accountWideInbox } from '../../domain/accounts/apikeys.ts';
import { parsePage } from '../../domain/pagination.ts';
import { listThreads } from '../../domain/mail/threads.ts';
import type { Routes } from '../routes.ts';
import { parseInput, parseQuery } from '../validate.ts';
import { ListFilterQuery, UpdateMarksBody } from './messages.ts';

export function registerThreadRoutes(r: Routes, ctx: AppContext): void {
  r.get('/inboxes/:inboxId/threads', async (req) => ({
    status: 200,
    body: await listThreads(ctx, req.principal.accountId, req.params.inboxId, { ...parsePage(req.query), ...parseQuery(ListFilterQuery, req.query) }),
  }));
  r.get('/threads', async (req) => ({
    status: 200,
    body: await listThreads(ctx, req.principal.accountId, accountWideInbox(req.principal), { ...parsePage(req.query), ...parseQuery(ListFilterQuery, req.query) }),
  }));
  r.get('/threads/:id', async (req) => ({ status: 200, body: await getThread(ctx, req.principal.accountId, req.params.id, parsePage(req.query, THREAD_PAGE)) }));
  r.patch('/threads/:id', async (req) => ({
    status: 200,
    body: await updateThread(ctx, req.principal.accountId, req.params.id, parseInput(UpdateMarksBody, await req.json())),
  }));
}
