// /account/api-keys: create, list, revoke. The key authenticating a request cannot revoke itself,
// and creates keys with at most its own scopes and inboxes.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { SCOPES, createApiKey, listApiKeys, reachesInboxes, revokeApiKey } from '../../domain/accounts/apikeys.ts';
import type { Routes } from '../routes.ts';
import { headerSafe, parseInput } from '../validate.ts';

export const CreateApiKeyBody = z.strictObject({
  name: headerSafe(200).nullable().optional(),
  /** Default: the creating key's scopes. */
  scopes: z
    .array(z.enum(SCOPES))
    .min(1)
    .max(SCOPES.length * 2)
    .optional(),
  /** Inbox ids; empty: every inbox. Default: the creating key's inboxes. */
  inboxIds: z.array(z.string().min(1).max(100)).max(1000).optional(),
});

export function registerApiKeyRoutes(r: Routes, ctx: AppContext): void {
  r.post(
    '/account/api-keys',
    async (req) => {
      const body = parseInput(CreateApiKeyBody, await req.json());
      return { status: 201, body: await createApiKey(ctx, req.principal.accountId, { name: body.name ?? null, scopes: body.scopes, inboxIds: body.inboxIds, creator: req.principal }) };
    },
    { secretFields: ['key'] },
  );
  // A key limited to some inboxes sees (and revokes: src/http/routes.ts) only keys within them.
  r.get('/account/api-keys', async (req) => ({ status: 200, body: { data: (await listApiKeys(ctx, req.principal.accountId)).filter((k) => reachesInboxes(req.principal, k.inboxIds)) } }));
  r.delete('/account/api-keys/:id', async (req) => {
    await revokeApiKey(ctx, req.principal.accountId, req.params.id, req.principal.keyId);
    return { status: 204 };
  });
}
