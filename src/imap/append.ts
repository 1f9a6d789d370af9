// APPEND's arguments (RFC 9051 §6.3.12): folder, optional flags, optional date, the message as a
// literal (within imap.max_literal_bytes, framed by ./wire.ts). What it does is the domain's.
import type { AppContext } from '../context.ts';
import { AppError } from '../domain/errors.ts';
import { appendToFolder } from '../domain/imap/append.ts';
import { canonicalName, uidsIn, type ImapUser } from '../domain/imap/mailboxes.ts';
import { utf8, type ImapNode } from './wire.ts';

export async function appendMessage(ctx: AppContext, who: ImapUser, args: ImapNode[]): Promise<string> {
  const folder = args[0];
  const message = args[args.length - 1];
  if (args.length < 2 || !folder || Array.isArray(folder) || !message || Array.isArray(message) || message.type !== 'LITERAL') {
    throw new AppError('VALIDATION_ERROR', 'APPEND needs a folder and the message as a literal');
  }
  const done = await appendToFolder(ctx, who, canonicalName(utf8(folder.value)), Buffer.from(message.value, 'latin1'));
  if ('draftId' in done) return `APPEND completed: draft ${done.draftId}`;
  // UIDPLUS (RFC 4315): the UID the copy has in Sent, which is the sent message's.
  const { uidValidity, uids } = await uidsIn(ctx, who, 'Sent', [done.sentId]);
  const uid = uids.get(done.sentId);
  return `${uid ? `[APPENDUID ${uidValidity} ${uid}] ` : ''}APPEND completed: already in Sent as ${done.sentId}`;
}
