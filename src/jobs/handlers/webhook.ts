// Webhook delivery: one job = one event to one webhook; one run = one signed POST, logged in
// webhook_attempts in the transaction that records the job's outcome. Retries follow
// `webhooks.retry_schedule`; the target's addresses are checked again before every attempt
// and the connection goes to the checked address (no DNS-rebinding bypass).
import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { AppContext, Service } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { DnsUnavailableError } from '../../dns.ts';
import { WEBHOOK_JOB, type WebhookJobPayload } from '../../domain/webhooks/webhook-fanout.ts';
import { parseWebhookUrl, resolveTarget, UnsafeTargetError, type ResolvedTarget } from '../../domain/webhooks/webhook-targets.ts';
import type { AttemptStatus } from '../../domain/webhooks/webhooks.ts';
import { newId } from '../../ids.ts';
import type { JobHandler } from '../runner.ts';
import { fail, ok, retry, type Commit, type JobOutcome } from '../table.ts';
import { failPendingAttemptsOfJob, insertAttempts, listDeliveryRows } from '../../store/repo/webhooks.ts';
import { eventPayloads } from '../../domain/events/events.ts';
import { pairKey, pairOf, sendAlongRow, sharedReadsOf } from '../../store/store.ts';

export const SIGNATURE_HEADER = 'X-Service-Signature';

/** Lowercase hex HMAC-SHA256 of the exact bytes sent, keyed with the webhook's secret. */
export const signBody = (secret: string, body: Buffer | string): string => createHmac('sha256', secret).update(body).digest('hex');

/**
 * Standard Webhooks (standardwebhooks.com, "Signature scheme"): `v1,` + base64 HMAC-SHA256 of
 * `<webhook-id>.<webhook-timestamp>.<body>`. The key is the UTF-8 bytes of the whole secret
 * (`whsec_…` included), so the `standardwebhooks` libraries take it base64-encoded.
 */
export function standardSignature(secret: string, id: string, timestamp: number, body: Buffer): string {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${id}.${timestamp}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

interface PostResult {
  status?: number;
  error?: string;
  durationMs: number;
}

/** What a write to, or a read from, a socket the other side has closed fails with. */
const STALE = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/** A `lookup` that answers with the already-checked address, whatever the name. */
function pinnedLookup(target: { address: string; family: 4 | 6 }): LookupFunction {
  return ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => {
    if (opts?.all) cb(null, [{ address: target.address, family: target.family }]);
    else cb(null, target.address, target.family);
  }) as unknown as LookupFunction;
}

/**
 * Connections kept open between the deliveries of a server to the same receiver: a new TCP
 * connection per POST (and for https a new TLS handshake) cost both sides more than the POST
 * itself. One keep-alive agent per receiver and checked address, so that a reused socket always
 * leads to the address this delivery's own check answered (a name that now resolves elsewhere
 * gets a new agent, and a new connection). It keeps as many idle sockets as a webhook may have
 * deliveries in flight (`webhooks.concurrency_per_webhook`): with fewer, each wave of finished
 * POSTs closed the sockets past the limit and the next wave opened new ones (bench (o), 10,000
 * messages at 8 in flight and 4 kept: 4,335 connections for about 11,500 POSTs). Idle sockets
 * close after IDLE_SOCKET_MS, or sooner when the receiver's Keep-Alive header says so (Node's
 * agent reads it), and do not hold the process open.
 */
const MAX_AGENTS = 64;
const IDLE_SOCKET_MS = 4_000;

const agentsOf = new WeakMap<AppContext, Map<string, http.Agent>>();

/** The agent for `target`, made on first use; the least recently used of MAX_AGENTS is closed. */
export function webhookAgent(ctx: AppContext, target: ResolvedTarget): http.Agent {
  let agents = agentsOf.get(ctx);
  if (!agents) agentsOf.set(ctx, (agents = new Map()));
  const key = `${target.url.protocol}//${target.host}:${target.url.port}@${target.addresses[0]?.address ?? ''}`;
  let agent = agents.get(key);
  if (agent) agents.delete(key);
  else {
    const options = { keepAlive: true, maxFreeSockets: ctx.config.webhooks.concurrency_per_webhook, timeout: IDLE_SOCKET_MS };
    agent = target.url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
  }
  agents.set(key, agent);
  if (agents.size > MAX_AGENTS) {
    const [oldest, old] = agents.entries().next().value!;
    agents.delete(oldest);
    old.destroy();
  }
  return agent;
}

/** Closes the server's kept-alive webhook connections (at shutdown, after the job runner stopped). */
export function createWebhookConnections(ctx: AppContext): Service {
  return {
    name: 'webhook connections',
    async start() {},
    async stop() {
      for (const agent of agentsOf.get(ctx)?.values() ?? []) agent.destroy();
      agentsOf.delete(ctx);
    },
  };
}

/**
 * One POST. Redirects are not followed (node:http never does): a 3xx is a failure. With an
 * `agent`, a kept-alive connection is reused; one the receiver closed meanwhile (it may close an
 * idle connection just as the request goes out) is retried once on a new connection.
 */
export async function post(target: ResolvedTarget, body: Buffer, headers: Record<string, string>, timeoutMs: number, signal: AbortSignal, ca?: string[], agent?: http.Agent): Promise<PostResult> {
  const started = performance.now();
  const { staleSocket, ...first } = await postOnce(target, body, headers, timeoutMs, signal, started, ca, agent);
  if (!staleSocket || signal.aborted) return first;
  const { staleSocket: _, ...second } = await postOnce(target, body, headers, timeoutMs, signal, started, ca, agent);
  return second;
}

function postOnce(
  target: ResolvedTarget,
  body: Buffer,
  headers: Record<string, string>,
  timeoutMs: number,
  signal: AbortSignal,
  started: number,
  ca: string[] | undefined,
  agent: http.Agent | undefined,
): Promise<PostResult & { staleSocket?: boolean }> {
  const { url } = target;
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    let settled = false;
    const settle = (r: Omit<PostResult, 'durationMs'> & { staleSocket?: boolean }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...r, durationMs: elapsed() });
    };
    const req = (url.protocol === 'https:' ? https : http).request({
      method: 'POST',
      protocol: url.protocol,
      // Host header and TLS SNI stay the name; only the socket goes to the checked address.
      hostname: target.host,
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      headers: { ...headers, 'Content-Length': String(body.length) },
      agent: agent ?? false,
      // Certificate authorities beside the system's (TLS reports: outbound.tls_ca_file).
      ca,
      lookup: target.addresses.length ? pinnedLookup(target.addresses[0]) : undefined,
      // The job's deadline (jobs.attempt_timeout) ends the request too: an 'error' event, a failure.
      signal,
    });
    const timer = setTimeout(() => {
      settle({ error: `no answer within ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    req.on('response', (res) => {
      settle({ status: res.statusCode });
      // The body is not needed; read and drop it, but never hold a socket longer than the timeout.
      res.resume();
      const cut = setTimeout(() => req.destroy(), timeoutMs);
      cut.unref();
      res.on('close', () => clearTimeout(cut));
      res.on('error', () => {});
    });
    // A reused socket that fails before any answer was closed by the receiver while idle.
    req.on('error', (err: NodeJS.ErrnoException) => settle({ error: err.message, staleSocket: req.reusedSocket && STALE.has(err.code ?? '') }));
    req.end(body);
  });
}

/**
 * An attempt is logged `pending` while its retry is scheduled; once a later attempt of the same
 * job is logged it is `failed` (failed, then retried), so no row stays pending after its job
 * ended. The job's attempts are all younger than the job (index webhook_id, created_at).
 */
function supersedePending(tx: Tx, job: { id: string; createdAt: string }, webhookId: string): Promise<void> {
  return failPendingAttemptsOfJob(tx, webhookId, job.id, job.createdAt);
}

function logAttempt(
  job: { id: string; createdAt: string; attempts: number },
  hook: { id: string; accountId: string },
  event: { id: string; type: string },
  id: string,
  createdAt: string,
  attempt: number,
  status: AttemptStatus,
  result: PostResult,
): Commit {
  return async (tx) => {
    if (job.attempts > 1) await supersedePending(tx, job, hook.id);
    // Written at the end of the transaction with the other outcomes' rows (sendAlongRow).
    sendAlongRow(
      tx,
      'webhook attempts',
      {
        id,
        accountId: hook.accountId,
        webhookId: hook.id,
        eventId: event.id,
        eventType: event.type,
        jobId: job.id,
        status,
        httpStatus: result.status ?? null,
        durationMs: result.durationMs,
        attempt,
        error: result.error ?? null,
        createdAt,
      },
      insertAttempts,
    );
  };
}

/**
 * What an attempt reads first, shared by the deliveries a claim hands out at once (sharedReads):
 * one statement for all of them, not one a delivery. By `${webhookId} ${eventId}`.
 */
const readDelivery = sharedReadsOf((ctx: AppContext, keys: string[]) =>
  listDeliveryRows(
    ctx.db,
    keys.map(pairOf).map(([webhookId, eventId]) => ({ webhookId, eventId })),
  ),
);

export const webhookHandler: JobHandler = {
  kind: WEBHOOK_JOB,
  schedule: (ctx) => ctx.config.webhooks.retry_schedule,
  // A webhook is a partition (webhook-fanout.ts): one receiver gets at most this many at once.
  partitionLimit: (ctx) => ctx.config.webhooks.concurrency_per_webhook,
  // An attempt's outcome writes its log row without reading (a retry's supersedes the pending one first).
  finishTogether: true,
  async run(ctx: AppContext, job, signal): Promise<JobOutcome> {
    const payload = JSON.parse(job.payload) as WebhookJobPayload;
    const found = await readDelivery(ctx, pairKey(payload.webhookId, payload.eventId));
    // Gone with its account (cascade): nobody is left to deliver to or to read a log.
    if (!found) return fail('webhook or event no longer exists', (tx) => supersedePending(tx, job, payload.webhookId));
    const { hook, event } = found;

    // The attempt's time is when it was claimed (the job's updatedAt): the next retry is due a
    // schedule step after that same instant, so the log shows the schedule exactly.
    const now = new Date(job.updatedAt);
    const attempt = (payload.attemptOffset ?? 0) + job.attempts;
    const last = job.attempts >= job.maxAttempts;
    const id = newId('dlv', now.getTime());
    const record = (status: AttemptStatus, result: PostResult) => logAttempt(job, hook, event, id, now.toISOString(), attempt, status, result);

    // Paused or deleted: the receiver gets nothing more. A delivery queued before (a retry, or
    // a first attempt not yet run) is dropped and logged as failed, with the reason; a paused
    // webhook's can be replayed after resuming. A POST already under way when the webhook was
    // deleted finishes (it is not queued), but its retries are dropped here.
    if (hook.deletedAt || !hook.isActive) {
      const reason = hook.deletedAt ? 'webhook deleted: delivery dropped' : 'webhook inactive: delivery dropped';
      return fail(reason, record('failed', { error: reason, durationMs: 0 }));
    }

    // The bodies of the event's message came with the event (listDeliveryRows).
    const [data] = await eventPayloads(ctx, [event], undefined, event.messageId ? new Map([[event.messageId, found]]) : undefined);
    const envelope = { id: event.id, type: event.type, createdAt: event.createdAt, webhookId: hook.id, data };
    const body = Buffer.from(JSON.stringify(envelope), 'utf8');
    // webhook-id is the event id, the same on every retry and replay, so receivers can dedupe.
    const timestamp = Math.floor(ctx.clock.now().getTime() / 1000);
    const headers = {
      'webhook-id': event.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': standardSignature(hook.secret, event.id, timestamp, body),
      'Content-Type': 'application/json',
      'User-Agent': 'mailroom-webhooks/1',
      [SIGNATURE_HEADER]: signBody(hook.secret, body),
      'X-Service-Event-Id': event.id,
      'X-Service-Event-Type': event.type,
      'X-Service-Delivery-Id': id,
      'X-Service-Attempt': String(attempt),
    };

    let result: PostResult;
    try {
      const target = await resolveTarget(ctx, parseWebhookUrl(hook.url, ctx.config.webhooks.allow_insecure_targets));
      result = await post(target, body, headers, ctx.config.webhooks.timeout, signal, undefined, webhookAgent(ctx, target));
    } catch (err) {
      // Unsafe address, DNS outage, or a URL saved under looser settings: a failed attempt,
      // logged like any other and retried on the schedule (DNS may come back, or change).
      const what = err instanceof UnsafeTargetError ? 'target refused' : err instanceof DnsUnavailableError ? 'DNS unavailable' : 'target invalid';
      result = { error: `${what}: ${(err as Error)?.message ?? String(err)}`, durationMs: 0 };
    }

    const success = result.status !== undefined && result.status >= 200 && result.status < 300;
    ctx.log.info('webhook delivery', { webhookId: hook.id, eventId: event.id, attempt, httpStatus: result.status, error: result.error, ms: result.durationMs });
    if (success) return ok(record('success', result));
    const reason = result.error ?? `HTTP ${result.status}${result.status! >= 300 && result.status! < 400 ? ' (redirects are not followed)' : ''}`;
    if (!result.error) result.error = reason;
    return last ? fail(reason, record('failed', result)) : retry(reason, record('pending', result));
  },
};
