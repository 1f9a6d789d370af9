// /events (the account's events, oldest first, from a cursor) and /events/stream (the same as
// Server-Sent Events, live). Both carry the envelopes webhooks send; rules in domain/events/events.ts.
import type { AppContext } from '../../context.ts';
import { findInboxRow } from '../../domain/inboxes/inboxes.ts';
import { openStreamSlot } from '../../domain/events/stream-slots.ts';
import { inboxFilterFor } from '../../domain/accounts/apikeys.ts';
import { latestEventId, listEvents, parseEventQuery } from '../../domain/events/events.ts';
import type { Routes } from '../routes.ts';
import { SSE_HEADERS, streamEvents } from '../sse.ts';

export function registerEventRoutes(r: Routes, ctx: AppContext): void {
  r.get('/events', async (req) => {
    const query = parseEventQuery(req.query);
    // A key limited to some inboxes reads only their events.
    if (req.principal.inboxIds) Object.assign(query, await inboxFilterFor(ctx, req.principal, query.inboxId));
    return { status: 200, body: { data: await listEvents(ctx, req.principal.accountId, query) } };
  });
  r.get('/events/stream', async (req) => {
    const lastEventId = req.headers['last-event-id'];
    const query = parseEventQuery(req.query, typeof lastEventId === 'string' ? lastEventId : undefined);
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
