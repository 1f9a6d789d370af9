// /suppressions: the account's suppression list (list, add, remove). Rules in
// src/domain/sending/suppressions.ts.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { keyActor } from '../../domain/audit/audit.ts';
import { parsePage } from '../../domain/pagination.ts';
import { addSuppression, listSuppressions, removeSuppression } from '../../domain/sending/suppressions.ts';
import { unsubscribeByToken } from '../../domain/sending/unsubscribe.ts';
import type { Routes } from '../routes.ts';
import { headerSafe, parseInput, parseQuery } from '../validate.ts';

export const CreateSuppressionBody = z.strictObject({
  /** Checked (and lowercased) by the domain rules. */
  address: headerSafe(320),
});

export const SuppressionQuery = z.object({
  address: z.string().max(320).optional(),
});

export function registerSuppressionRoutes(r: Routes, ctx: AppContext): void {
  r.post('/suppressions', async (req) => {
    const { entry, created } = await addSuppression(ctx, req.principal.accountId, parseInput(CreateSuppressionBody, await req.json()).address, keyActor(req.principal.keyId));
    // An address already on the list is answered as it is (200), reason and time unchanged.
    return { status: created ? 201 : 200, body: entry };
  });
  r.get('/suppressions', async (req) => ({ status: 200, body: await listSuppressions(ctx, req.principal.accountId, { ...parsePage(req.query), ...parseQuery(SuppressionQuery, req.query) }) }));
  // Lifting a suppression loosens a brake: the `review` scope once keys have scopes (issue 29).
  r.delete('/suppressions/:address', async (req) => {
    await removeSuppression(ctx, req.principal.accountId, req.params.address, keyActor(req.principal.keyId));
    return { status: 204 };
  });
  registerUnsubscribeRoutes(r, ctx);
}

/**
 * POST /unsubscribe/{token}: the one-click unsubscribe a List-Unsubscribe header names (RFC 8058;
 * src/domain/sending/unsubscribe.ts). Public: the token is the credential. The body
 * ("List-Unsubscribe=One-Click") is not needed to act and is not read.
 */
export function registerUnsubscribeRoutes(r: Routes, ctx: AppContext): void {
  r.post('/unsubscribe/:token', async (req) => ({ status: 200, body: await unsubscribeByToken(ctx, req.params.token) }), { public: true });
}
