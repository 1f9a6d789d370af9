// Prometheus metrics: in-process counters that the transports bump (HTTP requests by route
// pattern and status, SMTP sessions and messages), gauges read from the database at scrape
// time (job queue depth and age by kind, inboxes, domains) and counters kept from the
// append-only logs (events = delivery outcomes, webhook attempts by outcome). Rendered in the
// text exposition format, version 0.0.4.
import type { AppContext } from './context.ts';
import {
  countDomainsBySendingStatus,
  countInboxesByStatus,
  countJobsByKindAndStatus,
  countLogRowsBetween,
  findLastLogPosition,
  findLogPositionAfter,
  startOfLog,
  summarizeLiveJobs,
  type LogPosition,
  type LogTable,
} from './store/repo/metrics.ts';

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
  readonly name: string;
  readonly help: string;
  constructor(name: string, help: string) {
    this.name = name;
    this.help = help;
  }

  inc(labels: Labels = {}, by = 1): void {
    this.series(labels).value += by;
  }

  /** The series of `labels` (created at 0): hot paths keep it and add to its value directly. */
  series(labels: Labels): { value: number } {
    const key = labelText(labels);
    let cur = this.values.get(key);
    if (!cur) this.values.set(key, (cur = { labels, value: 0 }));
    return cur;
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

interface HistogramSeries {
  labels: Labels;
  counts: number[];
  sum: number;
  count: number;
}

export class Histogram {
  private readonly all = new Map<string, HistogramSeries>();
  readonly name: string;
  readonly help: string;
  readonly buckets: number[];
  constructor(name: string, help: string, buckets: number[]) {
    this.name = name;
    this.help = help;
    this.buckets = buckets;
  }

  observe(labels: Labels, value: number): void {
    this.add(this.series(labels), value);
  }

  /** The series of `labels` (created empty), for add() on hot paths. */
  series(labels: Labels): HistogramSeries {
    const key = labelText(labels);
    let s = this.all.get(key);
    if (!s) this.all.set(key, (s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    return s;
  }

  add(s: HistogramSeries, value: number): void {
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]) s.counts[i]++;
    s.sum += value;
    s.count++;
  }

  render(): string[] {
    const out = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.all.values()) {
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
  smtpLimited: Counter;
  inboundAnalysed: Counter;
  submissionAuth: Counter;
  submissionMessages: Counter;
  imapLogins: Counter;
  /** The two HTTP series of each method, route and status, found by one map lookup per request. */
  httpSeries: Map<string, { requests: { value: number }; duration: HistogramSeries }>;
  startedAt: number;
}

const registry = new WeakMap<AppContext, Metrics>();

export function metricsOf(ctx: AppContext): Metrics {
  let m = registry.get(ctx);
  if (!m) {
    m = {
      httpRequests: new Counter('mailroom_http_requests_total', 'HTTP requests answered, by method, route pattern and status code.'),
      httpDuration: new Histogram('mailroom_http_request_duration_seconds', 'Time to answer an HTTP request, by method and route pattern.', [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
      smtpSessions: new Counter('mailroom_smtp_sessions_total', 'Inbound SMTP connections accepted by the listener.'),
      smtpMessages: new Counter('mailroom_smtp_messages_total', 'Inbound messages by result: accepted (stored) or rejected (refused with an SMTP error).'),
      smtpRecipients: new Counter('mailroom_smtp_recipients_total', 'RCPT TO commands by result: accepted or rejected (unknown inbox, relay, suspended, limits).'),
      smtpLimited: new Counter(
        'mailroom_smtp_sessions_limited_total',
        'SMTP sessions refused or closed with 421 by a limit: per_ip (smtp.max_connections_per_ip), session_time (smtp.max_session_time), junk_commands (smtp.max_junk_commands), memory_budget (smtp.memory_budget, 452 4.3.1 and the sender retries).',
      ),
      inboundAnalysed: new Counter(
        'mailroom_inbound_analysed_total',
        'Received messages parsed and authenticated, by where: worker (an analysis thread, smtp.analysis_workers) or main (the main thread: workers off, or none can start).',
      ),
      submissionAuth: new Counter(
        'mailroom_submission_auth_total',
        'SMTP submission AUTH attempts by result: accepted, rejected (535 5.7.8), rate_limited (454 4.7.0: too many failures for that username from the client address), unavailable (454 4.7.0: the credentials could not be checked, the database failing).',
      ),
      submissionMessages: new Counter('mailroom_submission_messages_total', 'Messages submitted over SMTP submission by result: accepted (queued for sending) or rejected.'),
      imapLogins: new Counter(
        'mailroom_imap_logins_total',
        'IMAP LOGIN and AUTHENTICATE attempts by result: accepted, rejected (NO [AUTHENTICATIONFAILED]), rate_limited (NO [UNAVAILABLE]: too many failures for that user from the client address), limited (NO [LIMIT]: imap.connections_per_account).',
      ),
      httpSeries: new Map(),
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
export const countSmtpLimited = (ctx: AppContext, reason: 'per_ip' | 'session_time' | 'junk_commands' | 'memory_budget') => metricsOf(ctx).smtpLimited.inc({ reason });

export const countInboundAnalysed = (ctx: AppContext, where: 'worker' | 'main') => metricsOf(ctx).inboundAnalysed.inc({ where });
export const countSubmissionAuth = (ctx: AppContext, result: 'accepted' | 'rejected' | 'rate_limited' | 'unavailable') => metricsOf(ctx).submissionAuth.inc({ result });
export const countSubmission = (ctx: AppContext, result: 'accepted' | 'rejected') => metricsOf(ctx).submissionMessages.inc({ result });
export const countImapLogin = (ctx: AppContext, result: 'accepted' | 'rejected' | 'rate_limited' | 'limited') => metricsOf(ctx).imapLogins.inc({ result });

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Called once per answered request from the HTTP app's global step, with the pattern of the
 * route that answered (matched afterwards for answers given before routing, "unmatched" for none).
 */
export function observeRequest(ctx: AppContext, method: string | undefined, route: string, status: number, seconds: number): void {
  const m = method && KNOWN_METHODS.has(method) ? method : 'OTHER';
  const metrics = metricsOf(ctx);
  // Label text is built once per series, not per request.
  const key = `${m} ${route} ${status}`;
  let s = metrics.httpSeries.get(key);
  if (!s) {
    s = { requests: metrics.httpRequests.series({ method: m, route, status: String(status) }), duration: metrics.httpDuration.series({ method: m, route }) };
    metrics.httpSeries.set(key, s);
  }
  s.requests.value++;
  metrics.httpDuration.add(s.duration, seconds);
}

// ---- scrape ---------------------------------------------------------------------------------

/**
 * Counts of an append-only log table (events, webhook_attempts) by one column, kept up to date
 * incrementally: each scrape counts only rows added since the last one, in chunks with a
 * yield between them, so a table of millions of rows never blocks the process (a full GROUP BY
 * over 200k rows takes 150-300 ms). The rows never change after insert, so the totals are true
 * counters. (Rows deleted with their account are not subtracted.) A position orders a table's
 * rows as they were added (src/store/repo/metrics.ts says what it is on each engine).
 */
interface LogCounter {
  table: LogTable;
  column: 'type' | 'status';
  last: LogPosition;
  counts: Map<string, number>;
}

const CHUNK_ROWS = 20_000;

interface ScrapeState {
  logs: LogCounter[];
  /** Scrapes run one at a time: two catching up at once would count rows twice. */
  running: Promise<unknown>;
}

const scrapeStates = new WeakMap<AppContext, ScrapeState>();

async function catchUp(ctx: AppContext, c: LogCounter): Promise<void> {
  const max = await findLastLogPosition(ctx.db, c.table);
  if (max === null) return;
  while (c.last < max) {
    // The end of the next chunk: CHUNK_ROWS rows on, or the last row.
    const hi = (await findLogPositionAfter(ctx.db, c.table, c.last, max, CHUNK_ROWS)) ?? max;
    const rows = await countLogRowsBetween(ctx.db, c.table, c.column, c.last, hi);
    for (const [k, n] of rows) c.counts.set(k, (c.counts.get(k) ?? 0) + n);
    c.last = hi;
    if (c.last < max) await new Promise((resolve) => setImmediate(resolve));
  }
}

function counterLines(name: string, help: string, label: string, counts: Map<string, number>): string[] {
  return [`# HELP ${name} ${help}`, `# TYPE ${name} counter`, ...[...counts].sort().map(([k, n]) => `${name}${labelText({ [label]: k })} ${n}`)];
}

/**
 * Everything, in the Prometheus text format. Job, inbox and domain gauges are read now (small
 * or index-only queries); the event and delivery-attempt counters catch up incrementally.
 */
export function renderMetrics(ctx: AppContext): Promise<string> {
  let state = scrapeStates.get(ctx);
  if (!state) {
    state = {
      logs: [
        { table: 'events', column: 'type', last: startOfLog(ctx.db), counts: new Map() },
        { table: 'webhook_attempts', column: 'status', last: startOfLog(ctx.db), counts: new Map() },
      ],
      running: Promise.resolve(),
    };
    scrapeStates.set(ctx, state);
  }
  const s = state;
  const run = s.running.then(() => scrape(ctx, s));
  s.running = run.catch(() => undefined);
  return run;
}

async function scrape(ctx: AppContext, state: ScrapeState): Promise<string> {
  for (const c of state.logs) await catchUp(ctx, c);
  const m = metricsOf(ctx);
  const nowMs = ctx.clock.now().getTime();
  const lines: string[] = [];

  lines.push(...gauge('mailroom_start_time_seconds', 'When this server started, as a Unix time.', [{ labels: {}, value: Math.floor(m.startedAt / 1000) }]));
  const mem = process.memoryUsage();
  lines.push(...gauge('mailroom_process_resident_memory_bytes', 'Resident memory of the process.', [{ labels: {}, value: mem.rss }]));
  lines.push(...gauge('mailroom_process_heap_used_bytes', 'JavaScript heap in use.', [{ labels: {}, value: mem.heapUsed }]));

  lines.push(...m.httpRequests.render(), ...m.httpDuration.render());
  lines.push(...m.smtpSessions.render(), ...m.smtpMessages.render(), ...m.smtpRecipients.render(), ...m.smtpLimited.render(), ...m.inboundAnalysed.render());
  lines.push(...m.submissionAuth.render(), ...m.submissionMessages.render(), ...m.imapLogins.render());

  // One transaction: the gauges describe one moment.
  const snapshot = await ctx.store.transaction(async (tx) => ({
    jobs: await countJobsByKindAndStatus(tx),
    live: await summarizeLiveJobs(tx, nowMs),
    inboxes: await countInboxesByStatus(tx),
    domains: await countDomainsBySendingStatus(tx),
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
      snapshot.live.filter((r) => r.status === 'queued').map((r) => ({ labels: { kind: r.kind }, value: Number(r.due) })),
    ),
  );
  lines.push(
    ...gauge(
      'mailroom_jobs_oldest_age_seconds',
      'Age of the oldest queued or running job, by kind and status.',
      snapshot.live.filter((r) => r.oldest).map((r) => ({ labels: { kind: r.kind, status: r.status }, value: Math.max(0, Math.round((nowMs - Date.parse(r.oldest!)) / 1000)) })),
    ),
  );
  const [events, attempts] = state.logs;
  lines.push(
    ...counterLines(
      'mailroom_events_total',
      'Events recorded, by type: message.received, and the delivery outcomes message.sent, message.delivered, message.bounced, message.complained; message.canceled; domain.verified.',
      'type',
      events.counts,
    ),
  );
  lines.push(...counterLines('mailroom_webhook_attempts_total', 'Webhook delivery attempts by outcome: success, pending (failed, retry scheduled), failed (final).', 'status', attempts.counts));
  lines.push(
    ...gauge(
      'mailroom_inboxes',
      'Inboxes by status.',
      snapshot.inboxes.map((r) => ({ labels: { status: r.status }, value: Number(r.n) })),
    ),
  );
  lines.push(
    ...gauge(
      'mailroom_domains',
      'Custom domains by sending status.',
      snapshot.domains.map((r) => ({ labels: { sending_status: r.status }, value: Number(r.n) })),
    ),
  );
  return lines.join('\n') + '\n';
}

/** Content-Type of the text exposition format. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
