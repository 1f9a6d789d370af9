// Webhooks end to end: the API (CRUD, PUT semantics, catalog, logs, activity), signed delivery
// to a real local HTTP receiver, retries on a shortened schedule, pausing, deletion, secret
// rotation, SSRF refusals at save and at delivery (through the test DNS server), a restart
// with deliveries pending, cross-account isolation, the CLI's deliveries/replay, and the real
// event sources: mail over SMTP (message.received) and the send API (message.delivered).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createSecureContext } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EventType } from '../../src/domain/events/events.ts';
import { emitEvent } from '../support/events.ts';
import { replayDelivery } from '../../src/domain/webhooks/webhook-fanout.ts';
import { listJobs } from '../../src/jobs/table.ts';
import { runCli } from '../support/cli.ts';
import { startTestDns } from '../support/dns.ts';
import { startReceiver, type Received } from '../support/receiver.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { until as untilDefined } from '../support/wait.ts';
import { smtpTransport } from '../support/mail.ts';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { peerSkip, toolMissing } from '../support/peers.ts';

const FAST = { allow_insecure_targets: true, retry_schedule: ['100ms', '200ms', '300ms', '400ms', '500ms'], timeout: '500ms' };

/** Records an event the way the domain does: inside a transaction (a message.* event's message is stored first). */
function emit(t: TestServer, type: EventType, data?: unknown, accountId = t.accountId) {
  return emitEvent(t.server.ctx, accountId, type, data);
}

/** Waits until `fn` returns a truthy value (the shared poller, which waits for non-undefined). */
const until = <T>(fn: () => Promise<T | undefined | false> | T | undefined | false, what: string, timeoutMs = 8000): Promise<T> => untilDefined(what, async () => (await fn()) || undefined, timeoutMs);

const verify = (secret: string, r: Received) => {
  const expected = createHmac('sha256', secret).update(r.raw).digest();
  const got = Buffer.from(String(r.headers['x-service-signature']), 'hex');
  return got.length === expected.length && timingSafeEqual(got, expected);
};

async function logsOf(t: TestServer, query = '') {
  const res = await t.api('GET', `/webhooks/logs${query}`);
  assert.equal(res.status, 200, res.text);
  return res.body.data as any[];
}

test('CRUD: secret only on create and rotation, PUT changes only given fields, catalog and fixed words, validation errors', async () => {
  const t = await startTestServer({ webhooks: FAST });
  try {
    const created = await t.api('POST', '/webhooks', { url: 'http://127.0.0.1:9/hook', description: 'orders', events: ['message.received', 'message.sent'] });
    assert.equal(created.status, 201, created.text);
    const w = created.body;
    assert.match(w.id, /^whk_/);
    assert.match(w.secret, /^whsec_[A-Za-z0-9_-]{40,}$/);
    assert.deepEqual(
      { url: w.url, description: w.description, events: w.events, isActive: w.isActive },
      { url: 'http://127.0.0.1:9/hook', description: 'orders', events: ['message.received', 'message.sent'], isActive: true },
    );
    assert.ok(w.createdAt && w.updatedAt);

    const got = await t.api('GET', `/webhooks/${w.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.secret, undefined);
    const { secret: _secret, ...withoutSecret } = w;
    assert.deepEqual(got.body, withoutSecret);
    const list = await t.api('GET', '/webhooks');
    assert.equal(list.status, 200);
    assert.equal(list.body.data.length, 1);
    assert.ok(!list.text.includes('whsec_'));

    // Fixed words win over /webhooks/:id.
    const catalog = await t.api('GET', '/webhooks/catalog');
    assert.equal(catalog.status, 200);
    assert.deepEqual(catalog.body.data.map((e: any) => e.name).sort(), [
      'domain.verified',
      'message.bounced',
      'message.canceled',
      'message.complained',
      'message.delivered',
      'message.held',
      'message.received',
      'message.sent',
    ]);
    assert.ok(catalog.body.data.every((e: any) => typeof e.description === 'string' && e.description.length > 10));
    assert.deepEqual((await t.api('GET', '/webhooks/logs')).body, { data: [] });
    assert.equal((await t.api('GET', '/webhooks/activity')).body.hours, 6);

    // PUT: only the given fields change.
    const put1 = await t.api('PUT', `/webhooks/${w.id}`, { description: 'renamed' });
    assert.equal(put1.status, 200);
    assert.deepEqual([put1.body.url, put1.body.description, put1.body.events, put1.body.isActive], [w.url, 'renamed', w.events, true]);
    assert.equal(put1.body.secret, undefined);
    // events replaces the list; [] and null mean all events.
    assert.deepEqual((await t.api('PUT', `/webhooks/${w.id}`, { events: ['domain.verified'] })).body.events, ['domain.verified']);
    assert.equal((await t.api('PUT', `/webhooks/${w.id}`, { events: [] })).body.events, null);
    assert.deepEqual((await t.api('PUT', `/webhooks/${w.id}`, { events: ['message.bounced'] })).body.events, ['message.bounced']);
    assert.equal((await t.api('PUT', `/webhooks/${w.id}`, { events: null })).body.events, null);
    assert.equal((await t.api('PUT', `/webhooks/${w.id}`, { description: null })).body.description, null);
    const paused = await t.api('PUT', `/webhooks/${w.id}`, { isActive: false });
    assert.equal(paused.body.isActive, false);
    assert.equal(paused.body.url, w.url);

    // Rotation returns a new secret once.
    const rotated = await t.api('PUT', `/webhooks/${w.id}`, { rotateSecret: true });
    assert.equal(rotated.status, 200);
    assert.match(rotated.body.secret, /^whsec_/);
    assert.notEqual(rotated.body.secret, w.secret);
    assert.equal((await t.api('GET', `/webhooks/${w.id}`)).body.secret, undefined);

    // Validation.
    expectError(await t.api('POST', '/webhooks', { url: 'http://127.0.0.1:9/', events: ['message.opened'] }), 400, 'VALIDATION_ERROR');
    const unknownType = await t.api('PUT', `/webhooks/${w.id}`, { events: ['message.received', 'nope'] });
    expectError(unknownType, 400, 'VALIDATION_ERROR');
    assert.match(unknownType.body.error.message, /events\[1\]/);
    expectError(await t.api('POST', '/webhooks', {}), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', '/webhooks', { url: 'http://127.0.0.1:9/', secret: 'mine' }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', '/webhooks', { url: 'not a url' }), 400, 'INVALID_WEBHOOK_URL');
    expectError(await t.api('POST', '/webhooks', { url: 'ftp://example.com/x' }), 400, 'INVALID_WEBHOOK_URL');
    expectError(await t.api('POST', '/webhooks', { url: 'https://user:pw@example.com/x' }), 400, 'INVALID_WEBHOOK_URL');
    expectError(await t.api('PUT', `/webhooks/${w.id}`, { isActive: 'yes' }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/webhooks/logs?limit=201'), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/webhooks/logs?limit=0'), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/webhooks/logs?status=done'), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/webhooks/logs?hours=abc'), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/webhooks/activity?hours=0'), 400, 'VALIDATION_ERROR');
    assert.equal((await t.api('GET', '/webhooks/logs?limit=200')).status, 200);

    // Not found, and other accounts see nothing.
    expectError(await t.api('GET', '/webhooks/whk_nope'), 404, 'WEBHOOK_NOT_FOUND');
    expectError(await t.api('PUT', '/webhooks/whk_nope', { description: 'x' }), 404, 'WEBHOOK_NOT_FOUND');
    expectError(await t.api('DELETE', '/webhooks/whk_nope'), 404, 'WEBHOOK_NOT_FOUND');
    const other = await t.newAccount('other');
    expectError(await t.api('GET', `/webhooks/${w.id}`, undefined, { key: other.key }), 404, 'WEBHOOK_NOT_FOUND');
    expectError(await t.api('PUT', `/webhooks/${w.id}`, { isActive: true }, { key: other.key }), 404, 'WEBHOOK_NOT_FOUND');
    expectError(await t.api('DELETE', `/webhooks/${w.id}`, undefined, { key: other.key }), 404, 'WEBHOOK_NOT_FOUND');
    expectError(await t.api('GET', `/webhooks/logs?webhookId=${w.id}`, undefined, { key: other.key }), 404, 'WEBHOOK_NOT_FOUND');
    expectError(await t.api('GET', `/webhooks/activity?webhookId=${w.id}`, undefined, { key: other.key }), 404, 'WEBHOOK_NOT_FOUND');
    assert.deepEqual((await t.api('GET', '/webhooks', undefined, { key: other.key })).body.data, []);
    expectError(await t.api('GET', '/webhooks', undefined, { key: null }), 401, 'UNAUTHORIZED');

    // Delete: 204, then gone from reads; a second delete is 404.
    assert.equal((await t.api('DELETE', `/webhooks/${w.id}`)).status, 204);
    expectError(await t.api('GET', `/webhooks/${w.id}`), 404, 'WEBHOOK_NOT_FOUND');
    expectError(await t.api('PUT', `/webhooks/${w.id}`, { isActive: true }), 404, 'WEBHOOK_NOT_FOUND');
    expectError(await t.api('DELETE', `/webhooks/${w.id}`), 404, 'WEBHOOK_NOT_FOUND');
    assert.deepEqual((await t.api('GET', '/webhooks')).body.data, []);
  } finally {
    await t.close();
  }
});

test('delivery: signed POST of the envelope, logged with both variants, counted in activity', async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: FAST });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/hooks/in?x=1` })).body;
    const ev = await emit(t, 'message.received', { id: 'msg_1', subject: 'Hi ☃', hasAttachments: false });
    const [r] = await rx.waitFor(1);
    assert.equal(r.method, 'POST');
    assert.equal(r.path, '/hooks/in?x=1');
    assert.equal(r.headers['content-type'], 'application/json');
    assert.ok(verify(w.secret, r), 'signature verifies over the raw body');
    assert.match(String(r.headers['x-service-signature']), /^[0-9a-f]{64}$/);
    assert.equal(r.headers['x-service-event-id'], ev.id);
    assert.equal(r.headers['x-service-attempt'], '1');
    assert.deepEqual(r.json, { id: ev.id, type: 'message.received', createdAt: ev.createdAt, webhookId: w.id, data: { id: 'msg_1', subject: 'Hi ☃', hasAttachments: false } });

    const [entry] = await until(async () => {
      const l = await logsOf(t);
      return l.length === 1 && l;
    }, 'log entry');
    assert.deepEqual(Object.keys(entry).sort(), [
      'attempt',
      'attempts',
      'createdAt',
      'durationMs',
      'error',
      'event',
      'eventId',
      'eventType',
      'httpStatus',
      'id',
      'responseStatus',
      'status',
      'webhookId',
    ]);
    assert.match(entry.id, /^dlv_/);
    assert.equal(entry.id, r.headers['x-service-delivery-id']);
    assert.deepEqual(
      [entry.eventId, entry.eventType, entry.event, entry.webhookId, entry.status, entry.httpStatus, entry.responseStatus, entry.attempt, entry.attempts, entry.error],
      [ev.id, 'message.received', 'message.received', w.id, 'success', 200, 200, 1, 1, null],
    );
    assert.ok(Number.isInteger(entry.durationMs) && entry.durationMs >= 0);

    const act = (await t.api('GET', `/webhooks/activity?webhookId=${w.id}`)).body;
    assert.equal(act.webhookId, w.id);
    assert.equal(act.hours, 6);
    assert.equal(act.successCount, 1);
    assert.equal(act.failureCount, 0);
    assert.equal(act.buckets.length, 6);
    const hourOf = (iso: string) => new Date(Math.floor(Date.parse(iso) / 3_600_000) * 3_600_000).toISOString();
    assert.deepEqual(
      act.buckets.find((b: any) => b.timestamp === hourOf(entry.createdAt)),
      { timestamp: hourOf(entry.createdAt), success: 1, failure: 0 },
    );
    assert.ok(act.buckets.every((b: any, i: number) => i === 0 || Date.parse(b.timestamp) - Date.parse(act.buckets[i - 1].timestamp) === 3_600_000));
    assert.equal((await t.api('GET', '/webhooks/activity?hours=24')).body.buckets.length, 24);

    // Subscriptions filter by type: a domain.verified event is not sent to a message-only hook.
    const onlyBounced = (await t.api('POST', '/webhooks', { url: `${rx.url}/bounced`, events: ['message.bounced'] })).body;
    await emit(t, 'domain.verified', { id: 'dom_1' });
    await emit(t, 'message.bounced', { id: 'msg_2' });
    await until(async () => (await logsOf(t)).length === 4, 'four deliveries logged');
    assert.equal(rx.received.length, 4, 'the first hook got both, the bounced-only hook got one');
    assert.deepEqual(
      rx.received.filter((x) => x.path === '/bounced').map((x) => x.json.type),
      ['message.bounced'],
    );
    assert.ok(rx.received.filter((x) => x.path === '/bounced').every((x) => verify(onlyBounced.secret, x)));
  } finally {
    await t.close();
    await rx.close();
  }
});

test('retries: six attempts spaced by the schedule, then failed; timeouts, redirects and hangs are failures', async () => {
  const rx = await startReceiver(500);
  const t = await startTestServer({ webhooks: FAST });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/fail` })).body;
    const ev = await emit(t, 'message.sent');
    await rx.waitFor(6);
    const logs = await until(async () => {
      const l = await logsOf(t, `?webhookId=${w.id}`);
      return l.length === 6 && l;
    }, 'six log entries');
    assert.deepEqual(
      logs.map((e) => e.attempt),
      [6, 5, 4, 3, 2, 1],
      'most recent first',
    );
    // Each attempt a retry followed is `failed` once that retry is logged; none stays pending.
    assert.deepEqual(
      logs.map((e) => e.status),
      ['failed', 'failed', 'failed', 'failed', 'failed', 'failed'],
    );
    assert.ok(logs.every((e) => e.httpStatus === 500 && e.eventId === ev.id && e.error === 'HTTP 500'));
    // Spacing: each attempt starts at least its delay after the previous one started (the
    // log's createdAt is the moment the attempt was claimed, which also fixes the next run time).
    const at = logs.map((e) => Date.parse(e.createdAt)).reverse();
    const delays = [100, 200, 300, 400, 500];
    for (let i = 1; i < at.length; i++) assert.ok(at[i] - at[i - 1] >= delays[i - 1], `gap ${i}: ${at[i] - at[i - 1]} ms < ${delays[i - 1]} ms`);
    assert.deepEqual(
      rx.received.map((r) => r.headers['x-service-attempt']),
      ['1', '2', '3', '4', '5', '6'],
    );
    assert.ok(
      rx.received.every((r) => r.raw.equals(rx.received[0].raw)),
      'every attempt sends the same bytes',
    );
    const job = await until(async () => (await listJobs(t.server.ctx, ['failed'])).find((j) => j.kind === 'webhook'), 'job failed');
    assert.equal(job.attempts, 6);
    // No seventh attempt.
    assert.equal((await listJobs(t.server.ctx, ['queued', 'running'])).length, 0);
    const act = (await t.api('GET', '/webhooks/activity')).body;
    assert.deepEqual([act.webhookId, act.successCount, act.failureCount], [null, 0, 6]);

    // Filters and cursor.
    assert.equal((await logsOf(t, '?status=failed')).length, 6);
    assert.equal((await logsOf(t, '?status=pending')).length, 0);
    assert.equal((await logsOf(t, '?status=success')).length, 0);
    assert.equal((await logsOf(t, '?event=message.sent')).length, 6);
    assert.equal((await logsOf(t, '?event=message.received')).length, 0);
    assert.equal((await logsOf(t, '?hours=1')).length, 6);
    const page1 = await logsOf(t, '?limit=4');
    assert.deepEqual(
      page1.map((e) => e.attempt),
      [6, 5, 4, 3],
    );
    const page2 = await logsOf(t, `?limit=4&before=${page1.at(-1).id}`);
    assert.deepEqual(
      page2.map((e) => e.attempt),
      [2, 1],
    );

    // Slow answers, hangs and redirects: each a failed attempt, then success.
    assert.equal((await t.api('DELETE', `/webhooks/${w.id}`)).status, 204);
    const w2 = (await t.api('POST', '/webhooks', { url: `${rx.url}/mixed`, events: ['domain.verified'] })).body;
    const before = rx.received.length;
    rx.script({ status: 200, delayMs: 900 }, 'hang', { status: 302, headers: { location: `${rx.url}/elsewhere` } }, 204);
    await emit(t, 'domain.verified', { id: 'dom_1' });
    await rx.waitFor(before + 4);
    const mixed = await until(async () => {
      const l = await logsOf(t, `?webhookId=${w2.id}`);
      return l.length === 4 && l;
    }, 'four attempts');
    assert.deepEqual(mixed.map((e) => [e.attempt, e.status, e.httpStatus]).reverse(), [
      [1, 'failed', null],
      [2, 'failed', null],
      [3, 'failed', 302],
      [4, 'success', 204],
    ]);
    assert.match(mixed[3].error, /no answer within 500 ms/);
    assert.match(mixed[1].error, /redirects are not followed/);
    assert.ok(!rx.received.some((r) => r.path === '/elsewhere'), 'the redirect was not followed');
  } finally {
    await t.close();
    await rx.close();
  }
});

test('pausing: nothing is queued while inactive, a queued retry is dropped and logged, resuming delivers new events only', async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: { ...FAST, retry_schedule: ['300ms'] } });
  try {
    const a = (await t.api('POST', '/webhooks', { url: `${rx.url}/a` })).body;
    const b = (await t.api('POST', '/webhooks', { url: `${rx.url}/b` })).body;
    assert.equal((await t.api('PUT', `/webhooks/${a.id}`, { isActive: false })).body.isActive, false);
    await emit(t, 'message.received', { id: 'msg_paused' });
    await rx.waitFor(1);
    assert.equal(rx.received[0].path, '/b');
    assert.equal((await listJobs(t.server.ctx, ['queued', 'running', 'done', 'failed'])).length, 1, 'no job was created for the paused webhook');

    await t.api('PUT', `/webhooks/${a.id}`, { isActive: true });
    await emit(t, 'message.received', { id: 'msg_resumed' });
    await rx.waitFor(3);
    const toA = rx.received.filter((r) => r.path === '/a');
    assert.deepEqual(
      toA.map((r) => r.json.data.id),
      ['msg_resumed'],
    );

    // A retry queued before a pause is dropped, logged as failed (replayable later).
    await t.api('PUT', `/webhooks/${b.id}`, { isActive: false });
    rx.script(500);
    await emit(t, 'message.received', { id: 'msg_retry' });
    await rx.waitFor(4);
    await t.api('PUT', `/webhooks/${a.id}`, { isActive: false });
    const logs = await until(async () => {
      const l = await logsOf(t, `?webhookId=${a.id}`);
      return l.length === 3 && l;
    }, 'dropped retry logged');
    assert.deepEqual([logs[0].status, logs[0].attempt, logs[0].httpStatus, logs[0].error], ['failed', 2, null, 'webhook inactive: delivery dropped']);
    assert.equal(rx.received.length, 4);
  } finally {
    await t.close();
    await rx.close();
  }
});

test('deletion: queued retries are dropped, later events are not delivered, logs are kept', async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: { ...FAST, retry_schedule: ['300ms'] } });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/del` })).body;
    rx.script(503);
    await emit(t, 'message.delivered', { id: 'msg_1' });
    await rx.waitFor(1);
    assert.equal((await t.api('DELETE', `/webhooks/${w.id}`)).status, 204);
    await emit(t, 'message.delivered', { id: 'msg_after_delete' });
    const logs = await until(async () => {
      const l = await logsOf(t, `?webhookId=${w.id}`);
      return l.length === 2 && l;
    }, 'retry after delete logged');
    assert.deepEqual(
      logs.map((e) => [e.attempt, e.status, e.httpStatus, e.error]),
      [
        [2, 'failed', null, 'webhook deleted: delivery dropped'],
        [1, 'failed', 503, 'HTTP 503'],
      ],
    );
    assert.deepEqual(
      rx.received.map((r) => r.json.data.id),
      ['msg_1'],
    );
    assert.equal((await listJobs(t.server.ctx, ['queued', 'running'])).length, 0, 'nothing queued for the event after deletion');
    assert.equal((await t.api('GET', `/webhooks/activity?webhookId=${w.id}`)).body.successCount, 0);
  } finally {
    await t.close();
    await rx.close();
  }
});

test('secret rotation: deliveries after a rotation are signed with the new secret only', async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: FAST });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/rot` })).body;
    await emit(t, 'message.sent');
    await rx.waitFor(1);
    assert.ok(verify(w.secret, rx.received[0]));
    const rotated = (await t.api('PUT', `/webhooks/${w.id}`, { rotateSecret: true })).body;
    await emit(t, 'message.sent');
    await rx.waitFor(2);
    assert.ok(verify(rotated.secret, rx.received[1]));
    assert.ok(!verify(w.secret, rx.received[1]), 'the old secret no longer verifies');
  } finally {
    await t.close();
    await rx.close();
  }
});

test('target safety: unsafe URLs are refused at save and re-checked at every delivery', async () => {
  const dns = await startTestDns();
  dns.set('public.test', [{ type: 'A', address: '93.184.216.34' }]);
  dns.set('internal.test', [{ type: 'A', address: '127.0.0.1' }]);
  dns.set('mixed.test', [
    { type: 'A', address: '93.184.216.34' },
    { type: 'A', address: '10.0.0.7' },
  ]);
  dns.set('ula.test', [{ type: 'AAAA', address: 'fd12::1' }]);
  dns.set('metadata.test', [{ type: 'CNAME', domain: 'internal.test' }]);
  dns.servfail('broken.test');
  const t = await startTestServer({ webhooks: { ...FAST, allow_insecure_targets: false, retry_schedule: ['50ms'] }, dns: { servers: [dns.server], timeout: '500ms' } });
  try {
    const refused = [
      'http://public.test/hook',
      'https://localhost/hook',
      'https://api.localhost/hook',
      'https://127.0.0.1/hook',
      'https://127.1.2.3/hook',
      'https://10.1.2.3/hook',
      'https://172.16.0.1/hook',
      'https://192.168.1.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://100.64.0.1/hook',
      'https://0.0.0.0/hook',
      'https://224.0.0.1/hook',
      'https://198.18.0.1/hook',
      'https://[::1]/hook',
      'https://[::]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://[::ffff:a00:1]/hook',
      'https://[64:ff9b::a9fe:a9fe]/hook',
      'https://[fe80::1]/hook',
      'https://[fd00::1]/hook',
      'https://2130706433/hook', // 127.0.0.1 as a decimal host
      'https://internal.test/hook',
      'https://metadata.test/hook',
      'https://mixed.test/hook',
      'https://ula.test/hook',
      'https://nowhere.test/hook',
      'https://broken.test/hook',
    ];
    for (const url of refused) {
      const res = await t.api('POST', '/webhooks', { url });
      assert.equal(res.body?.error?.code, 'INVALID_WEBHOOK_URL', `${url}: ${res.status} ${res.text}`);
      expectError(res, 400, 'INVALID_WEBHOOK_URL');
    }
    // A refusal the setting would lift names it, so a developer finds the switch from the error.
    for (const url of ['https://127.0.0.1/hook', 'https://[::1]/hook', 'https://internal.test/hook', 'http://public.test/hook']) {
      const res = await t.api('POST', '/webhooks', { url });
      expectError(res, 400, 'INVALID_WEBHOOK_URL');
      assert.match(res.body.error.message, /webhooks\.allow_insecure_targets = true/, url);
    }
    assert.deepEqual((await t.api('GET', '/webhooks')).body.data, []);

    const ok = await t.api('POST', '/webhooks', { url: 'https://public.test/hook' });
    assert.equal(ok.status, 201, ok.text);
    assert.equal((await t.api('POST', '/webhooks', { url: 'https://93.184.216.34/hook' })).status, 201);
    // PUT with an unsafe URL changes nothing.
    expectError(await t.api('PUT', `/webhooks/${ok.body.id}`, { url: 'https://internal.test/x', description: 'changed' }), 400, 'INVALID_WEBHOOK_URL');
    const unchanged = (await t.api('GET', `/webhooks/${ok.body.id}`)).body;
    assert.deepEqual([unchanged.url, unchanged.description], ['https://public.test/hook', null]);
    await t.api('DELETE', `/webhooks/${(await t.api('GET', '/webhooks')).body.data.find((w: any) => w.url.includes('93.184'))!.id}`);

    // DNS rebinding: public when saved, loopback at delivery — refused before connecting.
    dns.set('public.test', [{ type: 'A', address: '127.0.0.1' }]);
    await emit(t, 'message.received');
    const logs = await until(async () => {
      const l = await logsOf(t, `?webhookId=${ok.body.id}`);
      return l.length === 2 && l;
    }, 'two refused attempts');
    assert.deepEqual(
      logs.map((e) => [e.attempt, e.status, e.httpStatus]),
      [
        [2, 'failed', null],
        [1, 'failed', null],
      ],
    );
    assert.ok(
      logs.every((e) => /target refused: public\.test resolves to 127\.0\.0\.1/.test(e.error)),
      logs[0].error,
    );
  } finally {
    await t.close();
    await dns.close();
  }
});

test('restart with deliveries pending loses none', async () => {
  const rx = await startReceiver(500);
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-webhooks-'));
  const overrides = { webhooks: { ...FAST, retry_schedule: ['1500ms', '1500ms'] } };
  let t = await startTestServer(overrides, { dataDir });
  // Each start of the harness makes a fresh account; keep using the first one.
  const { key, accountId } = t;
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/r` })).body;
    const ev = await emit(t, 'message.bounced', { id: 'msg_r' });
    await rx.waitFor(1);
    await t.close();
    // The receiver comes back; the queued retry and a new event both arrive after the restart.
    rx.fallback = 200;
    t = await startTestServer(overrides, { dataDir });
    const evLate = await emit(t, 'message.complained', { id: 'msg_c' }, accountId);
    await rx.waitFor(3);
    const logs = await until(async () => {
      const l = (await t.api('GET', `/webhooks/logs?webhookId=${w.id}`, undefined, { key })).body.data as any[];
      return l.length === 3 && l;
    }, 'three entries');
    const byEvent = (id: string) => logs.filter((e) => e.eventId === id).map((e) => [e.attempt, e.status]);
    assert.deepEqual(byEvent(ev.id), [
      [2, 'success'],
      [1, 'failed'],
    ]);
    assert.deepEqual(byEvent(evLate.id), [[1, 'success']]);
    assert.ok(rx.received.every((r) => verify(w.secret, r)));
  } finally {
    await t.close();
    await rx.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('cross-account: a webhook receives only its own account events', async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: FAST });
  try {
    const other = await t.newAccount('other');
    const mine = (await t.api('POST', '/webhooks', { url: `${rx.url}/mine` })).body;
    const theirs = (await t.api('POST', '/webhooks', { url: `${rx.url}/theirs` }, { key: other.key })).body;
    await emit(t, 'message.received', { id: 'msg_mine' });
    await emit(t, 'message.received', { id: 'msg_theirs' }, other.accountId);
    await rx.waitFor(2);
    const paths = Object.fromEntries(rx.received.map((r) => [r.path, r.json]));
    assert.equal(paths['/mine'].data.id, 'msg_mine');
    assert.equal(paths['/mine'].webhookId, mine.id);
    assert.equal(paths['/theirs'].data.id, 'msg_theirs');
    assert.equal(paths['/theirs'].webhookId, theirs.id);
    await until(async () => (await logsOf(t)).length === 1, 'own log');
    assert.deepEqual(
      (await logsOf(t)).map((e) => e.webhookId),
      [mine.id],
    );
    expectError(await t.api('GET', `/webhooks/${theirs.id}`), 404, 'WEBHOOK_NOT_FOUND');
  } finally {
    await t.close();
    await rx.close();
  }
});

test("inboxIds: a scoped webhook gets only those inboxes' events; empty means every inbox; ids are checked", async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: FAST });
  try {
    const a = (await t.api('POST', '/inboxes', { address: 'scoped-a' })).body;
    const b = (await t.api('POST', '/inboxes', { address: 'scoped-b' })).body;
    const scoped = await t.api('POST', '/webhooks', { url: `${rx.url}/scoped`, inboxIds: [a.id, a.id] });
    assert.equal(scoped.status, 201, scoped.text);
    assert.deepEqual(scoped.body.inboxIds, [a.id]);
    const all = (await t.api('POST', '/webhooks', { url: `${rx.url}/all` })).body;
    assert.deepEqual(all.inboxIds, []);

    const transport = smtpTransport(t.server.smtpPort);
    try {
      for (const inbox of [a, b]) await transport.sendMail({ from: 'x@example.org', to: inbox.address, subject: `to ${inbox.address}`, text: 'hi' });
    } finally {
      transport.close();
    }
    await emit(t, 'domain.verified', { id: 'dom_1' });
    await rx.waitFor(4); // all: two messages and the domain; scoped: one message
    // Every delivery job has run: a fifth delivery would have been made by now.
    await until(async () => (await listJobs(t.server.ctx, ['queued', 'running'])).length === 0, 'every delivery job has run');
    const got = (path: string) =>
      rx.received
        .filter((r) => r.path === path)
        .map((r) => `${r.json.type} ${r.json.data.inboxId ?? '-'}`)
        .sort();
    assert.deepEqual(got('/scoped'), [`message.received ${a.id}`]);
    assert.deepEqual(got('/all'), ['domain.verified -', `message.received ${a.id}`, `message.received ${b.id}`].sort());

    // PUT changes the scope; [] and null both mean every inbox.
    assert.deepEqual((await t.api('PUT', `/webhooks/${scoped.body.id}`, { inboxIds: [b.id] })).body.inboxIds, [b.id]);
    assert.deepEqual((await t.api('GET', `/webhooks/${scoped.body.id}`)).body.inboxIds, [b.id]);
    assert.deepEqual((await t.api('PUT', `/webhooks/${scoped.body.id}`, { inboxIds: null })).body.inboxIds, []);

    const other = await t.newAccount('other');
    const theirs = (await t.api('POST', '/inboxes', { address: 'theirs' }, { key: other.key })).body;
    expectError(await t.api('POST', '/webhooks', { url: `${rx.url}/x`, inboxIds: [theirs.id] }), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('PUT', `/webhooks/${all.id}`, { inboxIds: [theirs.id] }), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('POST', '/webhooks', { url: `${rx.url}/x`, inboxIds: ['nope'] }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', '/webhooks', { url: `${rx.url}/x`, inboxIds: 'inb_x' }), 400, 'VALIDATION_ERROR');
    assert.deepEqual((await t.api('GET', `/webhooks/${all.id}`)).body.inboxIds, [], 'a refused update changes nothing');
  } finally {
    await t.close();
    await rx.close();
  }
});

test('CLI: webhooks deliveries --failed lists failures; replay sends one again as a new attempt, two replays get distinct numbers, replaying a success warns', async () => {
  const rx = await startReceiver(500);
  const t = await startTestServer({ webhooks: { ...FAST, retry_schedule: ['50ms'] } });
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-cli-wh-'));
  const config = join(dir, 'mailroom.toml');
  writeFileSync(config, `data_dir = ${JSON.stringify(t.dataDir)}\n[webhooks]\nallow_insecure_targets = true\n`);
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/replay` })).body;
    const ev = await emit(t, 'message.sent', { id: 'msg_replay' });
    await rx.waitFor(2);
    const [failed, first] = await until(async () => {
      const l = await logsOf(t, '?status=failed');
      return l.length === 2 && l;
    }, 'both attempts failed');
    assert.deepEqual([failed.attempt, first.attempt], [2, 1], 'attempt 1 is failed (then retried), not pending forever');

    const listed = await runCli(['webhooks', 'deliveries', '--failed', '--json', '--config', config]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(
      JSON.parse(listed.stdout).data.map((e: any) => [e.id, e.status, e.attempt]),
      [
        [failed.id, 'failed', 2],
        [first.id, 'failed', 1],
      ],
    );
    await assert.rejects(() => replayDelivery(t.server.ctx, 'dlv_nope'), /not found/);

    rx.fallback = 200;
    const replayed = await runCli(['webhooks', 'replay', failed.id, '--json', '--config', config]);
    assert.equal(replayed.code, 0, replayed.stderr);
    assert.equal(JSON.parse(replayed.stdout).attempt, 3);
    assert.equal(JSON.parse(replayed.stdout).alreadyDelivered, false);
    assert.doesNotMatch(replayed.stderr, /warning/);
    // The CLI is another process: nothing in this one is told. The running server notices the
    // other connection's commit and delivers within the 2 s it promises (not its 30 s timer).
    await rx.waitFor(3, 2000);
    assert.equal(rx.received[2].headers['x-service-attempt'], '3');
    assert.ok(verify(w.secret, rx.received[2]));
    assert.equal(rx.received[2].json.id, ev.id);
    assert.equal(rx.received[2].headers['webhook-id'], ev.id, 'a replay keeps webhook-id');
    const last = await until(async () => (await logsOf(t, '?status=success'))[0], 'replayed success');
    assert.deepEqual([last.attempt, last.eventId], [3, ev.id]);

    // Replaying the same failed entry twice more: each replay is a new, distinct attempt number.
    const again = [await replayDelivery(t.server.ctx, failed.id), await replayDelivery(t.server.ctx, failed.id)];
    assert.deepEqual(
      again.map((r) => r.attempt),
      [4, 5],
    );
    assert.ok(
      again.every((r) => r.alreadyDelivered),
      'attempt 3 succeeded: the event was already delivered',
    );
    await rx.waitFor(5);
    const numbers = await until(async () => {
      const l = (await logsOf(t, `?webhookId=${w.id}`)).map((e) => e.attempt);
      return l.length === 5 && l;
    }, 'five attempts logged');
    assert.deepEqual(numbers.sort(), [1, 2, 3, 4, 5]);

    // Replaying a successful delivery is allowed, with a warning.
    const ok = await runCli(['webhooks', 'replay', last.id, '--config', config]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stderr, new RegExp(`warning: event ${ev.id} was already delivered successfully to webhook ${w.id}`));
    await rx.waitFor(6, 2000);
    assert.equal(rx.received[5].headers['x-service-attempt'], '6');
  } finally {
    await t.close();
    await rx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('replay: an attempt whose retry is still scheduled (pending) cannot be replayed; a replay while retries remain is numbered after them', async () => {
  const rx = await startReceiver(500);
  const t = await startTestServer({ webhooks: { ...FAST, retry_schedule: ['1500ms', '1500ms'] } });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/p` })).body;
    await emit(t, 'message.sent');
    await rx.waitFor(1);
    const [pending] = await until(async () => {
      const l = await logsOf(t, '?status=pending');
      return l.length === 1 && l;
    }, 'first attempt pending');
    assert.equal(pending.attempt, 1);
    await assert.rejects(() => replayDelivery(t.server.ctx, pending.id), /pending: its retry is already scheduled/);
    expectError(await t.api('POST', `/dashboard/api/deliveries/${pending.id}/replay`), 400, 'VALIDATION_ERROR');
    // Attempt 2 logged (attempt 1 becomes failed); attempt 3 is still to come.
    await rx.waitFor(2, 5000);
    const logs = await until(async () => {
      const l = await logsOf(t, `?webhookId=${w.id}`);
      return l.length === 2 && l;
    }, 'two attempts');
    assert.deepEqual(
      logs.map((e) => [e.attempt, e.status]),
      [
        [2, 'pending'],
        [1, 'failed'],
      ],
    );
    rx.fallback = 200;
    // Numbered after the job's last possible attempt (3), so the two never share a number.
    assert.equal((await replayDelivery(t.server.ctx, logs[1].id)).attempt, 4);
    await rx.waitFor(4, 5000);
    const all = await until(async () => {
      const l = await logsOf(t, `?webhookId=${w.id}`);
      return l.length === 4 && l;
    }, 'four attempts');
    assert.deepEqual(all.map((e) => e.attempt).sort(), [1, 2, 3, 4]);
    assert.ok(all.every((e) => e.status !== 'pending'));
  } finally {
    await t.close();
    await rx.close();
  }
});

test('end to end: mail over SMTP becomes a signed message.received POST, also when the receiver is down at first', async () => {
  const rx = await startReceiver(200);
  const dns = await startTestDns(); // answers the inbound SPF/DKIM questions at once (NXDOMAIN)
  const t = await startTestServer({ webhooks: FAST, dns: { servers: [dns.server], timeout: '500ms' } });
  const transport = smtpTransport(t.server.smtpPort);
  try {
    const inbox = (await t.api('POST', '/inboxes', { address: 'agent' })).body;
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/inbound`, events: ['message.received'] })).body;
    const info = await transport.sendMail({
      from: 'Bob Sender <bob@example.org>',
      to: inbox.address,
      subject: 'Order 42',
      text: 'Where is it?',
      html: '<p>Where is it?</p>',
      attachments: [{ filename: 'a.txt', content: 'x' }],
    });
    const [r] = await rx.waitFor(1);
    assert.ok(verify(w.secret, r));
    assert.equal(r.json.type, 'message.received');
    assert.equal(r.json.webhookId, w.id);
    const d = r.json.data;
    assert.ok(info.response.includes(d.id), `${info.response} names ${d.id}`);
    assert.deepEqual(
      { inboxId: d.inboxId, fromAddress: d.fromAddress, fromName: d.fromName, toAddresses: d.toAddresses, subject: d.subject, hasAttachments: d.hasAttachments },
      { inboxId: inbox.id, fromAddress: 'bob@example.org', fromName: 'Bob Sender', toAddresses: [inbox.address], subject: 'Order 42', hasAttachments: true },
    );
    assert.match(d.bodyText, /Where is it\?/);
    assert.match(d.bodyHtml, /<p>Where is it\?<\/p>/);
    assert.match(d.threadId, /^thr_/);
    assert.ok(!Number.isNaN(Date.parse(d.receivedAt)));
    // The stored message and the payload agree.
    assert.equal((await t.api('GET', `/messages/${d.id}`)).body.subject, 'Order 42');

    // Receiver down (connection refused) for the first attempts: the retries still get it there.
    await rx.down();
    await transport.sendMail({ from: 'bob@example.org', to: inbox.address, subject: 'Second', text: 'again' });
    await until(async () => (await logsOf(t, `?webhookId=${w.id}`)).filter((e) => /ECONNREFUSED/.test(e.error ?? '')).length >= 2, 'two refused attempts');
    await rx.up();
    const [, second] = await rx.waitFor(2);
    assert.equal(second.json.data.subject, 'Second');
    assert.ok(verify(w.secret, second));
    const logs = await until(async () => {
      const l = await logsOf(t, `?event=message.received&webhookId=${w.id}`);
      return l[0]?.status === 'success' && l[0].eventId === second.json.id && l;
    }, 'second delivery logged');
    const attempts = logs.filter((e) => e.eventId === second.json.id);
    assert.ok(attempts.length >= 3);
    assert.ok(attempts.slice(1).every((e) => e.status === 'failed' && e.httpStatus === null && /ECONNREFUSED/.test(e.error)));
  } finally {
    transport.close();
    await t.close();
    await dns.close();
    await rx.close();
  }
});

test('end to end: a message sent through the API to a local inbox reports message.delivered and message.received', async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: FAST });
  try {
    const from = (await t.api('POST', '/inboxes', { address: 'sender' })).body;
    const to = (await t.api('POST', '/inboxes', { address: 'receiver' })).body;
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/all` })).body;
    const sent = await t.api('POST', `/inboxes/${from.id}/messages`, { to: [to.address], subject: 'Local hop', bodyText: 'hi' });
    assert.equal(sent.status, 202, sent.text);
    await rx.waitFor(2);
    const byType = Object.fromEntries(rx.received.map((r) => [r.json.type, r.json]));
    assert.deepEqual(Object.keys(byType).sort(), ['message.delivered', 'message.received']);
    assert.equal(byType['message.delivered'].data.id, sent.body.id);
    assert.equal(byType['message.delivered'].data.status, 'delivered');
    assert.equal(byType['message.received'].data.inboxId, to.id);
    assert.ok(rx.received.every((r) => verify(w.secret, r)));
  } finally {
    await t.close();
    await rx.close();
  }
});

test('the connection goes to the resolved address while Host and TLS SNI keep the name; TLS errors are failures', { skip: peerSkip(toolMissing('openssl', ['version'], 'openssl')) }, async () => {
  const rx = await startReceiver(200);
  const dns = await startTestDns();
  dns.set('receiver.test', [{ type: 'A', address: '127.0.0.1' }]);
  // An HTTPS receiver with a self-signed certificate: the sender must refuse it (no
  // verification bypass), after sending the name in SNI.
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-wh-tls-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=receiver.test'], {
    stdio: 'ignore',
  });
  const secure = createSecureContext({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) });
  const sni: string[] = [];
  const tlsServer = createHttpsServer({ SNICallback: (name, cb) => (sni.push(name), cb(null, secure)) }, (_req, res) => res.writeHead(200).end());
  await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r));
  const tlsPort = (tlsServer.address() as import('node:net').AddressInfo).port;
  const t = await startTestServer({ webhooks: { ...FAST, retry_schedule: ['50ms'] }, dns: { servers: [dns.server], timeout: '500ms' } });
  try {
    const plain = (await t.api('POST', '/webhooks', { url: `http://receiver.test:${rx.port}/pinned` })).body;
    const tls = (await t.api('POST', '/webhooks', { url: `https://receiver.test:${tlsPort}/tls` })).body;
    await emit(t, 'message.sent');
    const [r] = await rx.waitFor(1);
    assert.equal(r.headers.host, `receiver.test:${rx.port}`);
    assert.ok(verify(plain.secret, r));
    const logs = await until(async () => {
      const l = await logsOf(t, `?webhookId=${tls.id}`);
      return l.length === 2 && l;
    }, 'two TLS failures');
    assert.deepEqual(
      logs.map((e) => [e.attempt, e.status, e.httpStatus]),
      [
        [2, 'failed', null],
        [1, 'failed', null],
      ],
    );
    assert.match(logs[0].error, /self[- ]signed certificate/);
    assert.ok(sni.length >= 1 && sni.every((n) => n === 'receiver.test'), `SNI: ${sni.join(',')}`);
  } finally {
    await t.close();
    await new Promise((r) => tlsServer.close(r));
    await dns.close();
    await rx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('end to end: verifying a custom domain in DNS sends domain.verified with the Domain object', async () => {
  const rx = await startReceiver(200);
  const dns = await startTestDns();
  const t = await startTestServer({ webhooks: FAST, dns: { servers: [dns.server], timeout: '500ms' } });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/domains`, events: ['domain.verified'] })).body;
    const d = (await t.api('POST', '/domains', { domain: 'hooks.example.com' })).body;
    // Publish the ownership and DKIM records the API asked for.
    for (const r of d.dnsRecords as Array<{ type: string; name: string; value: string }>) {
      if (r.type === 'TXT' && (r.name.startsWith('_mailroom.') || r.name.includes('._domainkey.'))) dns.add(r.name, { type: 'TXT', value: r.value });
    }
    const v = await t.api('POST', `/domains/${d.id}/verify`);
    assert.equal(v.body.sendingStatus, 'verified', v.text);
    const [r] = await rx.waitFor(1);
    assert.ok(verify(w.secret, r));
    assert.equal(r.json.type, 'domain.verified');
    assert.equal(r.json.data.id, d.id);
    assert.equal(r.json.data.domain, 'hooks.example.com');
  } finally {
    await t.close();
    await dns.close();
    await rx.close();
  }
});

test('Standard Webhooks: every attempt carries webhook-id/-timestamp/-signature that the standardwebhooks package verifies; retries keep webhook-id', async () => {
  const rx = await startReceiver(500);
  const t = await startTestServer({ webhooks: { ...FAST, retry_schedule: ['100ms', '100ms'] } });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/std` })).body;
    rx.script(500, 503);
    rx.fallback = 200;
    const ev = await emit(t, 'message.received', { id: 'msg_std', subject: 'Grüße ☃' });
    const got = await rx.waitFor(3);
    // The library is given the secret base64-encoded: its key is then the secret's UTF-8 bytes.
    const verifier = new StandardWebhook(Buffer.from(w.secret, 'utf8').toString('base64'));
    for (const r of got) {
      const headers = { 'webhook-id': String(r.headers['webhook-id']), 'webhook-timestamp': String(r.headers['webhook-timestamp']), 'webhook-signature': String(r.headers['webhook-signature']) };
      assert.equal(headers['webhook-id'], ev.id, 'webhook-id is the event id on every attempt');
      assert.match(headers['webhook-timestamp'], /^\d{10}$/);
      assert.ok(Math.abs(Number(headers['webhook-timestamp']) - r.at / 1000) < 60, 'timestamp is the time of the attempt');
      assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/);
      assert.deepEqual(verifier.verify(r.raw.toString('utf8'), headers), r.json);
      assert.ok(verify(w.secret, r), 'X-Service-Signature is still sent');
      // A changed body, id or timestamp fails verification.
      assert.throws(() => verifier.verify(r.raw.toString('utf8').replace('msg_std', 'msg_xxx'), headers));
      assert.throws(() => verifier.verify(r.raw.toString('utf8'), { ...headers, 'webhook-id': 'evt_other' }));
      assert.throws(() => verifier.verify(r.raw.toString('utf8'), { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) - 1) }));
    }
    assert.deepEqual(
      got.map((r) => r.headers['x-service-attempt']),
      ['1', '2', '3'],
    );
    // Another webhook's secret does not verify.
    const other = (await t.api('POST', '/webhooks', { url: `${rx.url}/other`, isActive: false })).body;
    const wrong = new StandardWebhook(Buffer.from(other.secret, 'utf8').toString('base64'));
    const r0 = got[0];
    assert.throws(() =>
      wrong.verify(r0.raw.toString('utf8'), {
        'webhook-id': String(r0.headers['webhook-id']),
        'webhook-timestamp': String(r0.headers['webhook-timestamp']),
        'webhook-signature': String(r0.headers['webhook-signature']),
      }),
    );
  } finally {
    await t.close();
    await rx.close();
  }
});

test('webhooks.concurrency_per_webhook bounds the deliveries in flight to one webhook; another webhook is not held back', async () => {
  const t = await startTestServer({ webhooks: { ...FAST, timeout: '5s', concurrency_per_webhook: 2 } });
  const slow = await startReceiver('hang');
  const quick = await startReceiver(200);
  try {
    assert.equal((await t.api('POST', '/webhooks', { url: `${slow.url}/slow`, events: ['domain.verified'] })).status, 201);
    assert.equal((await t.api('POST', '/webhooks', { url: `${quick.url}/quick`, events: ['domain.verified'] })).status, 201);
    for (let i = 0; i < 5; i++) await emit(t, 'domain.verified', { id: `dom_${i}` });
    await slow.waitFor(2);
    await quick.waitFor(5);
    // Two hang unanswered: nothing more goes to that receiver meanwhile.
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(slow.received.length, 2);
    slow.answerHung(200);
    await slow.waitFor(4);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(slow.received.length, 4);
    slow.fallback = 200;
    slow.answerHung(200);
    await slow.waitFor(5);
    assert.deepEqual(slow.received.map((r) => r.json.data.id).sort(), ['dom_0', 'dom_1', 'dom_2', 'dom_3', 'dom_4']);
  } finally {
    await t.close();
    await slow.close();
    await quick.close();
  }
});
