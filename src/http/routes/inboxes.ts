// /inboxes: create, list, get, update (display name and send policy), delete.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { APPROVALS, createInbox, deleteInbox, getInbox, listInboxes, updateInboxSettings } from '../../domain/inboxes/inboxes.ts';
import { keyActor } from '../../domain/audit/audit.ts';
import { SCREENING_MODES } from '../../domain/screening/hold.ts';
import { parsePage } from '../../domain/pagination.ts';
import { listInboxesOfKey } from '../../domain/accounts/apikeys.ts';
import type { Routes } from '../routes.ts';
import { headerSafe, parseInput } from '../validate.ts';

export const CreateInboxBody = z.strictObject({
  address: z.string().max(254, 'must be at most 254 characters').optional(),
  displayName: headerSafe(200).nullable().optional(),
  domainId: z.string().max(100).optional(),
});

/** Largest hourly send limit accepted: the column is a 32-bit count in practice. */
const MAX_HOURLY_SEND_LIMIT = 1_000_000_000;

export const UpdateInboxBody = z.strictObject({
  displayName: headerSafe(200).nullable().optional(),
  sendPolicy: z
    .strictObject({
      approval: z.enum(APPROVALS).default('none'),
      hourlySendLimit: z.number().int().min(0).max(MAX_HOURLY_SEND_LIMIT).nullable().default(null),
    })
    .optional(),
  screening: z.enum(SCREENING_MODES).optional(),
});

export function registerInboxRoutes(r: Routes, ctx: AppContext): void {
  r.post('/inboxes', async (req) => {
    const body = parseInput(CreateInboxBody, await req.json());
    return { status: 201, body: await createInbox(ctx, req.principal.accountId, body) };
  });
  r.get('/inboxes', async (req) => ({
    status: 200,
    // A key limited to some inboxes sees only those.
    body: req.principal.inboxIds ? await listInboxesOfKey(ctx, req.principal, parsePage(req.query)) : await listInboxes(ctx, req.principal.accountId, parsePage(req.query)),
  }));
  r.get('/inboxes/:id', async (req) => ({ status: 200, body: await getInbox(ctx, req.principal.accountId, req.params.id) }));
  r.patch('/inboxes/:id', async (req) => {
    const body = parseInput(UpdateInboxBody, await req.json());
    return { status: 200, body: await updateInboxSettings(ctx, req.principal.accountId, req.params.id, body, keyActor(req.principal.keyId)) };
  });
  r.delete('/inboxes/:id', async (req) => {
    await deleteInbox(ctx, req.principal.accountId, req.params.id);
    return { status: 204 };
  });
}
