// SEARCH (RFC 9051 §6.4.4) over a folder.
import type { AppContext } from '../context.ts';
import { AppError } from '../domain/errors.ts';
import type { ImapUser } from '../domain/imap/mailboxes.ts';
import type { ImapNode } from './wire.ts';

/** The UIDs of the folder's messages that match the criteria, ascending. */
export async function searchFolder(_ctx: AppContext, _who: ImapUser, _folder: string, _uids: readonly number[], _deleted: ReadonlySet<number>, _criteria: ImapNode[]): Promise<number[]> {
  throw new AppError('FORBIDDEN', 'SEARCH is not supported yet');
}
