// GET / (a redirect to the dashboard) and /dashboard: the operator's web page (HTML, script and stylesheet embedded in the binary,
// served without a key; the page signs in with an API key itself) and the dashboard-only
// endpoint POST /dashboard/api/deliveries/:id/replay, which needs a write key like any POST.
import type { AppContext } from '../../context.ts';
import { replayAccountDelivery } from '../../domain/webhooks/dashboard.ts';
import { dashboardFiles, type DashboardFiles } from '../dashboard/bundle.ts';
import type { Routes } from '../routes.ts';

/**
 * Only same-origin script, style and fetch; no inline code, no frames, no forms posted
 * anywhere. The page shows mail from strangers, so it must not be able to run or load theirs.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'Content-Security-Policy': DASHBOARD_CSP,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  // Assets change with the binary; revalidating is cheap and never serves a stale page after an upgrade.
  'Cache-Control': 'no-cache',
};

/** One of the dashboard's files (src/http/dashboard/bundle.ts), its bytes made at the first request. */
const asset = (pick: (files: DashboardFiles) => string, contentType: string) => {
  let bytes: Buffer | undefined;
  return async () => {
    bytes ??= Buffer.from(pick(await dashboardFiles()), 'utf8');
    return { status: 200, stream: bytes, headers: { ...SECURITY_HEADERS, 'Content-Type': contentType, 'Content-Length': String(bytes.length) } };
  };
};

/** Paths under /dashboard are not part of the public API (left out of the OpenAPI document). */
export const DASHBOARD_PREFIX = '/dashboard';

/** GET / sends a browser to the dashboard (it was a 404: the first page a new user opens). */
export const ROOT_REDIRECT = '/';

export function registerDashboardRoutes(r: Routes, ctx: AppContext): void {
  const page = asset((f) => f.html, 'text/html; charset=utf-8');
  r.get(ROOT_REDIRECT, () => ({ status: 302, headers: { Location: DASHBOARD_PREFIX, 'Cache-Control': 'no-cache', 'Content-Length': '0' } }), { public: true });
  r.get('/dashboard', page, { public: true });
  r.get('/dashboard/', page, { public: true });
  r.get(
    '/dashboard/app.js',
    asset((f) => f.js, 'text/javascript; charset=utf-8'),
    { public: true },
  );
  r.get(
    '/dashboard/app.css',
    asset((f) => f.css, 'text/css; charset=utf-8'),
    { public: true },
  );
  r.get(
    '/dashboard/favicon.svg',
    asset((f) => f.icon, 'image/svg+xml'),
    { public: true },
  );
  r.post('/dashboard/api/deliveries/:id/replay', async (req) => ({
    status: 202,
    body: await replayAccountDelivery(ctx, req.principal.accountId, req.params.id),
  }));
}
