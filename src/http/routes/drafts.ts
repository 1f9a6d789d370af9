// /inboxes/:inboxId/drafts (create, list), /drafts/:id (get, update, delete) and
// /drafts/:id/send (202 Message; the draft is gone). Rules in src/domain/sending/drafts.ts.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { createDraft, deleteDraft, draftTag, getDraft, listDrafts, sendDraft, updateDraft, type Draft } from '../../domain/sending/drafts.ts';
import { parsePage } from '../../domain/pagination.ts';
import type { Routes } from '../routes.ts';
import { headerSafe, parseInput } from '../validate.ts';
import { addressList, attachmentIds, ListUnsubscribe, SendAt } from './sending.ts';

const id = z.string().min(1, 'must not be empty (null clears it)').max(100).nullable().optional();

/** A send body with every field optional (null clears one on update), plus inReplyTo. */
export const DraftBody = z.strictObject({
  to: addressList.optional(),
  cc: addressList.optional(),
  bcc: addressList.optional(),
  subject: headerSafe(998).nullable().optional(),
  bodyText: z.string().nullable().optional(),
  bodyHtml: z.string().nullable().optional(),
  threadId: id,
  inReplyTo: id,
  attachmentIds: attachmentIds.optional(),
  sendAt: SendAt,
});

/** POST /drafts/:id/send: `sendAt` here replaces the draft's (null sends now). */
export const SendDraftBody = z.strictObject({ sendAt: SendAt, listUnsubscribe: ListUnsubscribe });

/** A draft with its version as ETag, which POST /drafts/{id}/send takes back as If-Match. */
const withTag = (status: number, draft: Draft) => ({ status, body: draft, headers: { etag: draftTag(draft.updatedAt) } });

export function registerDraftRoutes(r: Routes, ctx: AppContext): void {
  r.post('/inboxes/:inboxId/drafts', async (req) => withTag(201, await createDraft(ctx, req.principal.accountId, req.params.inboxId, parseInput(DraftBody, await req.json()))));
  r.get('/inboxes/:inboxId/drafts', async (req) => ({ status: 200, body: await listDrafts(ctx, req.principal.accountId, req.params.inboxId, parsePage(req.query)) }));
  r.get('/drafts/:id', async (req) => withTag(200, await getDraft(ctx, req.principal.accountId, req.params.id)));
  r.patch('/drafts/:id', async (req) => withTag(200, await updateDraft(ctx, req.principal.accountId, req.params.id, parseInput(DraftBody, await req.json()))));
  r.delete('/drafts/:id', async (req) => {
    await deleteDraft(ctx, req.principal.accountId, req.params.id);
    return { status: 204 };
  });
  r.post('/drafts/:id/send', async (req) => {
    const ifMatch = req.headers['if-match'];
    const body = parseInput(SendDraftBody, await req.json());
    return { status: 202, body: await sendDraft(ctx, req.principal.accountId, req.params.id, body, { ifMatch: typeof ifMatch === 'string' ? ifMatch : undefined }) };
  });
}
