// Waiting for the next inbound message of an inbox, optionally one matching a search query (the
// MCP tool wait_for_message). Built on the long-poll of GET /inboxes/{id}/messages?wait=
// (waitForMessages: woken by the event feed), with the newest message at the start as cursor.
import type { AppContext } from '../../context.ts';
import { openStreamSlot, type StreamOwner, type StreamSlot } from '../events/stream-slots.ts';
import { listMatchingMessageIds } from '../../store/repo/message-search.ts';
import { matchFilters } from './filters.ts';
import { listMessages, waitForMessages, type Message } from './messages.ts';
import { parseSearch, runSearch } from './search.ts';

/** Messages looked at per wake; a larger burst is read from its oldest end. */
const BATCH = 100;

/** Of `ids` (messages of the inbox), the ones `q` matches: a search, within the search budgets (search.ts). IMAP SEARCH asks it too. */
export async function idsMatching(ctx: AppContext, accountId: string, inboxId: string, q: string, ids: string[]): Promise<Set<string>> {
  const filters = matchFilters({ q }, ctx.config.limits.search_terms);
  return new Set(await runSearch(ctx, accountId, (db) => listMatchingMessageIds(db, { inboxId }, filters, ids)));
}

/**
 * The first inbound message stored in the inbox after the call began (and matching `q` when
 * given), as soon as it is stored; null when none came within `timeoutSeconds` or `gone`
 * resolved first (the caller left). Unknown or another account's inbox: INBOX_NOT_FOUND; a `q`
 * that does not parse: INVALID_QUERY, both before any waiting. It holds one of the account's
 * stream slots throughout (TOO_MANY_STREAMS past them; UNAUTHORIZED once the key is revoked).
 */
export async function waitForNextMessage(ctx: AppContext, who: StreamOwner, inboxId: string, opts: { q?: string; timeoutSeconds: number; gone?: Promise<unknown> }): Promise<Message | null> {
  if (opts.q !== undefined) parseSearch(opts.q, ctx.config.limits.search_terms);
  // One stream slot for the whole call, however many waits it takes.
  const slot = openStreamSlot(ctx, who);
  try {
    return await waitOnSlot(ctx, who, inboxId, opts, slot);
  } finally {
    slot.release();
  }
}

async function waitOnSlot(ctx: AppContext, who: StreamOwner, inboxId: string, opts: { q?: string; timeoutSeconds: number; gone?: Promise<unknown> }, slot: StreamSlot): Promise<Message | null> {
  const accountId = who.accountId;
  // Only messages stored after the newest one now count (inbound or outbound: it is a position).
  let cursor = (await listMessages(ctx, accountId, inboxId, { limit: 1, offset: 0 })).data[0]?.id ?? null;
  const deadline = Date.now() + opts.timeoutSeconds * 1000;
  let left = false;
  void opts.gone?.then(() => (left = true));
  for (;;) {
    // `received` is the status of every inbound message and of no outbound one.
    const later = { limit: BATCH, offset: 0, after: cursor, status: 'received' };
    let page = await waitForMessages(ctx, who, inboxId, later, Math.max(0, deadline - Date.now()) / 1000, opts.gone, slot);
    if (page.data.length === 0) return null;
    // Newest first: when more arrived than one page holds, the oldest are on the last page.
    if (page.total > page.data.length) page = await listMessages(ctx, accountId, inboxId, { ...later, offset: page.total - BATCH });
    const arrived = [...page.data].reverse();
    const matching =
      opts.q === undefined
        ? undefined
        : await idsMatching(
            ctx,
            accountId,
            inboxId,
            opts.q,
            arrived.map((m) => m.id),
          );
    const next = arrived.find((m) => !matching || matching.has(m.id));
    if (next) return next;
    cursor = arrived[arrived.length - 1].id;
    if (left || Date.now() >= deadline) return null;
  }
}
