// GET /audit: the account's audit log, newest first (scope `review`: ROUTE_SCOPES).
import type { AppContext } from '../../context.ts';
import { listAudit, parseAuditQuery } from '../../domain/audit/audit.ts';
import type { Routes } from '../routes.ts';

export function registerAuditRoutes(r: Routes, ctx: AppContext): void {
  r.get('/audit', async (req) => ({ status: 200, body: { data: await listAudit(ctx, req.principal.accountId, parseAuditQuery(req.query)) } }));
}
