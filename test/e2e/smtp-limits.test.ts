// One SMTP client cannot hold the listener: connections per client address are capped below
// the total (the rest of the world still gets in), a session ends after max_session_time however
// busy, and commands that do not advance a transaction (NOOP, RSET, VRFY, HELP) are capped
// between two MAILs. Each limit answers 421 and counts in mailroom_smtp_sessions_limited_total.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { metricsOf } from '../../src/metrics.ts';
import { clientKey } from '../../src/smtp/session-limits.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;

before(async () => {
  t = await startTestServer({ smtp: { max_connections: 50, max_connections_per_ip: 3, max_junk_commands: 5, max_session_time: '1500ms' } });
});
after(async () => {
  await t?.close();
});

const limited = (reason: string) => {
  const line = metricsOf(t.server.ctx)
    .smtpLimited.render()
    .find((l) => l.includes(`reason="${reason}"`));
  return line ? Number(line.split(' ').pop()) : 0;
};

describe('SMTP session limits', () => {
  test('a fourth connection from one address gets 421 while three are open; another gets in once one closes', async () => {
    const open = await Promise.all([1, 2, 3].map(() => SmtpClient.open(t.server.smtpPort)));
    for (const { greeting } of open) assert.equal(greeting.code, 220);
    const fourth = await SmtpClient.open(t.server.smtpPort);
    assert.equal(fourth.greeting.code, 421);
    assert.match(fourth.greeting.text, /4\.7\.0 too many connections from your address/);
    await fourth.client.closed;
    assert.equal(limited('per_ip'), 1);

    await open[0].client.quit();
    const again = await SmtpClient.open(t.server.smtpPort);
    assert.equal(again.greeting.code, 220, 'a slot freed by a closed session is usable');
    await Promise.all([again, ...open.slice(1)].map(({ client }) => client.quit()));
  });

  test('NOOP, RSET, VRFY and HELP are capped between two MAILs; the next one gets 421 and the session ends', async () => {
    const { client } = await SmtpClient.open(t.server.smtpPort);
    assert.equal((await client.cmd('EHLO client.example.org')).code, 250);
    for (const cmd of ['NOOP', 'RSET', 'VRFY someone', 'HELP', 'NOOP']) assert.ok((await client.cmd(cmd)).code < 400, cmd);
    // MAIL starts a transaction: the count starts again.
    assert.equal((await client.cmd('MAIL FROM:<a@example.org>')).code, 250);
    for (let i = 0; i < 5; i++) assert.equal((await client.cmd('NOOP')).code, 250);
    const cut = await client.cmd('NOOP');
    assert.equal(cut.code, 421);
    assert.match(cut.text, /too many commands without mail/);
    await client.closed;
    assert.equal(limited('junk_commands'), 1);
  });

  test('a session is closed after max_session_time even while the client keeps it busy', async () => {
    const { client } = await SmtpClient.open(t.server.smtpPort);
    assert.equal((await client.cmd('EHLO client.example.org')).code, 250);
    const started = Date.now();
    let last = 250;
    // A MAIL now and then keeps the junk count low: only the lifetime can end this session.
    for (let i = 0; last < 400 && Date.now() - started < 10_000; i++) {
      last = (await client.cmd(i % 4 === 0 ? 'RSET' : i % 4 === 1 ? 'MAIL FROM:<a@example.org>' : 'NOOP')).code;
      if (last < 400) await new Promise((r) => setTimeout(r, 200));
    }
    await client.closed;
    assert.equal(last, 421);
    assert.ok(Date.now() - started >= 1300, 'not before the lifetime');
    assert.equal(limited('session_time'), 1);
  });
});

test('client addresses: IPv4 as is (also IPv4-mapped), IPv6 by its /64', () => {
  assert.equal(clientKey('192.0.2.7'), '192.0.2.7');
  assert.equal(clientKey('::ffff:192.0.2.7'), '192.0.2.7');
  assert.equal(clientKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
  assert.equal(clientKey('2001:db8:1:2:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64');
  assert.equal(clientKey('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(clientKey('::1'), '0:0:0:0::/64');
});

describe('SMTP memory budget', () => {
  let m: TestServer;
  before(async () => {
    // 1 MiB: one 60 KB message in progress holds 720 KB of it (twelve times its size).
    m = await startTestServer({ smtp: { memory_budget: 1_048_576 } });
    await m.api('POST', '/inboxes', { address: 'big' });
  });
  after(async () => {
    await m?.close();
  });

  const body = (kb: number) => `Subject: big\r\n\r\n${('x'.repeat(76) + '\r\n').repeat(Math.ceil((kb * 1024) / 78))}`;

  test('while one large transaction is in progress, another gets 452 4.3.1 (at MAIL when it announces SIZE, else after DATA); both succeed once it is done', async () => {
    const a = (await SmtpClient.open(m.server.smtpPort)).client;
    const b = (await SmtpClient.open(m.server.smtpPort)).client;
    for (const c of [a, b]) assert.equal((await c.cmd('EHLO client.example.org')).code, 250);
    // A: 60 KB of DATA sent, the final dot not yet.
    assert.equal((await a.cmd('MAIL FROM:<a@example.org>')).code, 250);
    assert.equal((await a.cmd('RCPT TO:<big@agents.test>')).code, 250);
    assert.equal((await a.cmd('DATA')).code, 354);
    a.socket.write(body(60));
    await new Promise((r) => setTimeout(r, 300));

    const announced = await b.cmd(`MAIL FROM:<b@example.org> SIZE=${60 * 1024}`);
    assert.equal(announced.code, 452);
    assert.match(announced.text, /4\.3\.1 too much mail in progress/);
    // Without SIZE the sender learns at the end of DATA; nothing is stored.
    const unannounced = await b.send('b@example.org', ['big@agents.test'], Buffer.from(body(60)));
    assert.equal(unannounced.code, 452);
    assert.match(unannounced.text, /4\.3\.1/);

    a.socket.write('.\r\n');
    assert.equal((await a.read()).code, 250);
    assert.equal((await b.send('b@example.org', ['big@agents.test'], Buffer.from(body(60)))).code, 250, 'the retry goes through');
    const inbox = (await m.api('GET', '/inboxes')).body.data[0];
    assert.equal((await m.api('GET', `/inboxes/${inbox.id}/messages?limit=1`)).body.total, 2);
    await Promise.all([a.quit(), b.quit()]);
    const limitedLine = metricsOf(m.server.ctx)
      .smtpLimited.render()
      .find((l) => l.includes('reason="memory_budget"'));
    assert.equal(Number(limitedLine?.split(' ').pop()), 2);
  });

  test('a transaction alone is always let through, however large for the budget', async () => {
    const { client } = await SmtpClient.open(m.server.smtpPort);
    assert.equal((await client.cmd('EHLO client.example.org')).code, 250);
    assert.equal((await client.send('c@example.org', ['big@agents.test'], Buffer.from(body(300)))).code, 250);
    await client.quit();
  });
});
