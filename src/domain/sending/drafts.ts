// Drafts (PRODUCT.md "Drafts and scheduled send"): a send body kept for later, every field
// optional, plus `inReplyTo` (a message of the inbox: sending the draft makes a reply, with its
// threading headers and thread, as POST /messages/{id}/reply does) and `sendAt`. Sending one
// goes through queueSend (src/domain/sending/sending.ts) and deletes the draft in the same transaction
// that stores the message: a draft is sent once, and a refused send leaves it as it was.
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { newId } from '../../ids.ts';
import { getAttachmentRows } from '../mail/attachments.ts';
import { assertDraftRoom } from '../accounts/quotas.ts';
import { AppError } from '../errors.ts';
import { findInboxRow } from '../inboxes/inboxes.ts';
import { findMessageRow, type Message } from '../mail/messages.ts';
import type { Page, PageResult } from '../pagination.ts';
import { replyOrigin, replyRecipients, replySubject } from './replies.ts';
import { parseSendAt } from './send-at.ts';
import { MAX_RECIPIENTS, parseRecipient, queueSend } from './sending.ts';
import { findThreadRow } from '../mail/threads.ts';
import {
  countDraftsOfInbox,
  deleteDraftRow,
  draftExists,
  findDraftById,
  insertDraft,
  listDraftAttachmentIds,
  listDraftsOfInbox,
  replaceDraftAttachments,
  updateDraftRow,
  type DraftRow,
} from '../../store/repo/drafts.ts';

/** The body of POST /inboxes/{id}/drafts and PATCH /drafts/{id}: null clears a field. */
export interface DraftInput {
  to?: string[];
  cc?: string[];
  bcc?: string[];
  subject?: string | null;
  bodyText?: string | null;
  bodyHtml?: string | null;
  threadId?: string | null;
  inReplyTo?: string | null;
  attachmentIds?: string[];
  sendAt?: string | null;
}

export interface Draft {
  id: string;
  inboxId: string;
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string | null;
  bodyText: string | null;
  bodyHtml: string | null;
  threadId: string | null;
  inReplyTo: string | null;
  attachmentIds: string[];
  sendAt: string | null;
  createdAt: string;
  updatedAt: string;
}

// ---- storage ---------------------------------------------------------------------------------

/** A new draft is inserted, an existing one overwritten; its attachment links change only when `attachmentIds` is given. */
async function writeDraft(tx: Tx, row: DraftRow, attachmentIds: string[] | undefined, isNew: boolean): Promise<void> {
  if (isNew) await insertDraft(tx, row);
  else await updateDraftRow(tx, row);
  if (attachmentIds !== undefined) await replaceDraftAttachments(tx, row.id, attachmentIds);
}

/** The entity tag of a draft's version (its updatedAt), as GET sends it and If-Match names it. */
export const draftTag = (updatedAt: string) => `"${updatedAt}"`;

/** True when an If-Match header value names this version (or `*`); weak tags compare alike. */
function ifMatches(header: string, updatedAt: string): boolean {
  return header.split(',').some((t) => {
    const tag = t.trim().replace(/^W\//, '');
    return tag === '*' || tag === draftTag(updatedAt);
  });
}

// ---- views and checks ------------------------------------------------------------------------

function draftView(row: DraftRow, attachmentIds: string[]): Draft {
  return {
    id: row.id,
    inboxId: row.inboxId,
    to: JSON.parse(row.toAddresses),
    cc: JSON.parse(row.ccAddresses),
    bcc: JSON.parse(row.bccAddresses),
    subject: row.subject,
    bodyText: row.bodyText,
    bodyHtml: row.bodyHtml,
    threadId: row.threadId,
    inReplyTo: row.inReplyTo,
    attachmentIds,
    sendAt: row.sendAt,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

async function findDraftRow(ctx: AppContext, accountId: string, id: string): Promise<DraftRow> {
  const row = await findDraftById(ctx.db, id);
  // Another account's draft is reported exactly like a missing one.
  if (!row || row.accountId !== accountId) throw new AppError('DRAFT_NOT_FOUND', `draft ${id} not found`);
  return row;
}

/** The message `inReplyTo` names, which must be one of the draft's inbox. */
async function originalIn(ctx: AppContext, accountId: string, inboxId: string, messageId: string) {
  const original = await findMessageRow(ctx, accountId, messageId);
  if (original.inboxId !== inboxId) throw new AppError('MESSAGE_NOT_FOUND', `message ${messageId} not found in inbox ${inboxId}`);
  return original;
}

/**
 * Checks the fields `input` sets, for a draft of `inboxId` whose result is `merged`: addresses
 * well-formed (INVALID_ADDRESS), at most MAX_RECIPIENTS, thread and replied message of the
 * inbox (404), attachments of the account (400), sendAt in the window (400).
 */
async function checkDraftInput(ctx: AppContext, accountId: string, inboxId: string, input: DraftInput, merged: DraftRow): Promise<void> {
  for (const field of ['to', 'cc', 'bcc'] as const) (input[field] ?? []).forEach((r, i) => parseRecipient(`${field}[${i}]`, r));
  const total = [merged.toAddresses, merged.ccAddresses, merged.bccAddresses].reduce((n, json) => n + (JSON.parse(json) as string[]).length, 0);
  if (total > MAX_RECIPIENTS) throw new AppError('VALIDATION_ERROR', `\`to\`: at most ${MAX_RECIPIENTS} recipients (to, cc and bcc together) per message`);
  if (input.threadId) {
    const thread = await findThreadRow(ctx, accountId, input.threadId);
    if (thread.inboxId !== inboxId) throw new AppError('THREAD_NOT_FOUND', `thread ${input.threadId} not found in inbox ${inboxId}`);
  }
  if (input.inReplyTo) await originalIn(ctx, accountId, inboxId, input.inReplyTo);
  if (merged.threadId && merged.inReplyTo && (await findMessageRow(ctx, accountId, merged.inReplyTo)).threadId !== merged.threadId) {
    throw new AppError('VALIDATION_ERROR', '`threadId`: a reply draft stays in the thread of `inReplyTo`; give one of them, or the thread of that message');
  }
  if (input.attachmentIds) await getAttachmentRows(ctx, accountId, input.attachmentIds);
  if (input.sendAt) parseSendAt(ctx, input.sendAt);
}

/** `row` with the fields `input` sets (an absent field stays, null clears). */
function merge(row: DraftRow, input: DraftInput, now: string): DraftRow {
  const list = (v: string[] | undefined, old: string) => (v === undefined ? old : JSON.stringify(v));
  const keep = <T>(v: T | undefined, old: T) => (v === undefined ? old : v);
  return {
    ...row,
    toAddresses: list(input.to, row.toAddresses),
    ccAddresses: list(input.cc, row.ccAddresses),
    bccAddresses: list(input.bcc, row.bccAddresses),
    subject: keep(input.subject, row.subject),
    bodyText: keep(input.bodyText, row.bodyText),
    bodyHtml: keep(input.bodyHtml, row.bodyHtml),
    threadId: keep(input.threadId, row.threadId),
    inReplyTo: keep(input.inReplyTo, row.inReplyTo),
    sendAt: keep(input.sendAt, row.sendAt),
    updatedAt: now,
  };
}

// ---- API -------------------------------------------------------------------------------------

/**
 * POST /inboxes/{id}/drafts. A reply draft (`inReplyTo`) without `to` or `subject` gets them as
 * a reply would: to the original's Reply-To (else From), subject `Re: <original>`.
 */
export async function createDraft(ctx: AppContext, accountId: string, inboxId: string, input: DraftInput): Promise<Draft> {
  const inbox = await findInboxRow(ctx, accountId, inboxId);
  const now = ctx.clock.now();
  const iso = now.toISOString();
  const filled = { ...input };
  if (input.inReplyTo) {
    const original = await originalIn(ctx, accountId, inbox.id, input.inReplyTo);
    if (input.to === undefined) filled.to = (await replyRecipients(ctx, original, inbox.address, false)).to;
    if (input.subject === undefined) filled.subject = replySubject(original.subject);
  }
  const empty: DraftRow = {
    id: newId('drf', now.getTime()),
    accountId,
    inboxId: inbox.id,
    toAddresses: '[]',
    ccAddresses: '[]',
    bccAddresses: '[]',
    subject: null,
    bodyText: null,
    bodyHtml: null,
    threadId: null,
    inReplyTo: null,
    sendAt: null,
    createdAt: iso,
    updatedAt: iso,
  };
  const row = merge(empty, filled, iso);
  await checkDraftInput(ctx, accountId, inbox.id, filled, row);
  const ids = [...new Set(filled.attachmentIds ?? [])];
  await ctx.store.transaction(async (tx) => {
    await assertDraftRoom(ctx, accountId, tx);
    await writeDraft(tx, row, ids, true);
  });
  return draftView(row, ids);
}

/** GET /inboxes/{id}/drafts: newest first. */
export async function listDrafts(ctx: AppContext, accountId: string, inboxId: string, page: Page): Promise<PageResult<Draft>> {
  await findInboxRow(ctx, accountId, inboxId);
  return ctx.store.transaction(async (tx) => {
    const rows = await listDraftsOfInbox(tx, inboxId, page.limit, page.offset);
    const total = await countDraftsOfInbox(tx, inboxId);
    const data: Draft[] = [];
    for (const r of rows) data.push(draftView(r, await listDraftAttachmentIds(tx, r.id)));
    return { data, total, ...page };
  });
}

export async function getDraft(ctx: AppContext, accountId: string, id: string): Promise<Draft> {
  const row = await findDraftRow(ctx, accountId, id);
  return draftView(row, await listDraftAttachmentIds(ctx.db, id));
}

/** PATCH /drafts/{id}: the given fields change (null clears one, [] empties a list). */
export async function updateDraft(ctx: AppContext, accountId: string, id: string, input: DraftInput): Promise<Draft> {
  const row = await findDraftRow(ctx, accountId, id);
  const next = merge(row, input, ctx.clock.now().toISOString());
  await checkDraftInput(ctx, accountId, row.inboxId, input, next);
  const ids = input.attachmentIds && [...new Set(input.attachmentIds)];
  const saved = await ctx.store.transaction(async (tx) => {
    // Deleted (or sent) since it was read: nothing to update.
    if (!(await findDraftById(tx, id))) return undefined;
    await writeDraft(tx, next, ids, false);
    return listDraftAttachmentIds(tx, id);
  });
  if (!saved) throw new AppError('DRAFT_NOT_FOUND', `draft ${id} not found`);
  return draftView(next, saved);
}

export async function deleteDraft(ctx: AppContext, accountId: string, id: string): Promise<void> {
  if (!(await deleteDraftRow(ctx.db, accountId, id))) throw new AppError('DRAFT_NOT_FOUND', `draft ${id} not found`);
}

/**
 * POST /drafts/{id}/send: the draft as a send (a reply when it has `inReplyTo`), scheduled when
 * `sendAt` (given here, else the draft's) is set. 400 VALIDATION_ERROR naming the first field
 * it lacks; every rule of a send applies (suspension, daily limit, send lists). The draft is
 * deleted in the transaction that stores the message.
 */
export async function sendDraft(ctx: AppContext, accountId: string, id: string, input: { sendAt?: string | null; listUnsubscribe?: boolean }, opts: { ifMatch?: string } = {}): Promise<Message> {
  const row = await findDraftRow(ctx, accountId, id);
  // What a person approved is what goes out: with If-Match, a draft edited since it was shown
  // is refused; without, the send still commits only the version it read (below).
  if (opts.ifMatch !== undefined && !ifMatches(opts.ifMatch, row.updatedAt)) {
    throw new AppError('PRECONDITION_FAILED', `draft ${id} changed since it was read (now ${draftTag(row.updatedAt)}); read it again before sending`);
  }
  const to = JSON.parse(row.toAddresses) as string[];
  if (!to.length) throw new AppError('VALIDATION_ERROR', `\`to\`: draft ${id} has no recipient; set one with PATCH /drafts/${id}`);
  if (row.subject === null) throw new AppError('VALIDATION_ERROR', `\`subject\`: draft ${id} has no subject; set one with PATCH /drafts/${id}`);
  if (!row.bodyText && !row.bodyHtml) throw new AppError('VALIDATION_ERROR', `\`bodyText\`: draft ${id} has no body; set bodyText or bodyHtml with PATCH /drafts/${id}`);
  const origin = row.inReplyTo ? replyOrigin(await originalIn(ctx, accountId, row.inboxId, row.inReplyTo)) : undefined;
  const attachmentIds = await listDraftAttachmentIds(ctx.db, id);
  const sendAt = input.sendAt !== undefined ? input.sendAt : row.sendAt;
  return queueSend(
    ctx,
    accountId,
    row.inboxId,
    {
      to,
      cc: JSON.parse(row.ccAddresses),
      bcc: JSON.parse(row.bccAddresses),
      subject: row.subject,
      bodyText: row.bodyText,
      bodyHtml: row.bodyHtml,
      threadId: row.threadId ?? undefined,
      attachmentIds,
      sendAt,
      listUnsubscribe: input.listUnsubscribe,
    },
    origin,
    {
      // Sent at most once, and as read: a concurrent send or delete of the draft makes this one
      // 404, a concurrent edit 412 (nothing is sent; the edited draft stays).
      inTransaction: async (tx) => {
        if (await deleteDraftRow(tx, accountId, id, row.updatedAt)) return;
        throw (await draftExists(tx, accountId, id))
          ? new AppError('PRECONDITION_FAILED', `draft ${id} changed while it was being sent; read it again before sending`)
          : new AppError('DRAFT_NOT_FOUND', `draft ${id} not found`);
      },
    },
  );
}
