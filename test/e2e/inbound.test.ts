// Inbound mail end to end: nodemailer (and a raw SMTP client for exact bytes) against the real
// SMTP listener, then the API. Covers bodies, cc, attachments downloaded through their signed
// URL, threading, recipient rules (unknown, relay, suspended, routing syntax), size and
// recipient limits, SPF/DKIM/DMARC results, and a corpus of malformed MIME.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import nodemailer, { type SendMailOptions, type Transporter } from 'nodemailer';
import { eq } from 'drizzle-orm';
import { events } from '../../src/store/schema.ts';
import { suspendInbox } from '../../src/domain/inboxes/inboxes.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { smtpTransport } from '../support/mail.ts';
import { peerSkip, toolMissing } from '../support/peers.ts';
import { sqlDb } from '../support/db.ts';

const MAX_BYTES = 300_000;
const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'mime');

let t: TestServer;
let dns: TestDns;
let inboxId: string;
let transport: Transporter;
const dkimKeys = generateKeyPairSync('rsa', { modulusLength: 1024 });

before(async () => {
  dns = await startTestDns();
  // example.org publishes SPF, DKIM and a DMARC policy; spoofed.example publishes a strict
  // policy but its mail arrives from an address it does not authorise.
  dns.set('example.org', [{ type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 -all' }]);
  const pub = dkimKeys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  dns.set('sel1._domainkey.example.org', [{ type: 'TXT', value: `v=DKIM1; k=rsa; p=${pub}` }]);
  dns.set('_dmarc.example.org', [{ type: 'TXT', value: 'v=DMARC1; p=reject' }]);
  dns.set('spoofed.example', [{ type: 'TXT', value: 'v=spf1 ip4:192.0.2.1 -all' }]);
  dns.set('_dmarc.spoofed.example', [{ type: 'TXT', value: 'v=DMARC1; p=reject' }]);
  t = await startTestServer({ smtp: { max_message_bytes: MAX_BYTES, max_recipients: 3 }, dns: { servers: [dns.server], timeout: '1s' } });
  inboxId = (await t.api('POST', '/inboxes', { address: 'alice', displayName: 'Alice' })).body.id;
  // One pooled connection for every nodemailer send (smtp-server delays each greeting).
  transport = smtpTransport(t.server.smtpPort);
});

after(async () => {
  transport?.close();
  await t?.close();
  await dns?.close();
});

function run(cmd: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { encoding: 'utf8', timeout: 30_000 }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

function storedIds(response: string | undefined): string[] {
  const m = /stored as (.+)$/.exec(response ?? '');
  assert.ok(m, `no stored ids in ${response}`);
  return m[1].split(' ');
}

async function sendError(mail: SendMailOptions): Promise<{ responseCode: number; response: string }> {
  try {
    await transport.sendMail(mail);
  } catch (err) {
    return err as { responseCode: number; response: string };
  }
  assert.fail('the message was accepted');
}

describe('receiving over SMTP', () => {
  test('a plain-text message becomes a received message of the inbox', async () => {
    const info = await transport.sendMail({ from: 'Bob Sender <bob@example.org>', to: 'alice@agents.test', subject: 'Hello Alice', text: 'Plain body\nline two' });
    assert.match(info.response ?? '', /^250 2\.0\.0 OK: stored as msg_/);
    const [id] = storedIds(info.response);
    const res = await t.api('GET', `/messages/${id}`);
    assert.equal(res.status, 200);
    const m = res.body;
    assert.equal(m.inboxId, inboxId);
    assert.equal(m.direction, 'inbound');
    assert.equal(m.status, 'received');
    assert.equal(m.fromAddress, 'bob@example.org');
    assert.equal(m.fromName, 'Bob Sender');
    assert.deepEqual(m.toAddresses, ['alice@agents.test']);
    assert.deepEqual(m.ccAddresses, []);
    assert.equal(m.subject, 'Hello Alice');
    assert.equal(m.bodyText, 'Plain body\nline two');
    assert.equal(m.bodyHtml, null);
    assert.deepEqual(m.attachments, []);
    assert.equal(m.messageIdHeader, info.messageId);
    assert.equal(m.inReplyTo, null);
    assert.equal('delivery' in m, false);
    assert.match(m.threadId, /^thr_/);
    assert.ok(m.size > 0);
  });

  test('the message.received event carries the message, fromName, hasAttachments and receivedAt', async () => {
    const info = await transport.sendMail({ from: 'Eve <eve@example.org>', to: 'alice@agents.test', subject: 'event check', text: 'x' });
    const [id] = storedIds(info.response);
    const rows = await sqlDb(t.server.ctx).select().from(events).where(eq(events.type, 'message.received')).all();
    const ev = rows.map((r) => JSON.parse(r.data)).find((d) => d.id === id);
    assert.ok(ev, 'event recorded');
    assert.equal(ev.inboxId, inboxId);
    assert.equal(ev.fromAddress, 'eve@example.org');
    assert.equal(ev.fromName, 'Eve');
    assert.deepEqual(ev.toAddresses, ['alice@agents.test']);
    assert.equal(ev.subject, 'event check');
    assert.equal(ev.hasAttachments, false);
    assert.equal(ev.receivedAt, ev.createdAt);
    assert.equal(ev.status, 'received');
  });

  test('the stored event leaves the bodies to the message row; GET /events gives them back', async () => {
    const body = `unique body ${randomBytes(8).toString('hex')}`;
    const info = await transport.sendMail({ from: 'eve@example.org', to: 'alice@agents.test', subject: 'event bodies', text: body, html: `<p>${body}</p>` });
    const [id] = storedIds(info.response);
    const row = (await sqlDb(t.server.ctx).select().from(events).where(eq(events.messageId, id)).get())!;
    assert.ok(!row.data.includes(body), 'the body is written once, in the message row');
    const listed = (await t.api('GET', '/events?types=message.received&limit=1000')).body.data.find((e: { data: { id: string } }) => e.data.id === id);
    assert.equal(listed.data.bodyText, body);
    assert.equal(listed.data.bodyHtml, `<p>${body}</p>`);
    assert.equal(listed.data.subject, 'event bodies');
  });

  test('HTML and cc, recipient matched case-insensitively', async () => {
    const info = await transport.sendMail({
      from: 'bob@example.org',
      to: 'ALICE@Agents.Test',
      cc: ['Carol <carol@example.net>', 'dave@example.net'],
      subject: 'HTML mail',
      html: '<p>Hi <b>there</b></p>',
      text: 'Hi there',
    });
    const m = (await t.api('GET', `/messages/${storedIds(info.response)[0]}`)).body;
    assert.equal(m.inboxId, inboxId);
    assert.equal(m.bodyHtml, '<p>Hi <b>there</b></p>');
    assert.equal(m.bodyText, 'Hi there');
    assert.deepEqual(m.ccAddresses, ['carol@example.net', 'dave@example.net']);
  });

  test('an attachment is listed and downloads byte-identical through its presigned URL', async () => {
    const pdf = Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(50_000)]);
    const info = await transport.sendMail({
      from: 'bob@example.org',
      to: 'alice@agents.test',
      subject: 'report attached',
      text: 'see attachment',
      attachments: [{ filename: 'report.pdf', content: pdf }],
    });
    const m = (await t.api('GET', `/messages/${storedIds(info.response)[0]}`)).body;
    assert.equal(m.attachments.length, 1);
    const meta = m.attachments[0];
    assert.deepEqual(Object.keys(meta).sort(), ['contentType', 'filename', 'id', 'size', 'url']);
    assert.equal(meta.filename, 'report.pdf');
    assert.equal(meta.contentType, 'application/pdf');
    assert.equal(meta.size, pdf.length);
    const att = await t.api('GET', `/attachments/${meta.id}`);
    assert.equal(att.status, 200);
    assert.ok(att.body.url.startsWith(`${t.url}/attachments/${meta.id}/download?expires=`));
    const dl = await fetch(att.body.url);
    assert.equal(dl.status, 200);
    assert.equal(dl.headers.get('content-type'), 'application/pdf');
    assert.equal(dl.headers.get('x-content-type-options'), 'nosniff');
    assert.match(dl.headers.get('content-disposition')!, /^attachment; filename="report\.pdf"/);
    assert.ok(Buffer.from(await dl.arrayBuffer()).equals(pdf));
  });

  test('a reply naming a stored Message-ID joins its thread; others start new threads', async () => {
    const first = await transport.sendMail({ from: 'bob@example.org', to: 'alice@agents.test', subject: 'Project kickoff', text: 'first' });
    const firstMsg = (await t.api('GET', `/messages/${storedIds(first.response)[0]}`)).body;
    const reply = await transport.sendMail({
      from: 'carol@example.net',
      to: 'alice@agents.test',
      subject: 'Re: Project kickoff',
      text: 'second',
      inReplyTo: first.messageId,
      references: [first.messageId],
    });
    const replyMsg = (await t.api('GET', `/messages/${storedIds(reply.response)[0]}`)).body;
    assert.equal(replyMsg.threadId, firstMsg.threadId);
    assert.equal(replyMsg.inReplyTo, first.messageId);
    // References alone (no In-Reply-To) are enough.
    const third = await transport.sendMail({
      from: 'dave@example.net',
      to: 'alice@agents.test',
      subject: 'Re: Re: Project kickoff',
      text: 'third',
      references: `<unknown@else.example> ${reply.messageId}`,
    });
    assert.equal((await t.api('GET', `/messages/${storedIds(third.response)[0]}`)).body.threadId, firstMsg.threadId);
    // A reply to a Message-ID nobody stored starts its own thread.
    const orphan = await transport.sendMail({ from: 'bob@example.org', to: 'alice@agents.test', subject: 'Re: something else', text: 'x', inReplyTo: '<never-seen@example.org>' });
    const orphanMsg = (await t.api('GET', `/messages/${storedIds(orphan.response)[0]}`)).body;
    assert.notEqual(orphanMsg.threadId, firstMsg.threadId);

    const thread = await t.api('GET', `/threads/${firstMsg.threadId}`);
    assert.equal(thread.status, 200);
    assert.equal(thread.body.id, firstMsg.threadId);
    assert.equal(thread.body.inboxId, inboxId);
    assert.equal(thread.body.subject, 'Project kickoff');
    assert.equal(thread.body.messageCount, 3);
    assert.deepEqual(
      thread.body.messages.map((m: any) => m.bodyText),
      ['first', 'second', 'third'],
    );

    const list = await t.api('GET', `/inboxes/${inboxId}/threads?limit=2`);
    assert.equal(list.status, 200);
    assert.equal(list.body.limit, 2);
    assert.equal(list.body.offset, 0);
    assert.ok(list.body.total >= 2);
    // Most recent activity first: the orphan arrived last.
    assert.deepEqual(
      list.body.data.map((th: any) => th.id),
      [orphanMsg.threadId, firstMsg.threadId],
    );
    expectError(await t.api('GET', `/inboxes/${inboxId}/threads?limit=101`), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/threads/thr_nope'), 404, 'THREAD_NOT_FOUND');
    expectError(await t.api('GET', '/inboxes/inb_nope/threads'), 404, 'INBOX_NOT_FOUND');
  });

  test('a message to two inboxes is stored once in each', async () => {
    const bobInbox = (await t.api('POST', '/inboxes', { address: 'bob' })).body.id;
    const info = await transport.sendMail({ from: 'x@example.org', to: ['alice@agents.test', 'bob@agents.test'], subject: 'to both', text: 'both' });
    const ids = storedIds(info.response);
    assert.equal(ids.length, 2);
    const inboxes = await Promise.all(ids.map(async (id) => (await t.api('GET', `/messages/${id}`)).body.inboxId));
    assert.deepEqual(inboxes.sort(), [inboxId, bobInbox].sort());
  });
});

describe('recipient rules', () => {
  test('an unknown mailbox on our domain is 550 5.1.1', async () => {
    const err = await sendError({ from: 'bob@example.org', to: 'nobody@agents.test', subject: 'x', text: 'x' });
    assert.equal(err.responseCode, 550);
    assert.match(err.response, /^550 5\.1\.1 /);
  });

  test('a recipient on another domain is 550 5.7.1: never an open relay', async () => {
    const err = await sendError({ from: 'bob@example.org', to: 'victim@gmail.com', subject: 'x', text: 'x' });
    assert.equal(err.responseCode, 550);
    assert.match(err.response, /^550 5\.7\.1 relaying denied/);
  });

  test('a suspended inbox receives nothing (550)', async () => {
    const id = (await t.api('POST', '/inboxes', { address: 'paused' })).body.id;
    await suspendInbox(t.server.ctx, id);
    const err = await sendError({ from: 'bob@example.org', to: 'paused@agents.test', subject: 'x', text: 'x' });
    assert.equal(err.responseCode, 550);
    assert.match(err.response, /^550 5\.2\.1 /);
    assert.equal((await t.api('GET', `/inboxes/${id}/messages`)).body.total, 0);
  });

  test('routing tricks are refused: %-hack, ! paths, quoted local parts', async () => {
    const { client, greeting } = await SmtpClient.open(t.server.smtpPort);
    assert.equal(greeting.code, 220);
    assert.match(greeting.text, /mx\.test\.localhost/);
    assert.equal((await client.cmd('EHLO tester.example')).code, 250);
    assert.equal((await client.cmd('MAIL FROM:<bob@example.org>')).code, 250);
    for (const rcpt of ['victim%gmail.com@agents.test', 'gmail.com!victim@agents.test', '"alice"@agents.test', '"victim@gmail.com"@agents.test']) {
      const r = await client.cmd(`RCPT TO:<${rcpt}>`);
      assert.ok(r.code >= 500 && r.code < 600, `${rcpt} got ${r.code} ${r.text}`);
    }
    // A source route is ignored (RFC 5321 §4.1.2 / appendix C); only the mailbox counts, so
    // it can only ever reach a local inbox.
    assert.equal((await client.cmd('RCPT TO:<@relay.example:victim@gmail.com>')).code, 550);
    assert.equal((await client.cmd('RCPT TO:<@relay.example:alice@agents.test>')).code, 250);
    await client.quit();
  });

  test('EHLO advertises SIZE; a message over it is 552 and not stored', async () => {
    const { client } = await SmtpClient.open(t.server.smtpPort);
    const ehlo = await client.cmd('EHLO tester.example');
    assert.match(ehlo.text, new RegExp(`SIZE ${MAX_BYTES}`));
    assert.doesNotMatch(ehlo.text, /STARTTLS/);
    const before = (await t.api('GET', `/inboxes/${inboxId}/messages`)).body.total;
    const big = Buffer.from(`From: bob@example.org\r\nTo: alice@agents.test\r\nSubject: big\r\n\r\n${'y'.repeat(76)}\r\n`.repeat(1) + `${'z'.repeat(998)}\r\n`.repeat(400));
    const r = await client.send('bob@example.org', ['alice@agents.test'], big);
    assert.equal(r.code, 552);
    assert.match(r.text, /^5\.3\.4 /);
    // Declared in advance with the SIZE parameter: refused at MAIL FROM.
    const declared = await client.cmd(`MAIL FROM:<bob@example.org> SIZE=${MAX_BYTES + 1}`);
    assert.equal(declared.code, 552);
    assert.equal((await t.api('GET', `/inboxes/${inboxId}/messages`)).body.total, before);
    await client.quit();
  });

  test('recipients per message are limited (452 past smtp.max_recipients)', async () => {
    for (const a of ['r1', 'r2', 'r3', 'r4']) await t.api('POST', '/inboxes', { address: a });
    const { client } = await SmtpClient.open(t.server.smtpPort);
    await client.cmd('EHLO tester.example');
    await client.cmd('MAIL FROM:<bob@example.org>');
    for (const a of ['r1', 'r2', 'r3']) assert.equal((await client.cmd(`RCPT TO:<${a}@agents.test>`)).code, 250);
    assert.equal((await client.cmd('RCPT TO:<r4@agents.test>')).code, 452);
    await client.quit();
  });
});

describe('sender authentication', () => {
  test('SPF, DKIM and DMARC pass for a signed message from an authorised address', async () => {
    const dkimTransport = nodemailer.createTransport({
      host: '127.0.0.1',
      port: t.server.smtpPort,
      secure: false,
      ignoreTLS: true,
      dkim: { domainName: 'example.org', keySelector: 'sel1', privateKey: dkimKeys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString() },
    });
    const info = await dkimTransport.sendMail({ from: 'bob@example.org', to: 'alice@agents.test', subject: 'signed', text: 'signed body' });
    dkimTransport.close();
    const m = (await t.api('GET', `/messages/${storedIds(info.response)[0]}`)).body;
    assert.deepEqual(m.authentication, { spf: 'pass', dkim: 'pass', dmarc: 'pass' });
  });

  test('a spoofed sender is recorded as failing, and still accepted', async () => {
    const info = await transport.sendMail({ from: 'ceo@spoofed.example', to: 'alice@agents.test', subject: 'wire money', text: 'now' });
    const m = (await t.api('GET', `/messages/${storedIds(info.response)[0]}`)).body;
    assert.deepEqual(m.authentication, { spf: 'fail', dkim: 'none', dmarc: 'fail' });
  });

  test('a DNS outage does not block acceptance: temperror is recorded', async () => {
    dns.servfail('outage.example');
    dns.servfail('_dmarc.outage.example');
    const info = await transport.sendMail({ from: 'x@outage.example', to: 'alice@agents.test', subject: 'dns down', text: 'x' });
    const m = (await t.api('GET', `/messages/${storedIds(info.response)[0]}`)).body;
    assert.equal(m.authentication.spf, 'temperror');
    assert.equal(m.authentication.dmarc, 'temperror');
  });
});

describe('sender authentication lookups', () => {
  const asked = (q: string) => dns.queries.filter((x) => x.toLowerCase() === q).length;

  test('answers for a sending domain are reused, "no record" included; failed lookups are asked again', async () => {
    dns.set('repeat.example', [{ type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 -all' }]);
    for (const n of [1, 2]) {
      const info = await transport.sendMail({ from: `n${n}@repeat.example`, to: 'alice@agents.test', subject: `repeat ${n}`, text: 'x' });
      const m = (await t.api('GET', `/messages/${storedIds(info.response)[0]}`)).body;
      assert.deepEqual(m.authentication, { spf: 'pass', dkim: 'none', dmarc: 'none' });
    }
    assert.equal(asked('txt repeat.example'), 1, 'the SPF record was looked up once for both messages');
    assert.equal(asked('txt _dmarc.repeat.example'), 1, 'the missing DMARC record was looked up once');

    dns.servfail('flaky.example');
    for (const n of [1, 2]) {
      const info = await transport.sendMail({ from: `n${n}@flaky.example`, to: 'alice@agents.test', subject: `flaky ${n}`, text: 'x' });
      const m = (await t.api('GET', `/messages/${storedIds(info.response)[0]}`)).body;
      assert.equal(m.authentication.spf, 'temperror');
    }
    assert.ok(asked('txt flaky.example') >= 2, 'a SERVFAIL is not kept: the second message asked again');
  });
});

describe('malformed MIME corpus', () => {
  const files = readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.eml'))
    .sort();

  test('every sample is stored as received (250 + readable) or refused with 5xx, and the listener survives', async () => {
    assert.ok(files.length >= 10);
    const { client } = await SmtpClient.open(t.server.smtpPort);
    await client.cmd('EHLO tester.example');
    for (const f of files) {
      const raw = readFileSync(join(FIXTURES, f));
      const r = await client.send('bob@example.org', ['alice@agents.test'], raw);
      if (r.code === 250) {
        const [id] = storedIds(r.text);
        const got = await t.api('GET', `/messages/${id}`);
        assert.equal(got.status, 200, `${f}: stored message readable`);
        assert.equal(got.body.status, 'received');
        const src = await fetch(`${t.url}/messages/${id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
        assert.equal(src.status, 200);
        // The stored source is the trace fields (RFC 5321 §4.4) then what arrived: the bytes
        // sent, plus the CRLF that ends DATA's last line when the sample did not end with one.
        const sent = raw.subarray(-2).toString() === '\r\n' ? raw : Buffer.concat([raw, Buffer.from('\r\n')]);
        const source = Buffer.from(await src.arrayBuffer());
        assert.match(
          source.subarray(0, 300).toString('latin1'),
          /^Return-Path: <bob@example\.org>\r\nReceived: from tester\.example \(\[127\.0\.0\.1\]\)\r\n\tby mx\.test\.localhost \(mailroom\) with ESMTP id msg_\w+;\r\n\t\w{3}, \d{2} \w{3} \d{4} [\d:]{8} \+0000\r\n/,
        );
        assert.ok(source.subarray(source.length - sent.length).equals(sent), `${f}: raw source kept`);
        assert.equal(got.body.size, source.length);
        for (const a of got.body.attachments) {
          assert.ok(!a.filename.includes('/') && !a.filename.includes('\\') && !a.filename.includes('\0'), `${f}: filename ${a.filename}`);
        }
      } else {
        assert.ok(r.code >= 500 && r.code < 600, `${f}: got ${r.code} ${r.text}`);
      }
    }
    const empty = await client.send('bob@example.org', ['alice@agents.test'], readFileSync(join(FIXTURES, 'empty-lines-only.eml')));
    assert.equal(empty.code, 554);
    // Still serving on the same connection.
    const ok = await client.send('bob@example.org', ['alice@agents.test'], Buffer.from('Subject: after corpus\r\n\r\nfine\r\n'));
    assert.equal(ok.code, 250);
    await client.quit();
  });

  test('a client that drops mid-DATA leaves nothing stored', async () => {
    const before = (await t.api('GET', `/inboxes/${inboxId}/messages`)).body.total;
    const { client } = await SmtpClient.open(t.server.smtpPort);
    await client.cmd('EHLO tester.example');
    await client.cmd('MAIL FROM:<bob@example.org>');
    await client.cmd('RCPT TO:<alice@agents.test>');
    assert.equal((await client.cmd('DATA')).code, 354);
    client.socket.write('Subject: cut\r\n\r\nhalf a messa');
    client.socket.destroy();
    await client.closed;
    // A new session still works, and nothing from the cut one was stored.
    const info = await transport.sendMail({ from: 'bob@example.org', to: 'alice@agents.test', subject: 'after cut', text: 'x' });
    assert.ok(storedIds(info.response).length === 1);
    const list = (await t.api('GET', `/inboxes/${inboxId}/messages?limit=100`)).body;
    assert.equal(list.total, before + 1);
    assert.ok(!list.data.some((m: any) => m.subject === 'cut'));
  });
});

describe('connection limits, STARTTLS', () => {
  test('connections beyond smtp.max_connections get 421; idle clients are disconnected', async () => {
    const s = await startTestServer({ smtp: { max_connections: 1, idle_timeout: '300ms' } });
    try {
      const first = await SmtpClient.open(s.server.smtpPort);
      assert.equal(first.greeting.code, 220);
      const second = await SmtpClient.open(s.server.smtpPort);
      assert.equal(second.greeting.code, 421);
      await second.client.closed;
      // Idle past smtp.idle_timeout: the server closes the first one.
      await first.client.closed;
    } finally {
      await s.close();
    }
  });

  test('STARTTLS is offered with tls_cert/tls_key, and a replaced certificate is used without a restart', { skip: peerSkip(toolMissing('openssl', ['version'], 'openssl')) }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-tls-'));
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    const makeCert = (cn: string) => {
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key + '.new', '-out', cert + '.new', '-days', '1', '-subj', `/CN=${cn}`],
        { stdio: 'ignore' },
      );
      writeFileSync(key, readFileSync(key + '.new'));
      writeFileSync(cert, readFileSync(cert + '.new'));
    };
    makeCert('first.test');
    const s = await startTestServer({ smtp: { tls_cert: cert, tls_key: key } });
    const peerCn = async () => {
      const { client } = await SmtpClient.open(s.server.smtpPort);
      assert.match((await client.cmd('EHLO tester.example')).text, /STARTTLS/);
      assert.equal((await client.cmd('STARTTLS')).code, 220);
      const sock = tlsConnect({ socket: client.socket, rejectUnauthorized: false, servername: 'mx.test.localhost' });
      await new Promise<void>((resolve, reject) => sock.once('secureConnect', resolve).once('error', reject));
      const cn = sock.getPeerCertificate().subject.CN;
      sock.destroy();
      return cn;
    };
    try {
      assert.equal(await peerCn(), 'first.test');
      makeCert('second.test');
      assert.equal(await peerCn(), 'second.test');
      // nodemailer with required TLS delivers over it.
      const inbox = (await s.api('POST', '/inboxes', { address: 'tls' })).body.id;
      const tr = nodemailer.createTransport({ host: '127.0.0.1', port: s.server.smtpPort, secure: false, requireTLS: true, tls: { rejectUnauthorized: false } });
      await tr.sendMail({ from: 'bob@example.org', to: 'tls@agents.test', subject: 'over tls', text: 'x' });
      tr.close();
      const list = (await s.api('GET', `/inboxes/${inbox}/messages`)).body;
      assert.equal(list.total, 1);
      const raw = await fetch(`${s.url}/messages/${list.data[0].id}/raw`, { headers: { authorization: `Bearer ${s.key}` } });
      assert.match(await raw.text(), /^Return-Path: <bob@example\.org>\r\nReceived: from .*\r\n\tby mx\.test\.localhost \(mailroom\) with ESMTPS id /);
    } finally {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('swaks', () => {
  test('swaks --attach delivers a file that downloads byte-identical', { skip: peerSkip(toolMissing('swaks', ['--version'], 'swaks')) }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-swaks-'));
    try {
      const file = join(dir, 'file.pdf');
      const bytes = Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(20_000)]);
      writeFileSync(file, bytes);
      // Asynchronously: the server under test runs in this process.
      const r = await run('swaks', [
        '--to',
        'alice@agents.test',
        '--from',
        'bob@example.org',
        '--server',
        `127.0.0.1:${t.server.smtpPort}`,
        '--attach',
        `@${file}`,
        '--attach-type',
        'application/pdf',
        '--attach-name',
        'file.pdf',
      ]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const id = /stored as (msg_\w+)/.exec(r.stdout)![1];
      const m = (await t.api('GET', `/messages/${id}`)).body;
      const att = m.attachments.find((a: any) => a.filename === 'file.pdf');
      const dl = await fetch((await t.api('GET', `/attachments/${att.id}`)).body.url);
      assert.ok(Buffer.from(await dl.arrayBuffer()).equals(bytes));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test('no stray temporary files are left in the data directory', () => {
  const walk = (d: string): string[] => (existsSync(d) ? readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [e.name])) : []);
  assert.deepEqual(
    walk(t.dataDir).filter((n) => n.endsWith('.tmp')),
    [],
  );
});
