// Two nodes on one PostgreSQL (docs/several-nodes.md): two real servers in this process, each
// with its own data directory, HTTP and SMTP listeners and job runner, sharing one database.
// Mail in through one is read through the other, bytes included; a send accepted by one is
// delivered once; a webhook event is delivered once; a list changed through one applies on the
// other; a CLI act is seen by both; an idle node wakes for what the other queued (LISTEN/NOTIFY).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../support/cli.ts';
import { deliverMail } from '../support/mail.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { onEngine, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { peerSkip } from '../support/peers.ts';

// PostgreSQL pass only: nodes share a database only there (build/test.sh leaves this file out of
// the SQLite pass; run on SQLite, it declares nothing: onEngine).
const skip = peerSkip(postgresMissing());

onEngine('postgres').describe('two nodes on one PostgreSQL', { skip }, () => {
  let url: string;
  let a: TestServer;
  let b: TestServer;
  let mx: TestMx;
  let rx: Receiver;
  let work: string;

  before(async () => {
    url = await (await pgCluster()).createDatabase();
    mx = await startTestMx();
    rx = await startReceiver(200);
    work = mkdtempSync(join(tmpdir(), 'mailroom-nodes-'));
    // The same configuration on both nodes, as an operator deploys them.
    const node = { database: { url }, outbound: { mode: 'email', relay: `smtp://127.0.0.1:${mx.port}`, relay_verify_tls: false, retry_schedule: ['200ms'] } };
    a = await startTestServer(node);
    b = await startTestServer(node);
  });

  after(async () => {
    await a?.close();
    await b?.close();
    await mx?.close();
    await rx?.close();
    rmSync(work, { recursive: true, force: true });
  });

  test('mail in through node A is read through node B, attachment bytes included', async () => {
    const inbox = (await a.api('POST', '/inboxes', { address: 'shared' })).body;
    const bytes = Buffer.from(Array.from({ length: 300_000 }, (_v, i) => (i * 7) % 256));
    const id = await deliverMail(a.server.smtpPort, {
      from: 'sender@example.org',
      to: inbox.address,
      subject: 'through A',
      text: 'stored by node A',
      attachments: [{ filename: 'data.bin', content: bytes }],
    });
    // Node B answers with node A's key: keys, like everything, are in the database.
    const m = await b.api('GET', `/messages/${id}`, undefined, { key: a.key });
    assert.equal(m.status, 200, m.text);
    assert.equal(m.body.subject, 'through A');
    const download = await fetch(m.body.attachments[0].url.replace(a.url, b.url));
    assert.equal(download.status, 200);
    assert.ok(Buffer.from(await download.arrayBuffer()).equals(bytes), 'the attachment read through B is the bytes A stored');
    const raw = await fetch(`${b.url}/messages/${id}/raw`, { headers: { authorization: `Bearer ${a.key}` } });
    assert.match(await raw.text(), /stored by node A/);
    // A download URL signed by one node opens on the other (one signing key, in the database).
    const signedByB = (await b.api('GET', `/attachments/${m.body.attachments[0].id}`, undefined, { key: a.key })).body.url as string;
    assert.equal((await fetch(signedByB.replace(b.url, a.url))).status, 200);
  });

  test('a long-poll on node B answers as soon as mail arrives through node A (LISTEN/NOTIFY, not a poll)', async () => {
    const inbox = (await a.api('POST', '/inboxes', { address: 'waiting' })).body;
    const started = Date.now();
    const waiting = b.api('GET', `/inboxes/${inbox.id}/messages?wait=20`, undefined, { key: a.key });
    await new Promise((r) => setTimeout(r, 300));
    await deliverMail(a.server.smtpPort, { from: 'sender@example.org', to: inbox.address, subject: 'wake B', text: 'now' });
    const res = await waiting;
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.body.data.map((m: { subject: string }) => m.subject),
      ['wake B'],
    );
    assert.ok(Date.now() - started < 10_000, 'answered long before the wait ran out');
  });

  test('a send accepted by node A is delivered once, whichever node runs its job', async () => {
    const inbox = (await a.api('POST', '/inboxes', { address: 'sender' })).body;
    const before = mx.messages.length;
    const sends = [];
    for (let i = 0; i < 6; i++) {
      const via = i % 2 ? b : a;
      sends.push((await via.api('POST', `/inboxes/${inbox.id}/messages`, { to: [`r${i}@elsewhere.example`], subject: `once ${i}`, bodyText: 'x' }, { key: a.key })).body.id);
    }
    for (const id of sends) {
      await until(`message ${id} sent`, async () => ((await b.api('GET', `/messages/${id}`, undefined, { key: a.key })).body.status === 'sent' ? true : undefined), 15_000);
    }
    // Both runners were awake the whole time; give a second delivery every chance to happen.
    await new Promise((r) => setTimeout(r, 500));
    const subjects = mx.messages.slice(before).map((m) => /^Subject: (.*)$/m.exec(m.raw.toString('latin1'))?.[1]);
    assert.deepEqual(subjects.sort(), sends.map((_v, i) => `once ${i}`).sort());
  });

  test('each webhook event is delivered once, though both nodes run webhook jobs', async () => {
    const inbox = (await a.api('POST', '/inboxes', { address: 'hooked' })).body;
    assert.equal((await b.api('POST', '/webhooks', { url: `${rx.url}/hook`, events: ['message.received'] }, { key: a.key })).status, 201);
    const before = rx.received.length;
    for (let i = 0; i < 4; i++) await deliverMail((i % 2 ? b : a).server.smtpPort, { from: 'sender@example.org', to: inbox.address, subject: `event ${i}`, text: 'x' });
    await rx.waitFor(before + 4, 15_000);
    await new Promise((r) => setTimeout(r, 500));
    const ids = rx.received.slice(before).map((r) => r.json.id as string);
    assert.equal(ids.length, 4);
    assert.equal(new Set(ids).size, 4, 'an event was delivered twice');
  });

  test('a list changed through node A applies on node B as soon as B hears of it (LISTEN/NOTIFY)', async () => {
    const inbox = (await a.api('POST', '/inboxes', { address: 'listed' })).body;
    const rcpt = async (node: TestServer): Promise<number> => {
      const { client } = await SmtpClient.open(node.server.smtpPort);
      try {
        assert.equal((await client.cmd('EHLO sender.example')).code, 250);
        assert.equal((await client.cmd('MAIL FROM:<pest@nuisance.test>')).code, 250);
        return (await client.cmd(`RCPT TO:<${inbox.address}>`)).code;
      } finally {
        await client.quit();
      }
    };
    // Node B reads the inbox's lists (none) and remembers them.
    assert.equal(await rcpt(b), 250);
    const entry = await a.api('POST', '/lists', { direction: 'receive', kind: 'block', entry: 'nuisance.test' });
    assert.equal(entry.status, 201, entry.text);
    // Guards well under the 10 s after which B would read its lists again unannounced.
    await until('node B to refuse the blocked sender', async () => ((await rcpt(b)) === 550 ? true : undefined), 3000);
    assert.equal((await a.api('DELETE', `/lists/${entry.body.id}`)).status, 204);
    await until('node B to let the sender in again', async () => ((await rcpt(b)) === 250 ? true : undefined), 3000);
  });

  test('a CLI act on the shared database is seen by both nodes', async () => {
    const inbox = (await a.api('POST', '/inboxes', { address: 'suspended' })).body;
    const config = join(work, 'cli.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(join(work, 'cli-data'))}\nshared_domain = "agents.test"\n`);
    const r = await runCli(['--config', config, 'inboxes', 'suspend', inbox.address], { env: { MAILROOM_DATABASE_URL: url } });
    assert.equal(r.code, 0, r.stderr);
    for (const node of [a, b]) assert.equal((await node.api('GET', `/inboxes/${inbox.id}`, undefined, { key: a.key })).body.status, 'suspended');
    const refused = await b.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['x@elsewhere.example'], subject: 's', bodyText: 'x' }, { key: a.key });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'INBOX_SUSPENDED');
  });
});
