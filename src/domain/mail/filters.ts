// The filters of the message and thread lists (q, label, unread, direction, status), per inbox
// or account-wide. A thread matches when one of its messages matches every filter given. The
// SQL that finds them, per engine, is the repository's (src/store/repo/message-search.ts).
import type { MatchFilters } from '../../store/repo/message-search.ts';
import { parseSearch } from './search.ts';

export const DIRECTIONS = ['inbound', 'outbound'] as const;

export interface MessageFilters {
  /** A search query (src/domain/mail/search.ts). */
  q?: string;
  label?: string;
  unread?: boolean;
  direction?: (typeof DIRECTIONS)[number];
  status?: string;
}

import type { ListScope } from '../../store/repo/message-search.ts';

/**
 * The inboxes a list covers: one (its id), the inboxes of a key limited to several (their ids),
 * or the whole account (null).
 */
export type InboxSelection = string | readonly string[] | null;

export function listScope(accountId: string, inboxes: InboxSelection): ListScope {
  if (inboxes === null) return { accountId };
  return typeof inboxes === 'string' ? { inboxId: inboxes } : { inboxIds: inboxes };
}

export const hasFilters = (f: MessageFilters) => f.q !== undefined || f.label !== undefined || f.unread !== undefined || f.direction !== undefined || f.status !== undefined;

/**
 * The filters as the repository matches them: `q` parsed (400 INVALID_QUERY when it does not
 * parse, or has more than `maxTerms` terms: `[limits] search_terms`).
 */
export function matchFilters(f: MessageFilters, maxTerms?: number): MatchFilters {
  const { q, ...rest } = f;
  return q === undefined ? rest : { ...rest, search: parseSearch(q, maxTerms) };
}
