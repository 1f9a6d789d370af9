// APPEND (RFC 9051 §6.3.12).
import type { AppContext } from '../context.ts';
import type { ImapUser } from '../domain/imap/mailboxes.ts';
import type { ImapNode } from './wire.ts';

export async function appendMessage(_ctx: AppContext, _who: ImapUser, _args: ImapNode[], _done: (uidValidity: number) => void): Promise<string> {
  throw new Error('APPEND is not supported yet');
}
