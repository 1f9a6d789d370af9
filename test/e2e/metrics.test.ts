// Observability: GET /metrics on its own listen address (off by default, never on the API
// port), request counters by route pattern and status, SMTP counters, job queue depth and
// age, events and webhook attempts by outcome; and the request id shared by the error
// body, the X-Request-Id header and the JSON log line.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { configFrom, ConfigError } from '../../src/config.ts';
import { enqueueJob } from '../../src/jobs/table.ts';
import { createLogger } from '../../src/log.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { smtpTransport } from '../support/mail.ts';

let t: TestServer;
let dns: TestDns;
let hook: Receiver;
let metricsUrl: string;
const logLines: Array<Record<string, unknown>> = [];

before(async () => {
  dns = await startTestDns();
  hook = await startReceiver(200);
  const log = createLogger((line) => void logLines.push(JSON.parse(line)));
  t = await startTestServer({ metrics: { listen: '127.0.0.1:0' }, dns: { servers: [dns.server], timeout: '1s' } }, { log });
  const svc = t.server.services.find((s) => s.name === 'metrics') as { port: number } | undefined;
  assert.ok(svc && svc.port > 0, 'the metrics listener is up');
  metricsUrl = `http://127.0.0.1:${svc.port}/metrics`;
});

after(async () => {
  await t?.close();
  await hook?.close();
  await dns?.close();
});

/** Parses the text format into "name{labels}" → value. */
async function scrape(): Promise<Map<string, number>> {
  const res = await fetch(metricsUrl);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  const out = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^(\S+) (\S+)$/.exec(line);
    assert.ok(m, `malformed line: ${line}`);
    out.set(m[1], Number(m[2]));
  }
  return out;
}

describe('metrics listener', () => {
  test('is off by default, and /metrics is never served on the API port', async () => {
    const plain = await startTestServer();
    try {
      const svc = plain.server.services.find((s) => s.name === 'metrics') as { port: number } | undefined;
      assert.equal(svc?.port, 0);
      expectError(await plain.api('GET', '/metrics'), 404, 'NOT_FOUND');
    } finally {
      await plain.close();
    }
    expectError(await t.api('GET', '/metrics'), 404, 'NOT_FOUND');
  });

  test('a bad metrics.listen stops start-up naming the key', () => {
    assert.throws(
      () => configFrom({ metrics: { listen: 'everywhere' } }),
      (e: unknown) => e instanceof ConfigError && /`metrics\.listen`/.test(e.message),
    );
    assert.equal(configFrom({}).metrics.listen, null);
  });

  test('answers only GET and HEAD /metrics', async () => {
    assert.equal((await fetch(metricsUrl.replace('/metrics', '/'))).status, 404);
    assert.equal((await fetch(metricsUrl, { method: 'POST' })).status, 404);
    const head = await fetch(metricsUrl, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
  });
});

describe('what the metrics count', () => {
  test('HTTP requests by method, route pattern and status; unknown paths share one series', async () => {
    const before = await scrape();
    const delta = (m: Map<string, number>, k: string) => (m.get(k) ?? 0) - (before.get(k) ?? 0);
    assert.equal((await t.api('GET', '/inboxes')).status, 200);
    assert.equal((await t.api('GET', '/inboxes')).status, 200);
    expectError(await t.api('GET', '/inboxes/inb_missing'), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('GET', '/no/such/path-1'), 404, 'NOT_FOUND');
    expectError(await t.api('GET', '/no/such/path-2'), 404, 'NOT_FOUND');
    expectError(await t.api('GET', '/inboxes', undefined, { key: null }), 401, 'UNAUTHORIZED');
    const m = await scrape();
    assert.equal(delta(m, 'mailroom_http_requests_total{method="GET",route="/inboxes",status="200"}'), 2);
    assert.equal(delta(m, 'mailroom_http_requests_total{method="GET",route="/inboxes",status="401"}'), 1);
    assert.equal(delta(m, 'mailroom_http_requests_total{method="GET",route="/inboxes/:id",status="404"}'), 1);
    assert.equal(delta(m, 'mailroom_http_requests_total{method="GET",route="unmatched",status="404"}'), 2);
    assert.equal(delta(m, 'mailroom_http_request_duration_seconds_count{method="GET",route="/inboxes"}'), 3);
    assert.equal(delta(m, 'mailroom_http_request_duration_seconds_bucket{method="GET",route="/inboxes",le="+Inf"}'), 3);
    assert.ok(!['no/such'].some((p) => [...m.keys()].some((k) => k.includes(p))), 'raw paths never become labels');
  });

  test('the route label is the pattern that answered: fixed words before /:id, HEAD with the GET pattern, answers before routing matched by path', async () => {
    const before = await scrape();
    const delta = (m: Map<string, number>, k: string) => (m.get(k) ?? 0) - (before.get(k) ?? 0);
    assert.equal((await t.api('GET', '/webhooks/catalog')).status, 200);
    expectError(await t.api('GET', '/webhooks/whk_missing'), 404, 'WEBHOOK_NOT_FOUND');
    // POST /inboxes comes first in the registry; HEAD is answered (and counted) by GET /inboxes.
    assert.equal((await fetch(`${t.url}/inboxes`, { method: 'HEAD', headers: { authorization: `Bearer ${t.key}` } })).status, 200);
    // A HEAD whose path has no GET route, and a bad %-escape refused before routing.
    assert.equal((await fetch(`${t.url}/domains/dom_x/verify`, { method: 'HEAD', headers: { authorization: `Bearer ${t.key}` } })).status, 404);
    expectError(await t.api('GET', '/inboxes/%E0%A4%A'), 400, 'VALIDATION_ERROR');
    const m = await scrape();
    assert.equal(delta(m, 'mailroom_http_requests_total{method="GET",route="/webhooks/catalog",status="200"}'), 1);
    assert.equal(delta(m, 'mailroom_http_requests_total{method="GET",route="/webhooks/:id",status="404"}'), 1);
    assert.equal(delta(m, 'mailroom_http_requests_total{method="HEAD",route="/inboxes",status="200"}'), 1);
    assert.equal(delta(m, 'mailroom_http_requests_total{method="HEAD",route="unmatched",status="404"}'), 1);
    assert.equal(delta(m, 'mailroom_http_requests_total{method="GET",route="/inboxes/:id",status="400"}'), 1);
    assert.equal(delta(m, 'mailroom_http_request_duration_seconds_count{method="HEAD",route="/inboxes"}'), 1);
  });

  test('SMTP sessions, messages and recipients; events (delivery outcomes) and webhook attempts by outcome', async () => {
    await t.api('POST', '/webhooks', { url: `${hook.url}/in`, events: ['message.received'] });
    await t.api('POST', '/inboxes', { address: 'metrics' });
    const transport = smtpTransport(t.server.smtpPort);
    try {
      await transport.sendMail({ from: 'a@example.org', to: 'metrics@agents.test', subject: 'one', text: 'x' });
      await assert.rejects(transport.sendMail({ from: 'a@example.org', to: 'nobody@agents.test', subject: 'two', text: 'x' }));
    } finally {
      transport.close();
    }
    await hook.waitFor(1);
    const m = await until('the webhook attempt in the log', async () => {
      const s = await scrape();
      return s.get('mailroom_webhook_attempts_total{status="success"}') === 1 ? s : undefined;
    });
    assert.ok((m.get('mailroom_smtp_sessions_total') ?? 0) >= 1);
    assert.equal(m.get('mailroom_smtp_messages_total{result="accepted"}'), 1);
    assert.equal(m.get('mailroom_smtp_recipients_total{result="accepted"}'), 1);
    assert.equal(m.get('mailroom_smtp_recipients_total{result="rejected"}'), 1);
    assert.equal(m.get('mailroom_events_total{type="message.received"}'), 1);
    assert.equal(m.get('mailroom_inboxes{status="active"}'), 1);
    assert.equal(m.get('mailroom_jobs{kind="webhook",status="done"}'), 1);
  });

  test('job queue depth, due count and age of the oldest job by kind', async () => {
    const now = Date.now();
    // One job created two minutes ago and due now, one not due for an hour (nobody runs kind "probe").
    await t.server.ctx.store.transaction(async (tx) => {
      await enqueueJob(tx, new Date(now - 120_000), { kind: 'probe', payload: {}, maxAttempts: 1, runAt: now + 3_600_000 });
      await enqueueJob(tx, new Date(now - 1_000), { kind: 'probe', payload: {}, maxAttempts: 1, runAt: now + 3_600_000 });
    });
    const m = await scrape();
    assert.equal(m.get('mailroom_jobs{kind="probe",status="queued"}'), 2);
    assert.equal(m.get('mailroom_jobs_due{kind="probe"}'), 0);
    const age = m.get('mailroom_jobs_oldest_age_seconds{kind="probe",status="queued"}') ?? -1;
    assert.ok(age >= 120 && age < 3600, `oldest age ${age}`);
  });
});

describe('request ids', () => {
  test('an error body, its X-Request-Id header and the JSON log line carry the same id', async () => {
    const res = await t.api('GET', '/messages/msg_missing');
    expectError(res, 404, 'MESSAGE_NOT_FOUND');
    const id = res.body.error.requestId as string;
    assert.match(id, /^[0-9a-f]{16}$/);
    assert.equal(res.headers.get('x-request-id'), id);
    const line = await until('the request log line', async () => logLines.find((l) => l.msg === 'request' && l.requestId === id));
    assert.equal(line.status, 404);
    assert.equal(line.path, '/messages/msg_missing');
    // Every answer carries an id, successes included, and ids differ per request.
    const ok = await t.api('GET', '/inboxes');
    assert.match(ok.headers.get('x-request-id') ?? '', /^[0-9a-f]{16}$/);
    assert.notEqual(ok.headers.get('x-request-id'), id);
  });
});
