// Webhook deliveries keep their connection to a receiver open between POSTs (a keep-alive agent
// per receiver and checked address, src/jobs/handlers/webhook.ts), retry once on a new
// connection when the receiver dropped a kept-alive one just as a request went out on it, and
// close what they kept at shutdown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { emitEvent } from '../support/events.ts';
import { startReceiver } from '../support/receiver.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { webhookAgent } from '../../src/jobs/handlers/webhook.ts';

const FAST = { allow_insecure_targets: true, retry_schedule: ['10s'], timeout: '2s' };

async function deliveredLog(t: TestServer, n: number) {
  return until(`${n} successful deliveries logged`, async () => {
    const res = await t.api('GET', '/webhooks/logs');
    const ok = (res.body.data as Array<{ status: string; attempt: number }>).filter((d) => d.status === 'success');
    return ok.length >= n ? ok : undefined;
  });
}

test('deliveries one after another reuse one connection; one cut off on a reused connection is retried at once on a new one; shutdown closes it', async () => {
  const receiver = await startReceiver();
  try {
    const t = await startTestServer({ webhooks: FAST });
    try {
      const hook = await t.api('POST', '/webhooks', { url: `${receiver.url}/hook`, events: ['domain.verified'] });
      assert.equal(hook.status, 201, hook.text);
      for (let i = 1; i <= 5; i++) {
        await emitEvent(t.server.ctx, t.accountId, 'domain.verified', { domain: `d${i}.test` });
        await deliveredLog(t, i);
      }
      assert.equal(receiver.received.length, 5);
      assert.equal(receiver.connections, 1, 'five POSTs on one connection');

      receiver.cutReused(1);
      await emitEvent(t.server.ctx, t.accountId, 'domain.verified', { domain: 'd6.test' });
      const logged = await deliveredLog(t, 6);
      // Delivered by the first attempt, not by a retry on the schedule (10 s away).
      assert.ok(logged.every((d) => d.attempt === 1));
      assert.equal(receiver.received.length, 6);
      assert.equal(receiver.received[5].json.data.domain, 'd6.test');
      assert.equal(receiver.connections, 2, 'the cut connection was replaced by one new one');
      assert.equal(receiver.open, 1);
    } finally {
      await t.close();
    }
    await until('the kept-alive connection closed at shutdown', () => (receiver.open === 0 ? true : undefined));
  } finally {
    await receiver.close();
  }
});

test('a server keeps agents for its 64 most recently used receivers: the least recently used one is closed and made anew', async () => {
  const t = await startTestServer({ webhooks: FAST });
  try {
    const target = (i: number) => ({ url: new URL(`http://r${i}.example:8080/hook`), host: `r${i}.example`, addresses: [{ address: `192.0.2.${i}`, family: 4 as const }] });
    const first = webhookAgent(t.server.ctx, target(0));
    const second = webhookAgent(t.server.ctx, target(1));
    for (let i = 2; i < 64; i++) webhookAgent(t.server.ctx, target(i));
    // Used again, the first is now the most recent: the 65th receiver pushes out the second.
    assert.equal(webhookAgent(t.server.ctx, target(0)), first);
    webhookAgent(t.server.ctx, target(64));
    assert.equal(webhookAgent(t.server.ctx, target(0)), first);
    assert.notEqual(webhookAgent(t.server.ctx, target(1)), second);
    // The same name at another checked address is another agent: a reused socket never leads elsewhere.
    assert.notEqual(webhookAgent(t.server.ctx, { ...target(0), addresses: [{ address: '192.0.2.200', family: 4 }] }), first);
  } finally {
    await t.close();
  }
});

test('a webhook keeps as many idle connections as it may have deliveries in flight: a second wave at the limit opens none', async () => {
  // Each answer takes a second, so the six deliveries of a wave overlap and need six connections.
  const receiver = await startReceiver({ status: 200, delayMs: 1000 });
  try {
    const t = await startTestServer({ webhooks: { ...FAST, concurrency_per_webhook: 6 } });
    try {
      const hook = await t.api('POST', '/webhooks', { url: `${receiver.url}/hook`, events: ['domain.verified'] });
      assert.equal(hook.status, 201, hook.text);
      const wave = async (n: number) => {
        for (let i = 0; i < 6; i++) await emitEvent(t.server.ctx, t.accountId, 'domain.verified', { domain: `w${n}-${i}.test` });
        await deliveredLog(t, 6 * n);
      };
      await wave(1);
      assert.equal(receiver.connections, 6, 'six deliveries at once, six connections');
      await wave(2);
      assert.equal(receiver.connections, 6, 'the second wave reused the six kept connections');
    } finally {
      await t.close();
    }
  } finally {
    await receiver.close();
  }
});
