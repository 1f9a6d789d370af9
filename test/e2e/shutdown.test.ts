// Graceful shutdown of a real `mailroom serve` child under load: SIGTERM while HTTP writes,
// SMTP transactions (some mid-DATA, one idle session) and outbound deliveries to a slow MX are
// in flight. In-flight work completes or is refused cleanly (never a 5xx, never a lost 250/201),
// the process exits 0, and after a restart no job stays `running` and every send is delivered once.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { openDatabase } from '../../src/store/client.ts';
import { prepareInstance, startChild, stopChild, type ChildServer, type Instance } from '../support/child-server.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startSlowMx, type SlowMx } from '../support/slow-mx.ts';
import { SmtpClient, type SmtpReply } from '../support/smtp-client.ts';
import { until } from '../support/wait.ts';

let dir: string;
let dns: TestDns;
let mx: SlowMx;
let inst: Instance;
let server: ChildServer | undefined;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mailroom-shutdown-'));
  dns = await startTestDns();
  // Slower than nothing, well inside the grace period: in-flight deliveries should finish.
  mx = await startSlowMx(500);
  dns.set('remote.test', [{ type: 'MX', exchange: 'mx.remote.test', priority: 10 }]);
  dns.set('mx.remote.test', [{ type: 'A', address: '127.0.0.1' }]);
  inst = await prepareInstance(
    dir,
    `[http]\nshutdown_grace = "2s"\n[outbound]\nmode = "email"\nmx_port = ${mx.port}\nretry_schedule = ["1s"]\n[dns]\nservers = [${JSON.stringify(dns.server)}]\ntimeout = "1s"\n[limits]\nrequests_per_minute = 100000\ndaily_send_limit = 10000`,
  );
});

after(async () => {
  if (server) await stopChild(server, 'SIGKILL');
  await mx?.close();
  await dns?.close();
  rmSync(dir, { recursive: true, force: true });
});

const api = (method: string, path: string, body?: unknown) =>
  fetch(inst.httpUrl + path, { method, headers: { authorization: `Bearer ${inst.key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });

/** A reply, or code 0 when the server closed the connection first. */
const replyOrClose = (client: SmtpClient, p: Promise<SmtpReply>) => Promise.race([p, client.closed.then(() => ({ code: 0, text: 'closed' }))]);

test('SIGTERM under load: in-flight work completes or is refused cleanly; after restart nothing is lost, stuck or sent twice', async () => {
  server = await startChild(inst);
  const inbox = await (await api('POST', '/inboxes', { address: 'shutdown' })).json();

  // Outbound sends that will be in flight at the slow MX when the signal arrives.
  const sends: string[] = [];
  for (let i = 0; i < 6; i++) {
    const res = await api('POST', `/inboxes/${inbox.id}/messages`, { to: [`user${i}@remote.test`], subject: `send ${i}`, bodyText: 'x' });
    assert.equal(res.status, 202);
    sends.push((await res.json()).id);
  }
  await until('a delivery in flight at the MX', () => (mx.started() > 0 ? true : undefined));

  // SMTP: three sessions stopped in the middle of DATA, and one idle session after EHLO.
  const midData: SmtpClient[] = [];
  for (let i = 0; i < 3; i++) {
    const { client } = await SmtpClient.open(inst.smtpPort);
    assert.equal((await client.cmd('EHLO load.example')).code, 250);
    assert.equal((await client.cmd('MAIL FROM:<load@example.org>')).code, 250);
    assert.equal((await client.cmd('RCPT TO:<shutdown@agents.test>')).code, 250);
    assert.equal((await client.cmd('DATA')).code, 354);
    client.socket.write(`Message-ID: <mid-data-${i}@example.org>\r\nSubject: mid data ${i}\r\n\r\nfirst half\r\n`);
    midData.push(client);
  }
  const idle = (await SmtpClient.open(inst.smtpPort)).client;
  assert.equal((await idle.cmd('EHLO idle.example')).code, 250);

  // HTTP: four workers creating inboxes until the server stops answering.
  const created: string[] = [];
  const refusals: string[] = [];
  const statuses: number[] = [];
  let stop = false;
  const workers = Array.from({ length: 4 }, async () => {
    while (!stop) {
      try {
        const res = await api('POST', '/inboxes', {});
        statuses.push(res.status);
        if (res.status === 201) created.push((await res.json()).id);
      } catch (err) {
        // Refused cleanly: no connection, or the connection closed before a request was answered.
        refusals.push(String((err as Error & { cause?: { code?: string } }).cause?.code ?? (err as Error).message));
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  });
  await until('HTTP load running', () => (created.length >= 10 ? true : undefined));

  const child = server;
  child.child.kill('SIGTERM');
  const accepted: string[] = [];
  try {
    // The mid-DATA transactions finish after the signal: each is answered 250 or refused (421 or
    // closed), and a 250 is never lost.
    for (const [i, client] of midData.entries()) {
      client.socket.write('second half\r\n.\r\n');
      const r = await replyOrClose(client, client.read());
      assert.ok(r.code === 250 || r.code === 421 || r.code === 0, `mid-DATA ${i}: ${r.code} ${r.text}`);
      if (r.code === 250) accepted.push(`<mid-data-${i}@example.org>`);
      client.socket.end();
    }
    // New SMTP connections after the signal are not served.
    const late = await new Promise<number>((resolve) => {
      const sock = connect(inst.smtpPort, '127.0.0.1');
      sock.on('data', (d) => (resolve(Number(String(d).slice(0, 3))), sock.destroy()));
      sock.on('error', () => resolve(0));
      sock.on('close', () => resolve(0));
    });
    assert.ok(late === 0 || late === 421, `a new SMTP connection after SIGTERM got ${late}`);
    // The idle session is told 421 at the signal, not at the end of the grace period (when
    // smtp-server cuts what is left with its own "Server shutting down").
    const idleEnd = await replyOrClose(idle, idle.read());
    assert.equal(idleEnd.code, 421, `idle session got ${idleEnd.code} ${idleEnd.text}`);
    assert.match(idleEnd.text, /4\.3\.2 service shutting down/);
    const exit = await child.exited;
    assert.deepEqual(exit, { code: 0, signal: null }, child.stderr().slice(-2000));
  } finally {
    stop = true;
    await Promise.all(workers);
  }
  assert.match(child.log(), /"msg":"stopped"/);
  assert.ok(
    statuses.every((s) => s === 201),
    `HTTP answered ${[...new Set(statuses)].join(', ')} during shutdown`,
  );
  assert.ok(
    refusals.every((r) => /ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET|other side closed|fetch failed/.test(r)),
    refusals.join(', '),
  );
  const errors = child
    .log()
    .split('\n')
    .filter((l) => l.includes('"level":"error"'));
  assert.deepEqual(errors, []);

  // Restart: nothing stays running, every 201 and every 250 is there, each send delivered exactly once.
  server = await startChild(inst);
  for (const id of created) assert.equal((await api('GET', `/inboxes/${id}`)).status, 200, `inbox ${id} answered 201 but is gone`);
  const stored = ((await (await api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).json()).data as Array<{ direction: string; messageIdHeader: string }>)
    .filter((m) => m.direction === 'inbound')
    .map((m) => m.messageIdHeader);
  for (const id of accepted) assert.equal(stored.filter((s) => s === id).length, 1, `${id} got 250 but is stored ${stored.filter((s) => s === id).length} times`);
  const final = await until(
    'every send final',
    async () => {
      const all = await Promise.all(sends.map(async (id) => (await (await api('GET', `/messages/${id}`)).json()) as { status: string; messageIdHeader: string }));
      return all.every((m) => m.status === 'sent') ? all : undefined;
    },
    20_000,
  );
  const db = openDatabase(join(inst.dataDir, 'mailroom.db'));
  try {
    assert.equal(db.$client.prepare(`SELECT count(*) FROM jobs WHERE status = 'running'`).pluck().get(), 0);
  } finally {
    db.$client.close();
  }
  for (const m of final) {
    const key = m.messageIdHeader.startsWith('<') ? m.messageIdHeader : `<${m.messageIdHeader}>`;
    assert.equal(mx.deliveries.get(key), 1, `${key} reached the MX ${mx.deliveries.get(key) ?? 0} times`);
  }
  await stopChild(server, 'SIGTERM');
  server = undefined;
});
