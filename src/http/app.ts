// The HTTP API: a tinyhttp app with one global step (request id, authentication, rate limit,
// access log, metrics) and the routes of each resource. Unknown routes answer 404 NOT_FOUND.
import { App, type Request, type Response } from '@tinyhttp/app';
import type { Server } from 'node:http';
import type { AppContext } from '../context.ts';
import { clientKey, OpenPerClient } from '../client-address.ts';
import { NOT_REMEMBERED, readKey, rememberedKey, type Principal } from '../domain/accounts/apikeys.ts';
import { AppError } from '../domain/errors.ts';
import { errorFields } from '../log.ts';
import { RateLimiter } from './ratelimit.ts';
import { observeRequest } from '../metrics.ts';
import { Routes, callerOf, newRequestId, sendError, type CallerInfo } from './routes.ts';
import { registerHealthRoutes } from './routes/health.ts';
import { registerInboxRoutes } from './routes/inboxes.ts';
import { registerApiKeyRoutes } from './routes/apikeys.ts';
import { registerWebhookRoutes } from './routes/webhooks.ts';
import { registerDomainRoutes } from './routes/domains.ts';
import { registerMessageRoutes } from './routes/messages.ts';
import { registerSendingRoutes } from './routes/sending.ts';
import { registerThreadRoutes } from './routes/threads.ts';
import { registerAttachmentRoutes } from './routes/attachments.ts';
import { registerDashboardRoutes } from './routes/dashboard.ts';
import { registerOpenApiRoutes } from './routes/openapi.ts';
import { registerEventRoutes } from './routes/events.ts';
import { registerMcpRoutes } from './routes/mcp.ts';
import { registerDraftRoutes } from './routes/drafts.ts';
import { registerListRoutes } from './routes/lists.ts';
import { registerAuditRoutes } from './routes/audit.ts';
import { registerSuppressionRoutes } from './routes/suppressions.ts';

/** Each resource module adds its routes here; fixed paths must come before `/:id` ones. */
const ROUTE_MODULES: Array<(r: Routes, ctx: AppContext) => void> = [
  registerHealthRoutes,
  registerOpenApiRoutes,
  registerInboxRoutes,
  registerApiKeyRoutes,
  registerDomainRoutes,
  registerMessageRoutes,
  registerSendingRoutes,
  registerThreadRoutes,
  registerAttachmentRoutes,
  registerDashboardRoutes,
  registerWebhookRoutes,
  registerEventRoutes,
  registerDraftRoutes,
  registerListRoutes,
  registerAuditRoutes,
  registerMcpRoutes,
  registerSuppressionRoutes,
];

/** The metrics label of requests no route answered (one series, whatever the path). */
const UNMATCHED = 'unmatched';

function presentedKey(req: Request): string | undefined {
  const auth = req.headers.authorization;
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m ? m[1] : '';
  }
  const x = req.headers['x-api-key'];
  return typeof x === 'string' ? x.trim() : undefined;
}

export function createHttpApp(ctx: AppContext, extraModules: Array<(r: Routes, ctx: AppContext) => void> = []): App {
  const limiter = new RateLimiter(ctx.config.limits.requests_per_minute);
  const routes = new Routes(ctx);
  const app: App = new App({
    settings: { xPoweredBy: false },
    // tinyhttp runs this first for every request, before any route, in place of its own
    // request/response helpers (res.json, req.accepts, …: some thirty closures per request,
    // which mailroom never uses: handlers return a Reply). Being first, it also refuses a
    // malformed %-escape before tinyhttp decodes the path parameters.
    applyExtensions: (req: Request, res: Response, next: () => void) => {
      const failed = (err: unknown) => {
        ctx.log.error('unhandled error', errorFields(err));
        if (!res.headersSent) sendError(res, new AppError('INTERNAL_ERROR', 'internal error'), callerOf(req)?.requestId ?? newRequestId());
      };
      // No promise unless the key had to be read from the database (auth-cache.ts).
      let go: boolean | Promise<boolean>;
      try {
        go = globalStep(req, res);
      } catch (err) {
        return failed(err);
      }
      if (go === true) next();
      else if (go !== false) go.then((ok) => ok && next(), failed);
    },
    noMatchHandler: notFound,
    onError: (err: unknown, req: Request, res: Response) => {
      ctx.log.error('unhandled error', errorFields(err));
      if (res.headersSent) return void res.destroy();
      sendError(res, new AppError('INTERNAL_ERROR', 'internal error'), callerOf(req)?.requestId ?? newRequestId());
    },
  });

  function notFound(req: Request, res: Response): void {
    const caller = callerOf(req);
    if (caller) caller.route = UNMATCHED;
    sendError(res, new AppError('NOT_FOUND', `no route for ${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}`), caller?.requestId ?? newRequestId());
  }

  /**
   * Request id, authentication, rate limit, log and metrics; false when it answered itself. A
   * promise only when the presented key is not remembered and must be read.
   */
  function globalStep(req: Request, res: Response): boolean | Promise<boolean> {
    const caller: CallerInfo = { requestId: newRequestId(), started: performance.now() };
    (req as unknown as { mr: CallerInfo }).mr = caller;
    res.setHeader('X-Request-Id', caller.requestId);

    const key = presentedKey(req);
    if (key) {
      let known: ReturnType<typeof rememberedKey>;
      try {
        known = rememberedKey(ctx, key);
      } catch (err) {
        return afterAuth(req, res, caller, storageFailure(caller, err));
      }
      if (known === NOT_REMEMBERED) {
        return readKey(ctx, key).then(
          (principal) => afterAuth(req, res, caller, principal),
          (err: unknown) => afterAuth(req, res, caller, storageFailure(caller, err)),
        );
      }
      return afterAuth(req, res, caller, known);
    }
    return afterAuth(req, res, caller, key === undefined ? null : undefined);
  }

  /**
   * The key could not be checked (the database failed): that says nothing about the key, so the
   * client is told to retry instead of being told its key is bad.
   */
  function storageFailure(caller: CallerInfo, err: unknown): null {
    ctx.log.error('authentication failed', errorFields(err));
    caller.storageFailed = true;
    return null;
  }

  /** `principal`: the key's, undefined for a key refused, null when no key was checked. */
  function afterAuth(req: Request, res: Response, caller: CallerInfo, principal: Principal | undefined | null): boolean {
    if (principal) caller.principal = principal;
    else if (principal === undefined) caller.authError = 'invalid, expired or revoked API key';

    // Per account, not per key: creating keys must not multiply the limit.
    const identity = caller.principal ? `account:${caller.principal.accountId}` : `ip:${req.socket.remoteAddress ?? ''}`;
    const rate = limiter.hit(identity, ctx.clock.now().getTime());
    res.setHeader('X-RateLimit-Limit', String(rate.limit));
    res.setHeader('X-RateLimit-Remaining', String(rate.remaining));
    res.setHeader('X-RateLimit-Reset', String(rate.reset));

    res.on('finish', () => {
      const ms = performance.now() - caller.started;
      const path = (req.url ?? '/').split('?')[0];
      // The route that answered recorded its pattern; answers given before routing (429, a bad
      // %-escape) find it by matching the path.
      const route = caller.route ?? routes.match(req.method ?? '', path)?.route.path ?? UNMATCHED;
      observeRequest(ctx, req.method, route, res.statusCode, ms / 1000);
      ctx.log.info('request', {
        requestId: caller.requestId,
        method: req.method,
        path,
        status: res.statusCode,
        ms: Math.round(ms * 10) / 10,
        keyId: caller.principal?.keyId,
      });
    });

    if (caller.storageFailed) {
      sendError(res, new AppError('SERVICE_UNAVAILABLE', 'the service cannot check API keys right now; retry shortly'), caller.requestId, { 'Retry-After': '5' });
      return false;
    }
    if (!rate.allowed) {
      const retryAfter = Math.max(1, Math.ceil(rate.reset - ctx.clock.now().getTime() / 1000));
      sendError(res, new AppError('RATE_LIMITED', `rate limit of ${rate.limit} requests per minute exceeded; retry after ${retryAfter}s`), caller.requestId, {
        'Retry-After': String(retryAfter),
      });
      return false;
    }
    // tinyhttp answers a bare 400 (and prints a stack) when a path parameter has a malformed
    // %-escape; answer with the error envelope instead.
    try {
      decodeURIComponent((req.url ?? '/').split('?')[0]);
    } catch {
      sendError(res, new AppError('VALIDATION_ERROR', 'the request path contains a malformed %-escape'), caller.requestId);
      return false;
    }
    return true;
  }

  for (const register of [...ROUTE_MODULES, ...extraModules]) register(routes, ctx);
  // The routes' own table finds the route (src/http/routes.ts); a HEAD that no GET route answers
  // is a 404 like the GET would be, not tinyhttp's empty 204.
  app.use((req: Request, res: Response) => {
    if (!routes.dispatch(req, res)) notFound(req, res);
  });
  app.locals.routes = routes.registered;
  return app;
}

/**
 * Closes a new connection at once when its client address (IPv6: its /64, as on the SMTP
 * listener) already holds `[http] max_connections_per_ip`: idle or slow sockets from one address
 * must not take the server's connections (`[http] max_connections`) from everybody else.
 */
export function limitConnectionsPerClient(ctx: AppContext, server: Server): void {
  const max = ctx.config.http.max_connections_per_ip;
  const open = new OpenPerClient();
  // Not logged: under attack that would be one line per refused socket.
  server.on('connection', (socket) => {
    const key = clientKey(socket.remoteAddress);
    if (open.count(key) >= max) {
      socket.destroy();
      return;
    }
    open.add(key);
    socket.once('close', () => open.remove(key));
  });
}
