// Outbound mail end to end: the send API against a capturing MX (smtp-server on loopback) found
// through a dns2 server. Covers headers and bodies as sent, bcc only in the envelope, DKIM
// checked by an independent verifier against the published key, every status path (sent,
// bounced, retried, failed, null MX, A fallback, dropped connection), a restart during a
// retry, dry-run, local delivery, and every validation error (reports: reports.test.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { and, eq } from 'drizzle-orm';
import { events, jobs, messages } from '../../src/store/schema.ts';
import { createResolver } from '../../src/dns.ts';
import { dkimTxtValue, publishedKeyFor } from '../../src/domain/domains/dkim-keys.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { countSend, findInboxRow, setDailyLimit, suspendInbox } from '../../src/domain/inboxes/inboxes.ts';
import { inboxes as inboxTable } from '../../src/store/schema.ts';
import { eq as sqlEq } from 'drizzle-orm';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { runCli } from '../support/cli.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { loseBlob, storedBlobs } from '../support/blobs.ts';
import { rawRows } from '../../src/store/store.ts';
import { ROW_BLOB_MAX_BYTES } from '../../src/store/blobs/blobs.ts';
import { guard, until } from '../support/wait.ts';
import { skipOrFail } from '../support/peers.ts';
import { sqlDb } from '../support/db.ts';

let t: TestServer;
let dns: TestDns;
let mx: TestMx;
let inbox: { id: string; address: string };

/** Extra servers in this file shut down without the default grace period. */
const FAST_CLOSE = { shutdown_grace: '100ms' };

const overrides = () => ({
  outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['200ms', '200ms'], timeout: '5s' },
  dns: { servers: [dns.server], timeout: '1s' },
});

/** A domain whose MX is the capturing server. */
function remoteDomain(name: string): void {
  dns.set(name, [{ type: 'MX', exchange: `mx.${name}`, priority: 10 }]);
  dns.set(`mx.${name}`, [{ type: 'A', address: '127.0.0.1' }]);
}

async function waitForStatus(server: TestServer, id: string, statuses: string[], opts: { key?: string; timeoutMs?: number } = {}) {
  const deadline = Date.now() + guard(opts.timeoutMs ?? 15_000);
  for (;;) {
    const res = await server.api('GET', `/messages/${id}`, undefined, { key: opts.key });
    assert.equal(res.status, 200, res.text);
    if (statuses.includes(res.body.status)) return res.body;
    if (Date.now() > deadline) throw new Error(`message ${id} stayed ${res.body.status}, expected ${statuses.join('|')}: ${JSON.stringify(res.body.recipients)}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

const send = (body: Record<string, unknown>, inboxId = inbox.id, server = t) => server.api('POST', `/inboxes/${inboxId}/messages`, body);

async function eventsOf(server: TestServer, type: string, messageId: string) {
  return (await sqlDb(server.server.ctx).select().from(events).where(eq(events.type, type)).all()).map((e) => JSON.parse(e.data)).filter((d) => d.id === messageId);
}

before(async () => {
  dns = await startTestDns();
  mx = await startTestMx();
  t = await startTestServer(overrides());
  // Publish the shared domain's DKIM key exactly as `mailroom domains show` prints it.
  const key = (await publishedKeyFor(t.server.ctx, t.config.shared_domain))!;
  dns.set(`${key.selector}._domainkey.${t.config.shared_domain}`, [{ type: 'TXT', value: dkimTxtValue(key.publicKey) }]);
  remoteDomain('remote.test');
  const res = await t.api('POST', '/inboxes', { address: 'sender', displayName: 'Sender Bot' });
  assert.equal(res.status, 201, res.text);
  inbox = res.body;
});

after(async () => {
  await t?.close();
  await mx?.close();
  await dns?.close();
});

describe('delivery to a remote MX', () => {
  test('signed message with cc, bcc and an attachment goes queued → sent, exactly as composed', async () => {
    const upload = new FormData();
    upload.append('file', new Blob([Buffer.from('%PDF-1.4 test document')], { type: 'application/pdf' }), 'report.pdf');
    const up = await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: upload });
    assert.equal(up.status, 201, await up.clone().text());
    const att = (await up.json()) as { id: string };

    const before = mx.messages.length;
    const connectionsBefore = mx.connections();
    const res = await send({
      to: ['Alice Remote <alice@remote.test>'],
      cc: ['carol@remote.test'],
      bcc: ['hidden@remote.test'],
      subject: 'Quarterly report ✓',
      bodyText: 'Hello Alice,\nthe report is attached.',
      bodyHtml: '<p>Hello Alice,</p><p>the report is <b>attached</b>.</p>',
      attachmentIds: [att.id],
    });
    assert.equal(res.status, 202, res.text);
    const m = res.body;
    assert.equal(m.status, 'queued');
    assert.equal(m.direction, 'outbound');
    assert.equal(m.delivery, 'email');
    assert.equal(m.fromAddress, inbox.address);
    assert.deepEqual(m.toAddresses, ['alice@remote.test']);
    assert.deepEqual(m.ccAddresses, ['carol@remote.test']);
    assert.match(m.messageIdHeader, new RegExp(`^<${m.id}@${t.config.shared_domain.replace('.', '\\.')}>$`));
    assert.deepEqual(
      m.attachments.map((a: { id: string }) => a.id),
      [att.id],
    );
    assert.deepEqual(
      m.recipients.map((r: { address: string; status: string }) => [r.address, r.status]),
      [
        ['alice@remote.test', 'queued'],
        ['carol@remote.test', 'queued'],
        ['hidden@remote.test', 'queued'],
      ],
    );

    const done = await waitForStatus(t, m.id, ['sent']);
    for (const r of done.recipients) {
      assert.equal(r.status, 'sent');
      assert.match(r.response, /^250 /);
    }
    const transactions = (await mx.waitFor(before + 3)).slice(before);
    // One SMTP transaction per recipient, bcc included, each with its own bounce address as
    // MAIL FROM (VERP, on the inbox's domain), the same bytes and the message id as ENVID.
    assert.deepEqual(
      transactions
        .map((c) => c.rcptTo)
        .flat()
        .sort(),
      ['alice@remote.test', 'carol@remote.test', 'hidden@remote.test'],
    );
    const senders = transactions.map((c) => c.mailFrom);
    for (const [i, c] of transactions.entries()) {
      assert.equal(c.rcptTo.length, 1);
      assert.match(c.mailFrom, new RegExp(`^bounces\\+${m.id.slice(4)}\\.[0-9a-v]{12}@${t.config.shared_domain.replace('.', '\\.')}$`));
      assert.equal(c.envid, m.id);
      assert.ok(c.raw.equals(transactions[0].raw), `transaction ${i} carries the same message`);
      // Nothing in the message itself reveals a bounce address.
      assert.doesNotMatch(c.raw.toString(), /bounces\+/);
    }
    assert.equal(new Set(senders).size, 3, 'each recipient has a bounce address of its own');
    assert.ok(mx.connections() - connectionsBefore <= 1, 'the three transactions share one connection');
    const captured = transactions[0];
    assert.equal(captured.secure, true, 'STARTTLS offered by the MX was used');
    assert.equal(captured.heloName, t.config.hostname);

    const rawText = captured.raw.toString();
    assert.doesNotMatch(rawText, /^bcc:/im);
    assert.doesNotMatch(rawText, /hidden@remote\.test/);
    const parsed = await simpleParser(captured.raw);
    assert.equal(parsed.subject, 'Quarterly report ✓');
    assert.equal(parsed.messageId, m.messageIdHeader);
    assert.equal(parsed.from?.value[0].address, inbox.address);
    assert.equal(parsed.from?.value[0].name, 'Sender Bot');
    assert.equal((parsed.to as { value: Array<{ address: string; name: string }> }).value[0].name, 'Alice Remote');
    assert.equal((parsed.cc as { text: string }).text, 'carol@remote.test');
    assert.equal(parsed.text?.trim(), 'Hello Alice,\nthe report is attached.');
    assert.match(String(parsed.html), /the report is <b>attached<\/b>/);
    assert.equal(parsed.attachments.length, 1);
    assert.equal(parsed.attachments[0].filename, 'report.pdf');
    assert.equal(parsed.attachments[0].contentType, 'application/pdf');
    assert.equal(parsed.attachments[0].content.toString(), '%PDF-1.4 test document');

    // DKIM: an independent verifier (mailauth) checks the signature against the key published
    // in DNS, looked up through the test DNS server.
    const resolver = createResolver([dns.server], 1000);
    const verdict = await dkimVerify(captured.raw, { resolver: resolver.raw as never });
    const sig = verdict.results[0];
    assert.equal(sig?.status.result, 'pass', JSON.stringify(verdict.results));
    assert.equal(sig.signingDomain, t.config.shared_domain);

    // Counters and the event written with the status change.
    const ib = (await t.api('GET', `/inboxes/${inbox.id}`)).body;
    assert.ok(ib.sendsToday >= 1 && ib.totalSent >= 1);
    const sent = await eventsOf(t, 'message.sent', m.id);
    assert.equal(sent.length, 1);
    assert.equal(sent[0].status, 'sent');

    // The stored source is what was sent.
    const raw = await fetch(`${t.url}/messages/${m.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(Buffer.from(await raw.arrayBuffer()).toString(), rawText);
  });

  test('DKIM also verified by python3-dkim (dkimpy) against the published TXT record', async (ctx) => {
    const before = mx.messages.length;
    const res = await send({ to: ['dkimpy@remote.test'], subject: 'Verify me', bodyText: 'Body line one.\nBody line two.  ', bodyHtml: '<p>html</p>' });
    await waitForStatus(t, res.body.id, ['sent']);
    const [captured] = (await mx.waitFor(before + 1)).slice(before);
    const key = (await publishedKeyFor(t.server.ctx, t.config.shared_domain))!;
    // dkimpy looks the key up through dnsfunc; it answers with the record published in the test DNS.
    const script = [
      'import sys',
      'try:',
      '    import dkim',
      'except ImportError:',
      '    sys.exit(3)',
      'txt = sys.argv[1].encode()',
      'ok = dkim.verify(sys.stdin.buffer.read(), dnsfunc=lambda name, timeout=5: txt)',
      'print("pass" if ok else "fail")',
    ].join('\n');
    // The first interpreter that has the module (the system one has python3-dkim on Debian).
    let out: ReturnType<typeof spawnSync> | undefined;
    for (const bin of ['python3', '/usr/bin/python3']) {
      const r = spawnSync(bin, ['-c', script, dkimTxtValue(key.publicKey)], { input: captured.raw });
      if (r.status !== 3 && !r.error) {
        out = r;
        break;
      }
    }
    if (!out) {
      skipOrFail(ctx, 'python3-dkim is not installed (apt-get install python3-dkim); mailauth verified the signature above');
      return;
    }
    assert.equal(out.stdout!.toString().trim(), 'pass', out.stderr!.toString());
  });

  test('text and HTML without attachments (composed in memory): the bytes sent are the stored ones, DKIM-valid', async () => {
    const before = mx.messages.length;
    const res = await send({ to: ['inmemory@remote.test'], subject: 'Grüße', bodyText: 'Line one.\nLine two, ending in blanks.  \n.leading dot', bodyHtml: '<p>Grüße</p>' });
    await waitForStatus(t, res.body.id, ['sent']);
    const [captured] = (await mx.waitFor(before + 1)).slice(before);
    const stored = await fetch(`${t.url}/messages/${res.body.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.ok(Buffer.from(await stored.arrayBuffer()).equals(captured.raw), 'the stored source went out byte for byte');
    const verdict = await dkimVerify(captured.raw, { resolver: createResolver([dns.server], 1000).raw as never });
    assert.equal(verdict.results[0]?.status.result, 'pass', JSON.stringify(verdict.results));
    const parsed = await simpleParser(captured.raw);
    assert.equal(parsed.text, 'Line one.\nLine two, ending in blanks.  \n.leading dot');
    assert.equal(parsed.subject, 'Grüße');
  });

  test('a source composed in memory is kept in the database, committed with its message: no file, and it goes with the message', async () => {
    const ctx = t.server.ctx;
    const res = await send({ to: ['rows@remote.test'], subject: 'kept as rows', bodyText: 'in the database' });
    assert.equal(res.status, 202, res.text);
    await waitForStatus(t, res.body.id, ['sent']);
    const row = (await sqlDb(ctx).select().from(messages).where(eq(messages.id, res.body.id)).get())!;
    assert.equal(row.rawPath, `raw/rows/${res.body.id}.eml`);
    const [[stored]] = await rawRows<[number]>(ctx.db, 'SELECT sum(length(data)) FROM blob_chunks WHERE key = ?', [row.rawPath]);
    assert.equal(Number(stored), row.size);
    assert.ok(!(await storedBlobs(ctx, 'raw')).some((b) => b.key !== row.rawPath && b.key.includes(res.body.id)), 'the source was written as a file as well');
    const raw = await fetch(`${t.url}/messages/${res.body.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(raw.status, 200);
    assert.equal(Buffer.from(await raw.arrayBuffer()).length, row.size);
    assert.equal((await t.api('DELETE', `/messages/${res.body.id}`)).status, 204);
    assert.deepEqual(await rawRows(ctx.db, 'SELECT seq FROM blob_chunks WHERE key = ?', [row.rawPath]), []);
  });

  test('a source over ROW_BLOB_MAX_BYTES is a file, as before, and read back whole', async () => {
    const ctx = t.server.ctx;
    const res = await send({ to: ['big@remote.test'], subject: 'a file', bodyText: 'long line of text. '.repeat(4000) });
    assert.equal(res.status, 202, res.text);
    await waitForStatus(t, res.body.id, ['sent']);
    const row = (await sqlDb(ctx).select().from(messages).where(eq(messages.id, res.body.id)).get())!;
    assert.ok(row.size > ROW_BLOB_MAX_BYTES, `size ${row.size}`);
    assert.match(row.rawPath!, new RegExp(`^raw/\\d{4}-\\d{2}/${res.body.id}\\.eml$`));
    assert.deepEqual(
      (await storedBlobs(ctx, 'raw')).filter((b) => b.key === row.rawPath).map((b) => b.size),
      [row.size],
    );
    const raw = await fetch(`${t.url}/messages/${res.body.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(Buffer.from(await raw.arrayBuffer()).length, row.size);
  });

  test('a send refused inside its transaction (every recipient suppressed meanwhile) leaves no source behind', async () => {
    assert.equal((await t.api('POST', '/suppressions', { address: 'gone@remote.test' })).status, 201);
    const count = async () => Number((await rawRows<[number]>(t.server.ctx.db, "SELECT count(*) FROM blob_chunks WHERE key LIKE 'raw/%'"))[0][0]);
    const before = await count();
    await expectError(await send({ to: ['gone@remote.test'], subject: 'refused', bodyText: 'never stored' }), 422, 'RECIPIENTS_SUPPRESSED');
    assert.equal(await count(), before);
  });

  test('status is `sending` while a worker holds the message, then `sent`', async () => {
    remoteDomain('slow.test');
    mx.script('slow@slow.test', 'hold');
    const res = await send({ to: ['slow@slow.test'], subject: 'slow', bodyText: 'hi' });
    assert.equal(res.body.status, 'queued');
    await mx.held('slow@slow.test');
    const during = (await t.api('GET', `/messages/${res.body.id}`)).body;
    assert.equal(during.status, 'sending');
    assert.equal(during.recipients[0].status, 'sending');
    mx.release('slow@slow.test');
    const done = await waitForStatus(t, res.body.id, ['sent', 'failed', 'bounced']);
    assert.equal(done.status, 'sent');
  });

  test("two recipient domains attempted at once: each job's results are merged into what the other wrote, one message.sent event", async () => {
    // Both jobs are claimed (each marks its recipient sending) before either ends, so the row
    // each attempt started from is stale when it finishes: its results must not undo the other's.
    remoteDomain('first.test');
    remoteDomain('second.test');
    mx.script('a@first.test', 'hold');
    mx.script('b@second.test', 'hold');
    const res = await send({ to: ['a@first.test', 'b@second.test'], subject: 'two domains', bodyText: 'hi' });
    await Promise.all([mx.held('a@first.test'), mx.held('b@second.test')]);
    mx.release('a@first.test');
    const half = await until('the first domain sent', async () => {
      const m = (await t.api('GET', `/messages/${res.body.id}`)).body;
      return m.recipients.some((r: { status: string }) => r.status === 'sent') ? m : undefined;
    });
    assert.equal(half.status, 'sending');
    assert.deepEqual(
      half.recipients.map((r: { address: string; status: string }) => [r.address, r.status]),
      [
        ['a@first.test', 'sent'],
        ['b@second.test', 'sending'],
      ],
    );
    mx.release('b@second.test');
    const done = await waitForStatus(t, res.body.id, ['sent', 'failed', 'bounced']);
    assert.equal(done.status, 'sent');
    assert.deepEqual(
      done.recipients.map((r: { address: string; status: string }) => [r.address, r.status]),
      [
        ['a@first.test', 'sent'],
        ['b@second.test', 'sent'],
      ],
    );
    assert.equal((await eventsOf(t, 'message.sent', res.body.id)).length, 1);
  });

  test('HTML only: a text part is generated from it', async () => {
    const before = mx.messages.length;
    const res = await send({ to: ['html@remote.test'], subject: 'html only', bodyHtml: '<h1>Title</h1><p>Some <i>text</i> here.</p>' });
    assert.equal(res.status, 202, res.text);
    assert.match(res.body.bodyText, /TITLE[\s\S]*Some text here\./);
    await waitForStatus(t, res.body.id, ['sent']);
    const [captured] = (await mx.waitFor(before + 1)).slice(before);
    const parsed = await simpleParser(captured.raw);
    assert.match(parsed.text ?? '', /Some text here\./);
    assert.match(String(parsed.html), /<h1>Title<\/h1>/);
  });
});

describe('status from the remote answers', () => {
  test('550 for one recipient: bounced, with the reply on that recipient, bounceCount +1', async () => {
    remoteDomain('bounce.test');
    mx.script('nobody@bounce.test', '550');
    const before = (await t.api('GET', `/inboxes/${inbox.id}`)).body.bounceCount;
    const res = await send({ to: ['nobody@bounce.test', 'someone@bounce.test'], subject: 'to a missing user', bodyText: 'hi' });
    assert.equal(res.status, 202, res.text);
    const m = await waitForStatus(t, res.body.id, ['bounced', 'sent', 'failed']);
    assert.equal(m.status, 'bounced');
    const byAddr = Object.fromEntries(m.recipients.map((r: { address: string }) => [r.address, r]));
    assert.equal(byAddr['nobody@bounce.test'].status, 'bounced');
    assert.match(byAddr['nobody@bounce.test'].response, /^550 5\.1\.1 No such user here/);
    assert.equal(byAddr['someone@bounce.test'].status, 'sent');
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}`)).body.bounceCount, before + 1);
    const ev = await eventsOf(t, 'message.bounced', m.id);
    assert.equal(ev.length, 1);
    assert.equal(ev[0].status, 'bounced');
    assert.equal((await eventsOf(t, 'message.sent', m.id)).length, 0);
  });

  test('a message refused after DATA: the recipient of that transaction bounces with the reply, the others are sent', async () => {
    remoteDomain('content.test');
    mx.rejectData('strict@content.test');
    const res = await send({ to: ['strict@content.test', 'other@content.test'], subject: 'refused content', bodyText: 'hi' });
    const m = await waitForStatus(t, res.body.id, ['bounced', 'sent', 'failed']);
    assert.equal(m.status, 'bounced');
    const [strict, other] = m.recipients;
    assert.equal(strict.status, 'bounced');
    assert.match(strict.response, /^554 5\.6\.0 Message content rejected/);
    assert.equal(other.status, 'sent');
  });

  test('451 then 250: retried on the schedule, then sent', async () => {
    remoteDomain('grey.test');
    mx.script('later@grey.test', ['451', '250']);
    const res = await send({ to: ['later@grey.test'], subject: 'greylisted', bodyText: 'hi' });
    const m = await waitForStatus(t, res.body.id, ['sent', 'failed', 'bounced']);
    assert.equal(m.status, 'sent');
    assert.equal(mx.attempts('later@grey.test'), 2);
    assert.equal((await eventsOf(t, 'message.sent', m.id)).length, 1);
  });

  test('always 451: failed when the retry schedule runs out, and the job is listed as failed', async () => {
    remoteDomain('busy.test');
    mx.script('never@busy.test', '451');
    const res = await send({ to: ['never@busy.test'], subject: 'never accepted', bodyText: 'hi' });
    const m = await waitForStatus(t, res.body.id, ['failed', 'sent', 'bounced']);
    assert.equal(m.status, 'failed');
    assert.equal(m.recipients[0].status, 'failed');
    assert.match(m.recipients[0].response, /^451 4\.7\.1/);
    // Two retries scheduled: three attempts in all.
    assert.equal(mx.attempts('never@busy.test'), 3);
    const job = (await sqlDb(t.server.ctx)
      .select()
      .from(jobs)
      .where(and(eq(jobs.kind, 'send'), eq(jobs.partition, 'busy.test')))
      .get())!;
    assert.equal(job.status, 'failed');
    assert.equal(job.attempts, 3);
    // `failed` has no event type of its own: it is reported as message.bounced, status failed.
    assert.equal((await eventsOf(t, 'message.bounced', m.id))[0]?.status, 'failed');
  });

  test('mailroom queue lists the failed send with its last error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-queue-'));
    try {
      const config = join(dir, 'mailroom.toml');
      writeFileSync(config, `data_dir = ${JSON.stringify(t.dataDir)}\nshared_domain = ${JSON.stringify(t.config.shared_domain)}\n`);
      const out = await runCli(['--config', config, 'queue', '--failed', '--json']);
      assert.equal(out.code, 0, out.stderr);
      const entries = JSON.parse(out.stdout).data as Array<Record<string, unknown>>;
      const busy = entries.find((e) => e.partition === 'busy.test');
      assert.ok(busy, out.stdout);
      assert.equal(busy.kind, 'send');
      assert.equal(busy.status, 'failed');
      assert.equal(busy.attempts, 3);
      assert.match(String(busy.lastError), /451 4\.7\.1/);
      assert.match(String(busy.subject), /^msg_/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a dropped connection is retried', async () => {
    remoteDomain('flaky.test');
    mx.script('drop@flaky.test', ['drop', '250']);
    const res = await send({ to: ['drop@flaky.test'], subject: 'flaky', bodyText: 'hi' });
    const m = await waitForStatus(t, res.body.id, ['sent', 'failed', 'bounced']);
    assert.equal(m.status, 'sent');
    assert.equal(mx.attempts('drop@flaky.test'), 2);
  });

  test('null MX (RFC 7505): failed at once, no connection made', async () => {
    dns.set('nullmx.test', [{ type: 'MX', exchange: '.', priority: 0 }]);
    const res = await send({ to: ['x@nullmx.test'], subject: 'null mx', bodyText: 'hi' });
    const m = await waitForStatus(t, res.body.id, ['failed', 'sent', 'bounced']);
    assert.equal(m.status, 'failed');
    assert.match(m.recipients[0].response, /null MX/);
    assert.equal(mx.attempts('x@nullmx.test'), 0);
    const job = (await sqlDb(t.server.ctx).select().from(jobs).where(eq(jobs.partition, 'nullmx.test')).get())!;
    assert.equal(job.attempts, 1);
  });

  test("no MX: the domain's A record is the implicit MX (RFC 5321 §5.1)", async () => {
    dns.set('amx.test', [{ type: 'A', address: '127.0.0.1' }]);
    const res = await send({ to: ['direct@amx.test'], subject: 'implicit mx', bodyText: 'hi' });
    const m = await waitForStatus(t, res.body.id, ['sent', 'failed', 'bounced']);
    assert.equal(m.status, 'sent');
    assert.equal(mx.attempts('direct@amx.test'), 1);
  });

  test('neither MX nor address records: failed', async () => {
    const res = await send({ to: ['x@nowhere.test'], subject: 'nowhere', bodyText: 'hi' });
    const m = await waitForStatus(t, res.body.id, ['failed', 'sent', 'bounced']);
    assert.equal(m.status, 'failed');
    assert.match(m.recipients[0].response, /no MX or address record/);
  });

  test('DNS outage: deferred and retried, not failed on the first answer', async () => {
    remoteDomain('outage.test');
    dns.servfail('outage.test');
    const res = await send({ to: ['x@outage.test'], subject: 'dns outage', bodyText: 'hi' });
    // Wait for the first attempt to be recorded, then let DNS recover.
    await until('the first attempt recorded', async () => {
      const job = await sqlDb(t.server.ctx).select().from(jobs).where(eq(jobs.partition, 'outage.test')).get();
      return job?.lastError ? job : undefined;
    });
    dns.clear('outage.test');
    remoteDomain('outage.test');
    const m = await waitForStatus(t, res.body.id, ['sent', 'failed', 'bounced']);
    assert.equal(m.status, 'sent');
  });
  test('a local failure during an attempt (source file gone) is retried, then the message fails', async () => {
    dns.servfail('lost.test');
    const res = await send({ to: ['x@lost.test'], subject: 'lost source', bodyText: 'hi' });
    await until('the first attempt recorded', async () => {
      const job = await sqlDb(t.server.ctx).select().from(jobs).where(eq(jobs.partition, 'lost.test')).get();
      return job?.lastError ? job : undefined;
    });
    const row = (await sqlDb(t.server.ctx).select().from(messages).where(eq(messages.id, res.body.id)).get())!;
    assert.equal(await loseBlob(t.server.ctx, row.rawPath!), 1);
    const m = await waitForStatus(t, res.body.id, ['failed', 'sent', 'bounced']);
    assert.equal(m.status, 'failed');
    assert.match(m.recipients[0].response, /local error/);
  });
});

describe('transport', () => {
  test('connections to an MX host are pooled and reused across messages', async () => {
    remoteDomain('pool.test');
    const opened = mx.connections();
    const sends = await Promise.all(Array.from({ length: 8 }, (_, i) => send({ to: [`p${i}@pool.test`], subject: `pooled ${i}`, bodyText: 'hi' })));
    for (const s of sends) await waitForStatus(t, s.body.id, ['sent']);
    const used = mx.connections() - opened;
    assert.ok(used >= 1 && used <= t.config.outbound.concurrency_per_domain, `8 messages used ${used} connections`);
  });

  test('STARTTLS whose handshake fails: the same host is tried again without TLS', async () => {
    // Its own server, so the handshake gives up after a short timeout.
    const quick = await startTestServer({ ...overrides(), outbound: { ...overrides().outbound, timeout: '500ms' }, http: FAST_CLOSE });
    try {
      remoteDomain('badtls.test');
      mx.breakTls('mx.badtls.test');
      const a = (await quick.api('POST', '/inboxes', { address: 'tls-tester' })).body;
      const before = mx.messages.length;
      const res = await send({ to: ['plain@badtls.test'], subject: 'tls broken', bodyText: 'hi' }, a.id, quick);
      const m = await waitForStatus(quick, res.body.id, ['sent', 'failed', 'bounced']);
      assert.equal(m.status, 'sent', JSON.stringify(m.recipients));
      const [captured] = (await mx.waitFor(before + 1)).slice(before);
      assert.equal(captured.secure, false);
      assert.deepEqual(captured.rcptTo, ['plain@badtls.test']);
    } finally {
      await quick.close();
    }
  });

  test("outbound.relay: everything goes to the smarthost, whatever the recipient domain's DNS says", async () => {
    const relayed = await startTestServer({
      outbound: { mode: 'email', relay: `smtp://127.0.0.1:${mx.port}`, relay_verify_tls: false, retry_schedule: ['200ms'] },
      dns: { servers: [dns.server], timeout: '1s' },
      http: FAST_CLOSE,
    });
    try {
      const a = (await relayed.api('POST', '/inboxes', { address: 'relayed' })).body;
      const before = mx.messages.length;
      const res = await send({ to: ['someone@no-dns-at-all.test'], subject: 'via relay', bodyText: 'hi' }, a.id, relayed);
      const m = await waitForStatus(relayed, res.body.id, ['sent', 'failed', 'bounced']);
      assert.equal(m.status, 'sent', JSON.stringify(m.recipients));
      const [captured] = (await mx.waitFor(before + 1)).slice(before);
      assert.deepEqual(captured.rcptTo, ['someone@no-dns-at-all.test']);
      assert.match(captured.mailFrom, /^bounces\+[0-9a-z]+\.[0-9a-v]{12}@/);
      assert.equal(captured.mailFrom.split('@')[1], a.address.split('@')[1]);
    } finally {
      await relayed.close();
    }
  });
  test("outbound.relay: the smarthost's certificate is checked by default", async () => {
    const strict = await startTestServer({
      outbound: { mode: 'email', relay: `smtp://127.0.0.1:${mx.port}`, retry_schedule: ['100ms'] },
      dns: { servers: [dns.server], timeout: '1s' },
      http: FAST_CLOSE,
    });
    try {
      const a = (await strict.api('POST', '/inboxes', { address: 'strict' })).body;
      const res = await send({ to: ['someone@remote.test'], subject: 'bad relay cert', bodyText: 'hi' }, a.id, strict);
      const m = await waitForStatus(strict, res.body.id, ['sent', 'failed', 'bounced']);
      // smtp-server's bundled certificate is self-signed (and expired): never trusted silently.
      assert.equal(m.status, 'failed');
      assert.match(m.recipients[0].response, /relay unreachable: .*certificate/);
    } finally {
      await strict.close();
    }
  });
});

describe('durability', () => {
  test('a restart in the middle of a retry leaves the job to finish', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-restart-'));
    const o = { ...overrides(), outbound: { ...overrides().outbound, retry_schedule: ['1s'] }, http: FAST_CLOSE };
    remoteDomain('restart.test');
    mx.script('patient@restart.test', ['451', '250']);
    let first: TestServer | undefined = await startTestServer(o, { dataDir });
    let second: TestServer | undefined;
    try {
      const key = first.key;
      const ib = (await first.api('POST', '/inboxes', { address: 'restarter' })).body;
      const res = await send({ to: ['patient@restart.test'], subject: 'survives a restart', bodyText: 'hi' }, ib.id, first);
      assert.equal(res.status, 202, res.text);
      // After the first (451) attempt the recipient is deferred and the message waits, queued.
      const waiting = await until('the first attempt deferred', async () => {
        const m = (await first!.api('GET', `/messages/${res.body.id}`)).body;
        return m.recipients[0].status === 'deferred' ? m : undefined;
      });
      assert.equal(waiting.status, 'queued');
      assert.match(waiting.recipients[0].response, /^451 /);
      await first.close();
      first = undefined;
      assert.equal(mx.attempts('patient@restart.test'), 1);

      second = await startTestServer(o, { dataDir });
      const m = await waitForStatus(second, res.body.id, ['sent', 'failed', 'bounced'], { key });
      assert.equal(m.status, 'sent');
      assert.equal(mx.attempts('patient@restart.test'), 2);
    } finally {
      await first?.close();
      await second?.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('local delivery and dry-run', () => {
  test('every recipient an inbox here: delivered through the inbound path, received there', async () => {
    const other = await t.newAccount('other');
    const rcv = (await t.api('POST', '/inboxes', { address: 'receiver' }, { key: other.key })).body;
    const res = await send({ to: [rcv.address.toUpperCase()], subject: 'internal hello', bodyText: 'between inboxes' });
    assert.equal(res.status, 202, res.text);
    const m = await waitForStatus(t, res.body.id, ['delivered', 'sent', 'failed', 'bounced']);
    assert.equal(m.status, 'delivered');
    assert.equal(m.recipients[0].status, 'delivered');
    assert.equal((await eventsOf(t, 'message.delivered', m.id)).length, 1);
    const list = (await t.api('GET', `/inboxes/${rcv.id}/messages`, undefined, { key: other.key })).body;
    assert.equal(list.total, 1);
    const got = list.data[0];
    assert.equal(got.direction, 'inbound');
    assert.equal(got.status, 'received');
    assert.equal(got.subject, 'internal hello');
    assert.equal(got.fromAddress, inbox.address);
    assert.equal(got.messageIdHeader, m.messageIdHeader);
    assert.match(got.bodyText, /between inboxes/);
  });

  test('local and remote recipients: sent once both are done; an unknown local address bounces', async () => {
    const rcv = (await t.api('POST', '/inboxes', { address: 'colleague' })).body;
    const res = await send({ to: [rcv.address, 'peer@remote.test'], subject: 'mixed', bodyText: 'hi' });
    const m = await waitForStatus(t, res.body.id, ['sent', 'delivered', 'failed', 'bounced']);
    assert.equal(m.status, 'sent');
    const st = Object.fromEntries(m.recipients.map((r: { address: string; status: string }) => [r.address, r.status]));
    assert.deepEqual(st, { [rcv.address]: 'delivered', 'peer@remote.test': 'sent' });

    const ghost = await send({ to: [`ghost@${t.config.shared_domain}`], subject: 'to nobody', bodyText: 'hi' });
    const g = await waitForStatus(t, ghost.body.id, ['bounced', 'failed', 'sent', 'delivered']);
    assert.equal(g.status, 'bounced');
    assert.match(g.recipients[0].response, /^550 5\.1\.1/);
  });

  test('dry-run: nothing leaves the box, messages end sent with delivery "dry-run"; local ones are still delivered', async () => {
    const dry = await startTestServer({ outbound: { mode: 'dry-run', mx_port: mx.port, retry_schedule: ['200ms'] }, dns: { servers: [dns.server], timeout: '1s' }, http: FAST_CLOSE });
    try {
      const a = (await dry.api('POST', '/inboxes', { address: 'dry-a' })).body;
      const b = (await dry.api('POST', '/inboxes', { address: 'dry-b' })).body;
      const connections = mx.connections();
      const res = await send({ to: ['someone@remote.test', b.address], subject: 'dry', bodyText: 'hi' }, a.id, dry);
      assert.equal(res.status, 202, res.text);
      assert.equal(res.body.delivery, 'dry-run');
      const m = await waitForStatus(dry, res.body.id, ['sent', 'delivered', 'failed', 'bounced']);
      assert.equal(m.status, 'sent');
      assert.equal(m.delivery, 'dry-run');
      const st = Object.fromEntries(m.recipients.map((r: { address: string; status: string }) => [r.address, r.status]));
      assert.deepEqual(st, { 'someone@remote.test': 'sent', [b.address]: 'delivered' });
      assert.match(m.recipients.find((r: { address: string }) => r.address === 'someone@remote.test').response, /dry-run/);
      assert.equal(mx.connections(), connections, 'no connection left the box');
      assert.equal((await dry.api('GET', `/inboxes/${b.id}/messages`)).body.total, 1);
    } finally {
      await dry.close();
    }
  });
});

describe('send API validation', () => {
  const ok = { to: ['v@remote.test'], subject: 'valid', bodyText: 'hi' };

  test('field rules: each refused with its exact status and code, nothing queued', async () => {
    const cases: Array<[string, unknown, number, string]> = [
      ['missing to', { subject: 's', bodyText: 'b' }, 400, 'VALIDATION_ERROR'],
      ['empty to', { ...ok, to: [] }, 400, 'VALIDATION_ERROR'],
      ['to not an array', { ...ok, to: 'v@remote.test' }, 400, 'VALIDATION_ERROR'],
      ['missing subject', { to: ok.to, bodyText: 'b' }, 400, 'VALIDATION_ERROR'],
      ['subject over 998 characters', { ...ok, subject: 'x'.repeat(999) }, 400, 'VALIDATION_ERROR'],
      ['no body', { to: ok.to, subject: 's' }, 400, 'VALIDATION_ERROR'],
      ['empty bodies', { to: ok.to, subject: 's', bodyText: '', bodyHtml: '' }, 400, 'VALIDATION_ERROR'],
      ['CRLF in subject', { ...ok, subject: 'hi\r\nBcc: victim@example.com' }, 400, 'VALIDATION_ERROR'],
      ['LF in a recipient', { ...ok, to: ['v@remote.test\nBcc: x@y.z'] }, 400, 'VALIDATION_ERROR'],
      ['NUL in cc', { ...ok, cc: ['a\u0000@remote.test'] }, 400, 'VALIDATION_ERROR'],
      ['invalid address', { ...ok, to: ['not-an-address'] }, 400, 'INVALID_ADDRESS'],
      ['invalid cc address', { ...ok, cc: ['a@'] }, 400, 'INVALID_ADDRESS'],
      ['invalid bcc address', { ...ok, bcc: ['two@@remote.test'] }, 400, 'INVALID_ADDRESS'],
      ['unknown attachment', { ...ok, attachmentIds: ['att_doesnotexist'] }, 400, 'VALIDATION_ERROR'],
      ['unknown field', { ...ok, replyTo: 'x@remote.test' }, 400, 'VALIDATION_ERROR'],
      ['unknown thread', { ...ok, threadId: 'thr_doesnotexist' }, 404, 'THREAD_NOT_FOUND'],
      ['too many recipients', { ...ok, to: Array.from({ length: 60 }, (_, i) => `a${i}@remote.test`), cc: Array.from({ length: 60 }, (_, i) => `c${i}@remote.test`) }, 400, 'VALIDATION_ERROR'],
    ];
    const before = (await t.api('GET', `/inboxes/${inbox.id}`)).body;
    for (const [name, body, status, code] of cases) {
      const res = await send(body as Record<string, unknown>);
      assert.doesNotThrow(() => expectError(res, status, code), `${name}: got ${res.status} ${res.text}`);
    }
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, 'not json');
    expectError(res, 400, 'INVALID_JSON');
    const after = (await t.api('GET', `/inboxes/${inbox.id}`)).body;
    assert.equal(after.sendsToday, before.sendsToday, 'refused sends are not counted');
    assert.equal(after.totalSent, before.totalSent);
  });

  test('inbox rules: unknown 404, another account 404, suspended 403, read-only key 403', async () => {
    expectError(await send(ok, 'inb_doesnotexist'), 404, 'INBOX_NOT_FOUND');
    const other = await t.newAccount('stranger');
    expectError(await t.api('POST', `/inboxes/${inbox.id}/messages`, ok, { key: other.key }), 404, 'INBOX_NOT_FOUND');
    const frozen = (await t.api('POST', '/inboxes', { address: 'frozen' })).body;
    await suspendInbox(t.server.ctx, frozen.id);
    expectError(await send(ok, frozen.id), 403, 'INBOX_SUSPENDED');
    const ro = await createApiKey(t.server.ctx, t.accountId, { name: 'ro', readOnly: true });
    expectError(await t.api('POST', `/inboxes/${inbox.id}/messages`, ok, { key: ro.key }), 403, 'FORBIDDEN');
  });

  test('attachments over limits.max_attachment_bytes in total: 413 PAYLOAD_TOO_LARGE', async () => {
    const small = await startTestServer({ limits: { max_attachment_bytes: 1000 }, http: FAST_CLOSE });
    try {
      const ids: string[] = [];
      for (const name of ['a.bin', 'b.bin']) {
        const form = new FormData();
        form.append('file', new Blob([Buffer.alloc(600, 1)], { type: 'application/octet-stream' }), name);
        const up = await fetch(`${small.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${small.key}` }, body: form });
        assert.equal(up.status, 201);
        ids.push(((await up.json()) as { id: string }).id);
      }
      const ib = (await small.api('POST', '/inboxes', { address: 'heavy' })).body;
      assert.equal((await send({ ...ok, attachmentIds: [ids[0]] }, ib.id, small)).status, 202);
      expectError(await send({ ...ok, attachmentIds: ids }, ib.id, small), 413, 'PAYLOAD_TOO_LARGE');
    } finally {
      await small.close();
    }
  });

  test('a thread of another inbox is 404 THREAD_NOT_FOUND', async () => {
    const other = (await t.api('POST', '/inboxes', { address: 'thread-owner' })).body;
    const first = await send({ ...ok, subject: 'thread start' }, other.id);
    expectError(await send({ ...ok, threadId: first.body.threadId }), 404, 'THREAD_NOT_FOUND');
  });

  test('daily limit: one send counts once whatever its recipients; over it 429 DAILY_SEND_LIMIT_EXCEEDED', async () => {
    const lim = (await t.api('POST', '/inboxes', { address: 'limited' })).body;
    await setDailyLimit(t.server.ctx, lim.id, 2);
    assert.equal((await send({ ...ok, to: ['a@remote.test', 'b@remote.test', 'c@remote.test'] }, lim.id)).status, 202);
    assert.equal((await send(ok, lim.id)).status, 202);
    expectError(await send(ok, lim.id), 429, 'DAILY_SEND_LIMIT_EXCEEDED');
    const after = (await t.api('GET', `/inboxes/${lim.id}`)).body;
    assert.equal(after.sendsToday, 2);
    assert.equal(after.totalSent, 2);
    assert.equal((await t.api('GET', `/inboxes/${lim.id}/messages`)).body.total, 2);
  });

  test('the daily count is decided by the database, not by a row read earlier: a stale read cannot overshoot; a limit of 0 sends nothing; a new day starts at 1', async () => {
    const lim = (await t.api('POST', '/inboxes', { address: 'counted' })).body;
    await setDailyLimit(t.server.ctx, lim.id, 1);
    const ctx = t.server.ctx;
    const stale = await findInboxRow(ctx, t.accountId, lim.id);
    await countSend(ctx.db, ctx, stale);
    // Another node (or an earlier read) still holds the row from before the first count.
    await assert.rejects(() => countSend(ctx.db, ctx, stale), { code: 'DAILY_SEND_LIMIT_EXCEEDED' });
    assert.equal((await t.api('GET', `/inboxes/${lim.id}`)).body.sendsToday, 1);
    await sqlDb(ctx).update(inboxTable).set({ sendsDay: '2000-01-01', sendsToday: 1 }).where(sqlEq(inboxTable.id, lim.id)).run();
    await countSend(ctx.db, ctx, await findInboxRow(ctx, t.accountId, lim.id));
    const after = (await t.api('GET', `/inboxes/${lim.id}`)).body;
    assert.equal(after.sendsToday, 1);
    assert.equal(after.totalSent, 2);
    await setDailyLimit(ctx, lim.id, 0);
    await sqlDb(ctx).update(inboxTable).set({ sendsDay: '2000-01-01' }).where(sqlEq(inboxTable.id, lim.id)).run();
    await assert.rejects(async () => countSend(ctx.db, ctx, await findInboxRow(ctx, t.accountId, lim.id)), { code: 'DAILY_SEND_LIMIT_EXCEEDED' });
  });

  test('threadId: the reply joins the thread with In-Reply-To and References of its last message', async () => {
    const first = await send({ to: ['thread@remote.test'], subject: 'Topic', bodyText: 'one' });
    await waitForStatus(t, first.body.id, ['sent']);
    const second = await send({ to: ['thread@remote.test'], subject: 'Re: Topic', bodyText: 'two', threadId: first.body.threadId });
    assert.equal(second.status, 202, second.text);
    assert.equal(second.body.threadId, first.body.threadId);
    assert.equal(second.body.inReplyTo, first.body.messageIdHeader);
    const third = await send({ to: ['thread@remote.test'], subject: 'Re: Topic', bodyText: 'three', threadId: first.body.threadId });
    await waitForStatus(t, third.body.id, ['sent']);
    const captured = mx.messages.find((c) => c.raw.includes(third.body.messageIdHeader))!;
    const parsed = await simpleParser(captured.raw);
    assert.equal(parsed.inReplyTo, second.body.messageIdHeader);
    assert.deepEqual([parsed.references].flat(), [first.body.messageIdHeader, second.body.messageIdHeader]);
    const thread = (await t.api('GET', `/threads/${first.body.threadId}`)).body;
    assert.equal(thread.messageCount ?? thread.messages?.length, 3);
  });

  test('Idempotency-Key: a retried send is queued once', async () => {
    const headers = { 'Idempotency-Key': `send-${Date.now()}` };
    const a = await t.api('POST', `/inboxes/${inbox.id}/messages`, { ...ok, subject: 'once' }, { headers });
    const b = await t.api('POST', `/inboxes/${inbox.id}/messages`, { ...ok, subject: 'once' }, { headers });
    assert.equal(a.status, 202);
    assert.equal(b.status, 202);
    assert.equal(b.headers.get('idempotent-replayed'), 'true');
    assert.equal(b.body.id, a.body.id);
  });
});
