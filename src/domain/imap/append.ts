// APPEND over IMAP (RFC 9051 §6.3.12): what a mail client may put into a folder. Drafts: the
// message becomes a draft of the inbox (POST /inboxes/{id}/drafts: recipients, subject, bodies,
// In-Reply-To; attachments are not kept). Sent: clients file a copy of what they sent through
// SMTP submission; that message is stored already (submission stores it before its 250), so the
// copy is recognised by its Message-ID and nothing is added. Anything else is refused: mail
// enters INBOX only by SMTP, and Sent only by sending.
import type { AddressObject } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { findSentByMessageId } from '../../store/repo/imap.ts';
import { AppError } from '../errors.ts';
import { loadMailparser } from '../inbound/inbound-parse.ts';
import { createDraft } from '../sending/drafts.ts';
import type { ImapUser } from './mailboxes.ts';

const addresses = (field: AddressObject | AddressObject[] | undefined): string[] =>
  (Array.isArray(field) ? field : field ? [field] : []).flatMap((f) => f.value.map((v) => v.address ?? '').filter(Boolean));

/** Files `raw` into `folder`; answers the sent message it is a copy of, or the draft it made. */
export async function appendToFolder(ctx: AppContext, who: ImapUser, folder: string, raw: Buffer): Promise<{ sentId: string } | { draftId: string }> {
  if (folder !== 'Drafts' && folder !== 'Sent') throw new AppError('FORBIDDEN', 'messages can be appended only to Drafts and Sent: mail arrives by SMTP');
  if (!who.scopes.has('send')) throw new AppError('INSUFFICIENT_SCOPE', 'this API key lacks the `send` scope');
  const { simpleParser } = await loadMailparser();
  const parsed = await simpleParser(raw, { skipTextToHtml: true, skipImageLinks: true, keepCidLinks: true }).catch(() => {
    throw new AppError('VALIDATION_ERROR', 'the message could not be parsed as MIME');
  });
  if (folder === 'Sent') {
    const sent = parsed.messageId ? await findSentByMessageId(ctx.db, who.inboxId, parsed.messageId) : undefined;
    if (!sent) throw new AppError('FORBIDDEN', 'Sent holds what this inbox sent: send through SMTP submission, which files the message in Sent');
    return { sentId: sent };
  }
  const draft = await createDraft(ctx, who.accountId, who.inboxId, {
    to: addresses(parsed.to),
    cc: addresses(parsed.cc),
    bcc: addresses(parsed.bcc),
    subject: parsed.subject ?? null,
    bodyText: parsed.text === undefined ? null : parsed.text.replace(/\r?\n$/, ''),
    bodyHtml: typeof parsed.html === 'string' ? parsed.html : null,
    inReplyTo: typeof parsed.inReplyTo === 'string' ? parsed.inReplyTo : null,
  });
  return { draftId: draft.id };
}
