// Two agents that answer everything, each behind its own mailroom, mailing each other through
// real SMTP (PRODUCT.md "Outbound policy", issue 29): each server delivers its outbound mail to
// the other's SMTP listener (a test DNS names them as the MX of one.test and two.test). The
// "agents" are test code reacting to message.received events with a reply. The thread budget
// (`[policy] thread_hourly_sends`, default 5) stops the exchange: the sixth send of an inbox in
// the thread is held (thread_budget), nothing more is sent, and the other side, receiving nothing
// new, has nothing to answer. On both engines.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort } from '../support/child-server.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

let dns: TestDns;
let one: TestServer;
let two: TestServer;

before(async () => {
  dns = await startTestDns();
  for (const domain of ['one.test', 'two.test']) {
    dns.set(domain, [{ type: 'MX', exchange: `mx.${domain}`, priority: 10 }]);
    dns.set(`mx.${domain}`, [{ type: 'A', address: '127.0.0.1' }]);
  }
  // Each server's MX port is the other's SMTP listener: the ports are chosen before either starts.
  const [portOne, portTwo] = [await freePort(), await freePort()];
  const server = (domain: string, own: number, peer: number) =>
    startTestServer({
      hostname: `mx.${domain}`,
      shared_domain: domain,
      smtp: { listen: `127.0.0.1:${own}` },
      outbound: { mode: 'email', mx_port: peer, retry_schedule: ['200ms'], timeout: '5s' },
      dns: { servers: [dns.server], timeout: '1s' },
      limits: { requests_per_minute: 100_000 },
    });
  one = await server('one.test', portOne, portTwo);
  two = await server('two.test', portTwo, portOne);
});

after(async () => {
  await one?.close();
  await two?.close();
  await dns?.close();
});

/**
 * An agent that replies to every message its inbox receives, as it sees them in GET /events
 * (message.received), until stopped. Returns a stop function.
 */
function replyToEverything(t: TestServer, inboxId: string): { stop: () => Promise<void>; replies: string[] } {
  let running = true;
  const replies: string[] = [];
  let after = '';
  let failure: unknown;
  const loop = (async () => {
    while (running) {
      const events = (await t.api('GET', `/events?types=message.received&inboxId=${inboxId}${after ? `&after=${after}` : ''}`)).body.data as Array<{ id: string; data: { id: string } }>;
      for (const event of events) {
        after = event.id;
        const res = await t.api('POST', `/messages/${event.data.id}/reply`, { bodyText: 'Thanks! Anything else I can do for you?' });
        assert.equal(res.status, 202, res.text);
        replies.push(res.body.id);
      }
      if (!events.length) await new Promise((r) => setTimeout(r, 50));
    }
  })().catch((err) => {
    // Reported by stop(), after the test's own assertion names what did not happen.
    failure = err;
  });
  return {
    replies,
    stop: async () => {
      running = false;
      await loop;
      if (failure) throw failure;
    },
  };
}

const outbound = async (t: TestServer, inboxId: string) => (await t.api('GET', `/inboxes/${inboxId}/messages?direction=outbound&limit=100`)).body.data as any[];
const inbound = async (t: TestServer, inboxId: string) => (await t.api('GET', `/inboxes/${inboxId}/messages?direction=inbound&limit=100`)).body.data as any[];

test('two inboxes answering each other through real SMTP stop within the thread budget', async () => {
  const alice = (await one.api('POST', '/inboxes', { address: 'alice' })).body;
  const bob = (await two.api('POST', '/inboxes', { address: 'bob' })).body;
  assert.equal(alice.address, 'alice@one.test');
  const agents = [replyToEverything(one, alice.id), replyToEverything(two, bob.id)];
  try {
    const first = await one.api('POST', `/inboxes/${alice.id}/messages`, { to: [bob.address], subject: 'Can you help?', bodyText: 'Hello Bob' });
    assert.equal(first.status, 202, first.text);

    // Alice's sixth send in the thread (her first message and five replies) is held.
    const held = await until(
      "alice's held reply",
      // Held mail is listed only when asked for by status (by a key with `review`, as this one).
      async () => (await one.api('GET', `/inboxes/${alice.id}/messages?status=held`)).body.data[0],
      60_000,
    );
    assert.deepEqual(
      held.hold.reasons.map((r: any) => r.code),
      ['thread_budget'],
    );
    assert.equal(held.threadId, first.body.threadId);
    // Everything before it reached the other side: five messages each way.
    const aliceSent = await until('alice sent five', async () => {
      const list = await outbound(one, alice.id);
      return list.length === 5 && list.every((m) => m.status === 'sent') ? list : undefined;
    });
    assert.equal(aliceSent.length, 5);
    const bobSent = await until('bob sent five', async () => {
      const list = await outbound(two, bob.id);
      return list.length === 5 && list.every((m) => m.status === 'sent') ? list : undefined;
    });
    assert.ok(bobSent.every((m) => m.hold === null));
    await until('bob received five', async () => ((await inbound(two, bob.id)).length === 5 ? true : undefined));
    await until('alice received five', async () => ((await inbound(one, alice.id)).length === 5 ? true : undefined));
    // Alice's agent has answered all five; Bob's has nothing new to answer.
    await until('alice answered all', () => (agents[0].replies.length === 5 ? true : undefined));
    assert.equal(agents[1].replies.length, 5);
    // One thread on each side.
    assert.equal(new Set([...(await outbound(one, alice.id)), ...(await inbound(one, alice.id))].map((m) => m.threadId)).size, 1);
    assert.equal(new Set([...(await outbound(two, bob.id)), ...(await inbound(two, bob.id))].map((m) => m.threadId)).size, 1);
  } finally {
    for (const a of agents) await a.stop();
  }
  // Stopped: nothing more was sent on either side (the held one is listed by status only).
  assert.equal((await outbound(one, alice.id)).length, 5);
  assert.equal((await one.api('GET', `/inboxes/${alice.id}/messages?status=held`)).body.data.length, 1);
  assert.equal((await outbound(two, bob.id)).length, 5);
});
