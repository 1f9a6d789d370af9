// /lists: allow and block lists for receiving and sending (create, list, delete). Rules in
// src/domain/inboxes/lists.ts.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { createListEntry, deleteListEntry, LIST_DIRECTIONS, LIST_KINDS, listListEntries } from '../../domain/inboxes/lists.ts';
import { parsePage } from '../../domain/pagination.ts';
import type { Routes } from '../routes.ts';
import { headerSafe, parseInput, parseQuery } from '../validate.ts';
import { keyActor } from '../../domain/audit/audit.ts';
import { inboxFilterFor } from '../../domain/accounts/apikeys.ts';

export const CreateListEntryBody = z.strictObject({
  direction: z.enum(LIST_DIRECTIONS),
  kind: z.enum(LIST_KINDS),
  /** An address or a domain; checked (and lowercased) by the domain rules. */
  entry: headerSafe(320),
  inboxId: z.string().max(100).nullable().optional(),
  /** Receive allow entries only (default true there): the sender must be authenticated. */
  requireAuth: z.boolean().optional(),
});

export const ListEntryQuery = z.object({
  direction: z.enum(LIST_DIRECTIONS).optional(),
  kind: z.enum(LIST_KINDS).optional(),
  inboxId: z.string().max(100).optional(),
});

export function registerListRoutes(r: Routes, ctx: AppContext): void {
  r.post('/lists', async (req) => {
    const { entry, created } = await createListEntry(ctx, req.principal.accountId, parseInput(CreateListEntryBody, await req.json()), keyActor(req.principal.keyId));
    // An entry that exists already is answered as it is (200), not added twice.
    return { status: created ? 201 : 200, body: entry };
  });
  r.get('/lists', async (req) => {
    const query = parseQuery(ListEntryQuery, req.query);
    // A key limited to some inboxes reads only its inbox's own entries.
    if (req.principal.inboxIds) Object.assign(query, await inboxFilterFor(ctx, req.principal, query.inboxId));
    return { status: 200, body: await listListEntries(ctx, req.principal.accountId, { ...parsePage(req.query), ...query }) };
  });
  r.delete('/lists/:id', async (req) => {
    await deleteListEntry(ctx, req.principal.accountId, req.params.id, keyActor(req.principal.keyId));
    return { status: 204 };
  });
}
