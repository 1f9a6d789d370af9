// /webhooks: create, list, get, update (PUT, only given fields), delete; the event catalog,
// the delivery log and activity. The fixed words are registered before `/webhooks/:id`.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { EVENT_TYPES, type EventType } from '../../domain/events/events.ts';
import { createWebhook, deleteWebhook, eventCatalog, getWebhook, listDeliveryLogs, listWebhooks, parseLogQuery, updateWebhook, webhookActivity } from '../../domain/webhooks/webhooks.ts';
import type { Routes } from '../routes.ts';
import { headerSafe, parseInput } from '../validate.ts';
import { reachesInboxes } from '../../domain/accounts/apikeys.ts';

const EventName = z.enum(Object.keys(EVENT_TYPES) as [EventType, ...EventType[]], {
  error: `must be one of ${Object.keys(EVENT_TYPES).join(', ')}`,
});
const Events = z.array(EventName).max(50).nullable().optional();
const Url = z.string().min(1, 'is required');
const Description = headerSafe(500).nullable().optional();
const InboxIds = z
  .array(z.string().regex(/^inb_[0-9a-z]{26}$/, 'must be an inbox id (inb_…)'))
  .max(100)
  .nullable()
  .optional();

export const CreateWebhookBody = z.strictObject({
  url: Url,
  description: Description,
  events: Events,
  inboxIds: InboxIds,
  isActive: z.boolean().optional(),
});

export const UpdateWebhookBody = z.strictObject({
  url: Url.optional(),
  description: Description,
  events: Events,
  inboxIds: InboxIds,
  isActive: z.boolean().optional(),
  rotateSecret: z.boolean().optional(),
});

export function registerWebhookRoutes(r: Routes, ctx: AppContext): void {
  r.post(
    '/webhooks',
    async (req) => {
      const body = parseInput(CreateWebhookBody, await req.json());
      return { status: 201, body: await createWebhook(ctx, req.principal.accountId, body) };
    },
    { secretFields: ['secret'] },
  );
  r.get('/webhooks', async (req) => {
    // A key limited to some inboxes sees only the webhooks of its inboxes.
    const data = (await listWebhooks(ctx, req.principal.accountId)).filter((w) => reachesInboxes(req.principal, w.inboxIds));
    return { status: 200, body: { data, total: data.length } };
  });
  r.get('/webhooks/catalog', () => ({ status: 200, body: { data: eventCatalog() } }));
  r.get('/webhooks/logs', async (req) => ({ status: 200, body: { data: await listDeliveryLogs(ctx, req.principal.accountId, parseLogQuery(req.query)) } }));
  r.get('/webhooks/activity', async (req) => ({ status: 200, body: await webhookActivity(ctx, req.principal.accountId, req.query) }));
  r.get('/webhooks/:id', async (req) => ({ status: 200, body: await getWebhook(ctx, req.principal.accountId, req.params.id) }));
  r.put('/webhooks/:id', async (req) => {
    const body = parseInput(UpdateWebhookBody, await req.json());
    return { status: 200, body: await updateWebhook(ctx, req.principal.accountId, req.params.id, body) };
  });
  r.delete('/webhooks/:id', async (req) => {
    await deleteWebhook(ctx, req.principal.accountId, req.params.id);
    return { status: 204 };
  });
}
