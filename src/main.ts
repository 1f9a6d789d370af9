// Wiring only: config → context (database, migrations) → HTTP listener → SMTP listener →
// job runner and background timers. Returns a handle that stops everything in reverse order.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.ts';
import { closeContext, createContext, type AppContext, type Clock, type Service } from './context.ts';
import { createHttpApp, limitConnectionsPerClient } from './http/app.ts';
import type { Logger } from './log.ts';
import { sweepIdempotencyKeys } from './domain/accounts/idempotency.ts';
import { sweepEvents } from './domain/events/events.ts';
import { sweepAudit } from './domain/audit/audit.ts';
import { sweepReports } from './domain/domains/dmarc-reports.ts';
import { closeEventWatchers } from './domain/events/event-feed.ts';
import { sweepOrphanBlobs } from './store/blobs/orphans.ts';
import { asApiWork } from './store/store.ts';
import { errorFields } from './log.ts';
import { createJobRunner } from './jobs/runner.ts';
import { JOB_HANDLERS } from './jobs/handlers/index.ts';
import { createMetricsService } from './http/metrics.ts';
import { createSmtpService } from './smtp/inbound.ts';
import { createSubmissionService } from './smtp/submission.ts';
import { createImapService } from './imap/server.ts';
import { createOutboundService } from './outbound/deliver.ts';
import { createWebhookConnections } from './jobs/handlers/webhook.ts';
import { createDomainRecheck } from './domain/domains/domain-recheck.ts';
import { AFTER_START_MS, describeStartup, listenFailure, type StartupInfo } from './startup.ts';
import { createStartupCollection } from './memory.ts';

/** A long-running part of the process (SMTP listener, job runner, timers). */

export interface RunningServer {
  ctx: AppContext;
  http: Server;
  httpUrl: string;
  services: Service[];
  /** Port the SMTP listener bound (0 when none). */
  smtpPort: number;
  /** Port the SMTP submission listener bound (0 when off). */
  submissionPort: number;
  close(): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  /** Extra services to run (tests, later features). */
  services?: Array<(ctx: AppContext) => Service>;
  /** The config file the config came from (undefined: built-in defaults), for the start-up block. */
  configFile?: string;
  /** Shows the start-up block; by default it is logged as one "started" line (and a "warn" line per warning). */
  announce?: (info: StartupInfo) => void;
}

/** The config key of each listening service, named when its address cannot be bound. */
const LISTEN_KEYS: Record<string, 'smtp' | 'metrics' | 'submission' | 'imap'> = { smtp: 'smtp', metrics: 'metrics', submission: 'submission', imap: 'imap' };

/** Periodic housekeeping: expired idempotency records, events and delivery logs past retention, files a crash left without a row. */
function housekeeping(ctx: AppContext): Service {
  let first: NodeJS.Timeout | undefined;
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<unknown> | undefined;
  return {
    name: 'housekeeping',
    async start() {
      const run = async () => {
        try {
          // One node at a time on a shared database.
          await ctx.store.exclusive('housekeeping', async () => {
            await sweepIdempotencyKeys(ctx);
            await sweepEvents(ctx);
            await sweepAudit(ctx);
            await sweepReports(ctx);
          });
        } catch (err) {
          ctx.log.error('housekeeping failed', errorFields(err));
        }
        sweeping ??= ctx.store
          .exclusive('orphans', () => sweepOrphanBlobs(ctx))
          .catch((err) => ctx.log.error('sweeping orphaned files failed', errorFields(err)))
          .finally(() => (sweeping = undefined));
      };
      // The first sweep runs a moment after start-up instead of inside it or right after it,
      // where it held up the first requests: nothing a request or a message needs depends on it.
      first = setTimeout(run, AFTER_START_MS);
      timer = setInterval(run, 3_600_000);
      timer.unref();
    },
    async stop() {
      clearTimeout(first);
      clearInterval(timer);
      await sweeping;
    },
  };
}

/**
 * Started in this order, stopped in reverse. The SMTP listeners (MX, then submission) are last so
 * that they are the first to stop accepting at shutdown (like HTTP), instead of taking new sessions while the job
 * runner drains; the runner stops before the outbound pools and webhook connections its deliveries use.
 */
export const SERVICE_FACTORIES: Array<(ctx: AppContext) => Service> = [
  housekeeping,
  createMetricsService,
  createOutboundService,
  createWebhookConnections,
  (ctx) => createJobRunner(ctx, JOB_HANDLERS),
  createDomainRecheck,
  createSmtpService,
  createSubmissionService,
  createImapService,
  eventWatchers,
  createStartupCollection,
];

/**
 * Open event streams and long-polls (src/domain/events/event-feed.ts). Stopped first: the streams end
 * and the long-polls answer, so HTTP can close without waiting out its grace period for them.
 */
function eventWatchers(ctx: AppContext): Service {
  return {
    name: 'events',
    async start() {},
    async stop() {
      closeEventWatchers(ctx);
    },
  };
}

function listenHttp(server: Server, host: string, port: number): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

export async function startServer(config: Config, log: Logger, opts: StartOptions = {}): Promise<RunningServer> {
  const ctx = await createContext(config, log, { clock: opts.clock });
  const app = createHttpApp(ctx);
  const { request_timeout: requestTimeout, headers_timeout: headersTimeout, max_connections: maxConnections } = config.http;
  const http = createServer(
    // Node checks both timeouts every connectionsCheckingInterval (30 s by default, which would
    // double a 30 s limit); headers are part of the request, so their limit is at most its.
    { requestTimeout, headersTimeout: Math.min(headersTimeout, requestTimeout), connectionsCheckingInterval: Math.min(1000, headersTimeout) },
    // Each request is API work: on PostgreSQL its statements use the API's connections (asApiWork).
    (req, res) => asApiWork(() => app.attach(req as never, res as never)),
  );
  http.keepAliveTimeout = 65_000;
  http.maxConnections = maxConnections;
  limitConnectionsPerClient(ctx, http);
  const services = [...SERVICE_FACTORIES, ...(opts.services ?? [])].map((f) => f(ctx));
  const started: Service[] = [];
  try {
    const addr = await listenHttp(http, config.http.listen!.host, config.http.listen!.port).catch((err: unknown) => {
      throw listenFailure(err, 'http.listen', config.http.listen);
    });
    for (const s of services) {
      try {
        await s.start();
      } catch (err) {
        const section = LISTEN_KEYS[s.name];
        throw section ? listenFailure(err, `${section}.listen`, config[section].listen) : err;
      }
      started.push(s);
    }
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    const httpUrl = `http://${host}:${addr.port}`;
    const portOf = (name: string) => (services.find((s) => s.name === name) as (Service & { port?: number }) | undefined)?.port ?? 0;
    const info = await describeStartup(
      ctx,
      {
        httpUrl,
        smtpPort: portOf('smtp'),
        submissionPort: portOf('submission'),
        metricsPort: portOf('metrics'),
        imapPort: portOf('imap'),
        imapTlsPort: (services.find((s) => s.name === 'imap') as (Service & { tlsPort?: number }) | undefined)?.tlsPort ?? 0,
        services: services.map((s) => s.name),
      },
      opts.configFile,
    );
    if (opts.announce) opts.announce(info);
    else {
      const { warnings, ...fields } = info;
      log.info('started', fields);
      for (const w of warnings) log.warn(w);
    }
    let closing: Promise<void> | undefined;
    return {
      ctx,
      http,
      httpUrl,
      services,
      smtpPort: portOf('smtp'),
      submissionPort: portOf('submission'),
      close: () => (closing ??= shutdown(ctx, http, started)),
    };
  } catch (err) {
    await shutdown(ctx, http, started);
    throw err;
  }
}

async function shutdown(ctx: AppContext, http: Server, services: Service[]): Promise<void> {
  const grace = ctx.config.http.shutdown_grace;
  ctx.log.info('stopping');
  // Stop accepting, let in-flight requests finish, then cut what is left after the grace period.
  const httpClosed = new Promise<void>((resolve) => http.close(() => resolve()));
  http.closeIdleConnections();
  const force = setTimeout(() => http.closeAllConnections(), grace);
  for (const s of [...services].reverse()) {
    try {
      await s.stop(grace);
    } catch (err) {
      ctx.log.error(`stopping ${s.name} failed`, errorFields(err));
    }
  }
  await httpClosed;
  clearTimeout(force);
  await closeContext(ctx);
  ctx.log.info('stopped');
}
