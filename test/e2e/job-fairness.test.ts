// One partition's backlog at its limit does not hold back the other partitions of its kind
// (claimDue's partition walk, src/jobs/table.ts): a domain whose MX holds every delivery, with
// more sends queued to it than a claim reads at once, and a receiver that never answers, with
// more deliveries queued to it than that, while another domain's send and another webhook's
// delivery go out. Before the walk they waited until the backlog ahead of them drained.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { emitEvent } from '../support/events.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { recordEvent } from '../../src/domain/events/events.ts';
import { listJobs } from '../../src/jobs/table.ts';

let dns: TestDns;
let mx: TestMx;
let t: TestServer;
const receivers: Receiver[] = [];

/** More than a claim reads of one kind at once (twice the free slots, at least 16). */
const BACKLOG = 30;

before(async () => {
  dns = await startTestDns();
  mx = await startTestMx();
  t = await startTestServer({
    outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['30s'], timeout: '60s', concurrency_per_domain: 1 },
    // Four deliveries at a time to one webhook, below the six jobs at once: room is left for the rest.
    webhooks: { allow_insecure_targets: true, retry_schedule: ['30s'], timeout: '60s', concurrency_per_webhook: 4 },
    jobs: { concurrency: 6 },
    dns: { servers: [dns.server], timeout: '1s' },
    limits: { requests_per_minute: 100_000 },
  });
  for (const name of ['slow.test', 'quick.test']) {
    dns.set(name, [{ type: 'MX', exchange: `mx.${name}`, priority: 10 }]);
    dns.set(`mx.${name}`, [{ type: 'A', address: '127.0.0.1' }]);
  }
});

after(async () => {
  mx?.release('held@slow.test');
  await t?.close();
  for (const r of receivers) await r.close();
  await mx?.close();
  await dns?.close();
});

const statusOf = async (id: string) => (await t.api('GET', `/messages/${id}`)).body.status as string;

test("a domain's backlog at its limit does not hold back a send to another domain", async () => {
  const inbox = (await t.api('POST', '/inboxes', { address: 'fair-sender' })).body;
  mx.script('held@slow.test', 'hold');
  const backlog: string[] = [];
  for (let i = 0; i < BACKLOG; i++) {
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['held@slow.test'], subject: `backlog ${i}`, bodyText: 'hi' });
    assert.equal(res.status, 202, res.text);
    backlog.push(res.body.id);
  }
  await mx.held('held@slow.test');
  const quick = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['someone@quick.test'], subject: 'not behind the backlog', bodyText: 'hi' });
  assert.equal(quick.status, 202, quick.text);
  await until('the other domain’s send to go out', async () => ((await statusOf(quick.body.id)) === 'sent' ? true : undefined));
  const statuses = await Promise.all(backlog.map(statusOf));
  assert.equal(statuses.filter((s) => s === 'queued').length, BACKLOG - 1, `the backlog is still there: ${statuses.join(' ')}`);
  assert.equal(mx.attempts('held@slow.test'), 1, 'one delivery at a time to the slow domain');

  mx.release('held@slow.test');
  await until('the backlog to drain', async () => ((await Promise.all(backlog.map(statusOf))).every((s) => s === 'sent') ? true : undefined), 30_000);
});

test("a webhook's backlog behind a receiver that never answers does not hold back another webhook's deliveries", async () => {
  const stuck = await startReceiver('hang');
  const fine = await startReceiver(200);
  receivers.push(stuck, fine);
  // Two accounts, a webhook each, for the same event type: each event reaches its own account's.
  const other = await t.newAccount('other');
  const a = await t.api('POST', '/webhooks', { url: `${stuck.url}/a`, events: ['domain.verified'] });
  const b = await t.api('POST', '/webhooks', { url: `${fine.url}/b`, events: ['domain.verified'] }, { key: other.key });
  assert.equal(a.status, 201, a.text);
  assert.equal(b.status, 201, b.text);
  for (let i = 0; i < BACKLOG; i++) await emitEvent(t.server.ctx, t.accountId, 'domain.verified', { domain: `d${i}.test` });
  // Four at a time to one webhook: the rest of its deliveries wait in the job table.
  await stuck.waitFor(4);
  await emitEvent(t.server.ctx, other.accountId, 'domain.verified', { domain: 'other.test' });
  const [got] = await fine.waitFor(1, 10_000);
  assert.equal(got.json.data.domain, 'other.test');
  assert.equal(stuck.received.length, 4, 'the stuck receiver still holds its first four');
});

test('deliveries of events committed together: four POSTs at a time to the receiver, the rest wait; each arrives once, as its first attempt', async () => {
  const s = await startTestServer({ webhooks: { allow_insecure_targets: true, retry_schedule: ['30s'], timeout: '60s', concurrency_per_webhook: 4 }, jobs: { concurrency: 6 } });
  const rx = await startReceiver('hang');
  try {
    const hook = await s.api('POST', '/webhooks', { url: `${rx.url}/together`, events: ['domain.verified'] });
    assert.equal(hook.status, 201, hook.text);
    const ctx = s.server.ctx;
    // More than jobs.concurrency beyond the receiver's four: on SQLite some wait claimed in the
    // runner, the rest are queued again unclaimed (src/jobs/runner.ts, `taken`).
    const events = await ctx.store.transaction(async (tx) => {
      const out: string[] = [];
      for (let i = 0; i < 20; i++) out.push((await recordEvent(tx, ctx, s.accountId, 'domain.verified', { domain: `t${i}.test` })).id);
      return out;
    });
    ctx.notify('jobs');
    await rx.waitFor(4);
    await until('the deliveries beyond the first ten queued', async () => ((await listJobs(ctx, ['queued'])).length >= 10 ? true : undefined));
    assert.equal(rx.received.length, 4, 'four POSTs at a time to one receiver');
    rx.fallback = 200;
    rx.answerHung(200);
    await rx.waitFor(20, 10_000);
    const logged = await until('twenty deliveries logged', async () => {
      const l = (await s.api('GET', `/webhooks/logs?webhookId=${hook.body.id}&limit=100`)).body.data as Array<{ eventId: string; attempt: number; status: string }>;
      return l.length >= 20 ? l : undefined;
    });
    assert.equal(rx.received.length, 20, 'each event once');
    assert.deepEqual(new Set(rx.received.map((r) => r.headers['webhook-id'])), new Set(events));
    assert.ok(rx.received.every((r) => r.headers['x-service-attempt'] === '1'));
    assert.ok(logged.every((e) => e.attempt === 1 && e.status === 'success'));
  } finally {
    rx.answerHung(200);
    await s.close();
    await rx.close();
  }
});
