// Prometheus metrics: in-process counters that the transports bump (HTTP requests by route
// pattern and status, SMTP sessions and messages), plus gauges read from the database at
// scrape time (job queue depth and age by kind, messages by status, webhook attempts by
// outcome). Rendered in the text exposition format, version 0.0.4.
import { sql } from 'drizzle-orm';
import type { AppContext } from './context.ts';
import { domains, inboxes, jobs, messages, webhookAttempts } from './db/schema.ts';

type Labels = Record<string, string>;

/** Label values escaped as the exposition format requires: backslash, quote, newline. */
const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

function labelText(labels: Labels): string {
  const keys = Object.keys(labels);
  if (!keys.length) return '';
  return `{${keys.map((k) => `${k}="${escapeLabel(labels[k])}"`).join(',')}}`;
}

const num = (n: number) => (Number.isFinite(n) ? String(n) : n > 0 ? '+Inf' : n < 0 ? '-Inf' : 'NaN');

export class Counter {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  inc(labels: Labels = {}, by = 1): void {
    const key = labelText(labels);
    const cur = this.values.get(key);
    if (cur) cur.value += by;
    else this.values.set(key, { labels, value: by });
  }

  get(labels: Labels = {}): number {
    return this.values.get(labelText(labels))?.value ?? 0;
  }

  render(): string[] {
    const out = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const { labels, value } of this.values.values()) out.push(`${this.name}${labelText(labels)} ${num(value)}`);
    return out;
  }
}

export class Histogram {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: number[],
  ) {}

  observe(labels: Labels, value: number): void {
    const key = labelText(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]) s.counts[i]++;
    s.sum += value;
    s.count++;
  }

  render(): string[] {
    const out = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      this.buckets.forEach((le, i) => out.push(`${this.name}_bucket${labelText({ ...s.labels, le: String(le) })} ${s.counts[i]}`));
      out.push(`${this.name}_bucket${labelText({ ...s.labels, le: '+Inf' })} ${s.count}`);
      out.push(`${this.name}_sum${labelText(s.labels)} ${num(s.sum)}`);
      out.push(`${this.name}_count${labelText(s.labels)} ${s.count}`);
    }
    return out;
  }
}

function gauge(name: string, help: string, rows: Array<{ labels: Labels; value: number }>): string[] {
  return [`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, ...rows.map((r) => `${name}${labelText(r.labels)} ${num(r.value)}`)];
}

/** The counters of one running server (tests run several in one process). */
export interface Metrics {
  httpRequests: Counter;
  httpDuration: Histogram;
  smtpSessions: Counter;
  smtpMessages: Counter;
  smtpRecipients: Counter;
  startedAt: number;
}

const registry = new WeakMap<AppContext, Metrics>();

export function metricsOf(ctx: AppContext): Metrics {
  let m = registry.get(ctx);
  if (!m) {
    m = {
      httpRequests: new Counter('mailroom_http_requests_total', 'HTTP requests answered, by method, route pattern and status code.'),
      httpDuration: new Histogram('mailroom_http_request_duration_seconds', 'Time to answer an HTTP request, by method and route pattern.', [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
      ]),
      smtpSessions: new Counter('mailroom_smtp_sessions_total', 'Inbound SMTP connections accepted by the listener.'),
      smtpMessages: new Counter('mailroom_smtp_messages_total', 'Inbound messages by result: accepted (stored) or rejected (refused with an SMTP error).'),
      smtpRecipients: new Counter('mailroom_smtp_recipients_total', 'RCPT TO commands by result: accepted or rejected (unknown inbox, relay, suspended, limits).'),
      startedAt: Date.now(),
    };
    registry.set(ctx, m);
  }
  return m;
}

// ---- the calls transports make ------------------------------------------------------------

export const countSmtpSession = (ctx: AppContext) => metricsOf(ctx).smtpSessions.inc();
export const countSmtpMessage = (ctx: AppContext, result: 'accepted' | 'rejected') => metricsOf(ctx).smtpMessages.inc({ result });
export const countSmtpRecipient = (ctx: AppContext, result: 'accepted' | 'rejected') => metricsOf(ctx).smtpRecipients.inc({ result });

/** A registered route, as src/http/routes.ts records it. */
export interface RoutePattern {
  method: string;
  path: string;
}

const compiled = new WeakMap<RoutePattern[], Array<{ method: string; path: string; re: RegExp }>>();

/**
 * The route pattern a request matched (`/inboxes/:id`), found the way tinyhttp finds it: the
 * first registered route whose method and pattern match. Unknown paths all count as
 * "unmatched", so a scanner probing random URLs cannot blow up the number of series.
 */
export function routeOf(routes: RoutePattern[] | undefined, method: string, path: string): string {
  if (!routes) return 'unmatched';
  let list = compiled.get(routes);
  if (!list || list.length !== routes.length) {
    list = routes.map((r) => ({
      method: r.method,
      path: r.path,
      re: new RegExp(`^${r.path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z_][A-Za-z0-9_]*/g, '[^/]+')}/?$`),
    }));
    compiled.set(routes, list);
  }
  // HEAD is answered by the GET route.
  const m = method === 'HEAD' ? 'GET' : method;
  return list.find((r) => r.method === m && r.re.test(path))?.path ?? 'unmatched';
}

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Called once per answered request from the HTTP app's global step. */
export function observeRequest(ctx: AppContext, routes: unknown, method: string | undefined, path: string, status: number, seconds: number): void {
  const m = method && KNOWN_METHODS.has(method) ? method : 'OTHER';
  const route = routeOf(Array.isArray(routes) ? (routes as RoutePattern[]) : undefined, m, path);
  const metrics = metricsOf(ctx);
  metrics.httpRequests.inc({ method: m, route, status: String(status) });
  metrics.httpDuration.observe({ method: m, route }, seconds);
}

// ---- scrape ---------------------------------------------------------------------------------

/** Everything, in the Prometheus text format. Database gauges are read now, in one snapshot. */
export function renderMetrics(ctx: AppContext): string {
  const m = metricsOf(ctx);
  const nowMs = ctx.clock.now().getTime();
  const lines: string[] = [];

  lines.push(...gauge('mailroom_start_time_seconds', 'When this server started, as a Unix time.', [{ labels: {}, value: Math.floor(m.startedAt / 1000) }]));
  const mem = process.memoryUsage();
  lines.push(...gauge('mailroom_process_resident_memory_bytes', 'Resident memory of the process.', [{ labels: {}, value: mem.rss }]));
  lines.push(...gauge('mailroom_process_heap_used_bytes', 'JavaScript heap in use.', [{ labels: {}, value: mem.heapUsed }]));

  lines.push(...m.httpRequests.render(), ...m.httpDuration.render());
  lines.push(...m.smtpSessions.render(), ...m.smtpMessages.render(), ...m.smtpRecipients.render());

  const snapshot = ctx.db.transaction((tx) => ({
    jobs: tx
      .select({
        kind: jobs.kind,
        status: jobs.status,
        n: sql<number>`count(*)`,
        oldest: sql<string | null>`min(${jobs.createdAt})`,
        due: sql<number>`sum(case when ${jobs.status} = 'queued' and ${jobs.runAt} <= ${nowMs} then 1 else 0 end)`,
      })
      .from(jobs)
      .groupBy(jobs.kind, jobs.status)
      .all(),
    messages: tx
      .select({ direction: messages.direction, status: messages.status, n: sql<number>`count(*)` })
      .from(messages)
      .groupBy(messages.direction, messages.status)
      .all(),
    attempts: tx.select({ status: webhookAttempts.status, n: sql<number>`count(*)` }).from(webhookAttempts).groupBy(webhookAttempts.status).all(),
    inboxes: tx.select({ status: inboxes.status, n: sql<number>`count(*)` }).from(inboxes).groupBy(inboxes.status).all(),
    domains: tx.select({ status: domains.sendingStatus, n: sql<number>`count(*)` }).from(domains).groupBy(domains.sendingStatus).all(),
  }));

  lines.push(
    ...gauge(
      'mailroom_jobs',
      'Jobs in the durable queue by kind and status (queued, running; done and failed until swept).',
      snapshot.jobs.map((r) => ({ labels: { kind: r.kind, status: r.status }, value: Number(r.n) })),
    ),
  );
  lines.push(
    ...gauge(
      'mailroom_jobs_due',
      'Queued jobs whose run time has passed (waiting for a worker), by kind.',
      snapshot.jobs.filter((r) => r.status === 'queued').map((r) => ({ labels: { kind: r.kind }, value: Number(r.due) })),
    ),
  );
  lines.push(
    ...gauge(
      'mailroom_jobs_oldest_age_seconds',
      'Age of the oldest queued or running job, by kind and status.',
      snapshot.jobs
        .filter((r) => (r.status === 'queued' || r.status === 'running') && r.oldest)
        .map((r) => ({ labels: { kind: r.kind, status: r.status }, value: Math.max(0, Math.round((nowMs - Date.parse(r.oldest!)) / 1000)) })),
    ),
  );
  lines.push(
    ...gauge(
      'mailroom_messages',
      'Stored messages by direction and status (outbound status is the delivery outcome: sent, delivered, bounced, failed, ...).',
      snapshot.messages.map((r) => ({ labels: { direction: r.direction, status: r.status }, value: Number(r.n) })),
    ),
  );
  lines.push(
    ...gauge(
      'mailroom_webhook_attempts',
      'Webhook delivery attempts in the delivery log by outcome: success, pending (retry scheduled), failed (final).',
      snapshot.attempts.map((r) => ({ labels: { status: r.status }, value: Number(r.n) })),
    ),
  );
  lines.push(...gauge('mailroom_inboxes', 'Inboxes by status.', snapshot.inboxes.map((r) => ({ labels: { status: r.status }, value: Number(r.n) }))));
  lines.push(
    ...gauge('mailroom_domains', 'Custom domains by sending status.', snapshot.domains.map((r) => ({ labels: { sending_status: r.status }, value: Number(r.n) }))),
  );
  return lines.join('\n') + '\n';
}

/** Content-Type of the text exposition format. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
