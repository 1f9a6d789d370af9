// /domains: add, list, get, delete, verify. Rules live in domain/domains/domains.ts.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { addDomain, deleteDomain, getDomain, listDomains, verifyDomain } from '../../domain/domains/domains.ts';
import { dmarcSummary } from '../../domain/domains/dmarc-reports.ts';
import { tlsReportList } from '../../domain/domains/tls-reports.ts';
import { mtaStsPolicy } from '../../domain/domains/mta-sts.ts';
import type { Routes } from '../routes.ts';
import { parseInput } from '../validate.ts';

export const AddDomainBody = z.strictObject({
  domain: z.string({ error: 'is required and must be a string' }).min(1, 'must not be empty').max(253, 'must be at most 253 characters'),
});

export function registerDomainRoutes(r: Routes, ctx: AppContext): void {
  r.post('/domains', async (req) => {
    const body = parseInput(AddDomainBody, await req.json());
    return { status: 201, body: await addDomain(ctx, req.principal.accountId, body.domain) };
  });
  r.get('/domains', async (req) => ({ status: 200, body: await listDomains(ctx, req.principal.accountId) }));
  r.get('/domains/:id', async (req) => ({ status: 200, body: await getDomain(ctx, req.principal.accountId, req.params.id) }));
  r.delete('/domains/:id', async (req) => {
    await deleteDomain(ctx, req.principal.accountId, req.params.id);
    return { status: 204 };
  });
  r.post('/domains/:id/verify', async (req) => ({ status: 200, body: await verifyDomain(ctx, req.principal.accountId, req.params.id) }));
  // Reports receivers sent about the domain (src/domain/domains/dmarc-reports.ts, tls-reports.ts).
  r.get('/domains/:id/dmarc', async (req) => ({ status: 200, body: await dmarcSummary(ctx, req.principal.accountId, req.params.id, req.query) }));
  r.get('/domains/:id/tls-reports', async (req) => ({ status: 200, body: await tlsReportList(ctx, req.principal.accountId, req.params.id, req.query) }));
  // Public: what senders fetch for mta-sts.<domain> (src/domain/domains/mta-sts.ts).
  r.get(
    '/.well-known/mta-sts.txt',
    async (req) => ({ status: 200, stream: Buffer.from(await mtaStsPolicy(ctx, req.headers.host)), headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'max-age=300' } }),
    { public: true },
  );
}
