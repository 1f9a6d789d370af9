// /events (the account's events, oldest first, from a cursor) and /events/stream (the same as
// Server-Sent Events, live). Both carry the envelopes webhooks send; rules in domain/events/events.ts.
import type { AppContext } from '../../context.ts';
import { findInboxRow } from '../../domain/inboxes/inboxes.ts';
import { openStreamSlot } from '../../domain/events/stream-slots.ts';
import { inboxFilterFor, requireScope, type Principal } from '../../domain/accounts/apikeys.ts';
import { EVENT_TYPES, latestEventId, listEvents, parseEventQuery, type EventQuery, type EventType } from '../../domain/events/events.ts';
import type { Routes } from '../routes.ts';
import { SSE_HEADERS, streamEvents } from '../sse.ts';

/**
 * A held message's event is for the person who may release it: a key without `review` does not
 * read `message.held` (asking for it by name is 403 INSUFFICIENT_SCOPE), as it does not list held mail.
 */
function withoutHolds(principal: Principal, query: EventQuery): EventQuery {
  if (principal.scopes.has('review')) return query;
  if (query.types?.includes('message.held')) requireScope(principal, 'review', false);
  return { ...query, types: (query.types ?? (Object.keys(EVENT_TYPES) as EventType[])).filter((t) => t !== 'message.held') };
}

export function registerEventRoutes(r: Routes, ctx: AppContext): void {
  r.get('/events', async (req) => {
    const query = withoutHolds(req.principal, parseEventQuery(req.query));
    // A key limited to some inboxes reads only their events.
    if (req.principal.inboxIds) Object.assign(query, await inboxFilterFor(ctx, req.principal, query.inboxId));
    return { status: 200, body: { data: await listEvents(ctx, req.principal.accountId, query) } };
  });
  r.get('/events/stream', async (req) => {
    const lastEventId = req.headers['last-event-id'];
    const query = withoutHolds(req.principal, parseEventQuery(req.query, typeof lastEventId === 'string' ? lastEventId : undefined));
    if (req.principal.inboxIds) Object.assign(query, await inboxFilterFor(ctx, req.principal, query.inboxId));
    // Checked before the stream opens, so a wrong inbox is a 404 answer, not an ended stream.
    if (query.inboxId) await findInboxRow(ctx, req.principal.accountId, query.inboxId);
    // Without a cursor the stream starts now: events recorded from here on.
    const start = { ...query, after: query.after ?? (await latestEventId(ctx)) };
    // Taken last, when nothing can fail before the stream opens and releases it.
    const slot = openStreamSlot(ctx, req.principal);
    return { status: 200, headers: SSE_HEADERS, open: (res) => streamEvents(ctx, res, req.principal.accountId, start, slot) };
  });
}
