// Received mail is parsed and authenticated on worker threads (src/domain/inbound/analysis.ts):
// what is stored must be exactly what the main thread stores with smtp.analysis_workers = 0, and
// a thread that dies mid-message must lose nothing (its message is analysed again on another
// thread; test/e2e/failure-paths.test.ts covers a message that kills two, and the deadline).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import nodemailer, { type SendMailOptions, type Transporter } from 'nodemailer';
import { analysisWorkerCount, killAnalysisWorkers } from '../../src/domain/inbound/analysis.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { smtpTransport } from '../support/mail.ts';

const dkimKeys = generateKeyPairSync('rsa', { modulusLength: 1024 });
let dns: TestDns;
const servers: Record<'workers' | 'main', { t: TestServer; transport: Transporter; signed: Transporter; inboxId: string }> = {} as never;

before(async () => {
  dns = await startTestDns();
  dns.set('example.org', [{ type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 -all' }]);
  dns.set('sel1._domainkey.example.org', [{ type: 'TXT', value: `v=DKIM1; k=rsa; p=${dkimKeys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}` }]);
  dns.set('_dmarc.example.org', [{ type: 'TXT', value: 'v=DMARC1; p=reject' }]);
  dns.set('spoofed.example', [{ type: 'TXT', value: 'v=spf1 ip4:192.0.2.1 -all' }]);
  dns.set('_dmarc.spoofed.example', [{ type: 'TXT', value: 'v=DMARC1; p=reject' }]);
  dns.blackhole('silent.example');
  dns.blackhole('_dmarc.silent.example');
  for (const [name, workers] of [
    ['workers', 2],
    ['main', 0],
  ] as const) {
    const t = await startTestServer({ smtp: { analysis_workers: workers }, dns: { servers: [dns.server], timeout: '1s' } });
    const inboxId = (await t.api('POST', '/inboxes', { address: 'alice' })).body.id;
    const signed = nodemailer.createTransport({
      host: '127.0.0.1',
      port: t.server.smtpPort,
      secure: false,
      ignoreTLS: true,
      dkim: { domainName: 'example.org', keySelector: 'sel1', privateKey: dkimKeys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString() },
    });
    servers[name] = { t, transport: smtpTransport(t.server.smtpPort), signed, inboxId };
  }
});

after(async () => {
  for (const s of Object.values(servers)) {
    s.transport.close();
    s.signed.close();
    await s.t.close();
  }
  await dns?.close();
});

const storedId = (response: string | undefined) => /stored as (\S+)/.exec(response ?? '')?.[1] ?? assert.fail(`no stored id in ${response}`);

/** Sends `mail` to both servers and answers both stored messages, attachments' bytes included. */
async function deliverToBoth(mail: SendMailOptions, signed = false) {
  const out = [];
  for (const name of ['workers', 'main'] as const) {
    const s = servers[name];
    const info = await (signed ? s.signed : s.transport).sendMail({ ...mail, to: 'alice@agents.test' });
    const m = (await s.t.api('GET', `/messages/${storedId(info.response)}`)).body;
    const files = await Promise.all(m.attachments.map(async (a: { url: string }) => Buffer.from(await (await fetch(a.url)).arrayBuffer()).toString('base64')));
    out.push({ m, files });
  }
  return out;
}

/** The fields that come from parsing and authentication (ids and times differ between servers). */
const analysed = (m: Record<string, any>) => ({
  subject: m.subject,
  fromAddress: m.fromAddress,
  fromName: m.fromName,
  toAddresses: m.toAddresses,
  ccAddresses: m.ccAddresses,
  bodyText: m.bodyText,
  bodyHtml: m.bodyHtml,
  messageIdHeader: m.messageIdHeader,
  inReplyTo: m.inReplyTo,
  size: m.size,
  authentication: m.authentication,
  attachments: m.attachments.map((a: Record<string, unknown>) => [a.filename, a.contentType, a.size]),
});

describe('analysis on worker threads', () => {
  test('a signed message with attachments is stored as the main thread stores it, and passes SPF, DKIM and DMARC', async () => {
    const [w, m] = await deliverToBoth(
      {
        from: 'Bob Example <bob@example.org>',
        cc: 'carol@example.net',
        subject: 'Über résumé ✓',
        messageId: '<signed-1@example.org>',
        text: 'plain body\nsecond line',
        html: '<p>plain <b>body</b></p>',
        inReplyTo: '<parent@example.org>',
        references: ['<root@example.org>', '<parent@example.org>'],
        attachments: [
          { filename: 'data.bin', content: Buffer.from([0, 1, 2, 255, 254]) },
          { filename: 'notes.txt', content: 'some notes' },
        ],
      },
      true,
    );
    assert.ok(analysisWorkerCount() >= 1, 'a worker thread analysed the first message');
    assert.deepEqual(analysed(w.m), analysed(m.m));
    assert.deepEqual(w.files, m.files);
    assert.deepEqual(w.m.authentication, { spf: 'pass', dkim: 'pass', dmarc: 'pass' });
    assert.equal(w.m.subject, 'Über résumé ✓');
    assert.equal(w.m.bodyText, 'plain body\nsecond line');
    assert.equal(w.m.bodyHtml, '<p>plain <b>body</b></p>');
    assert.equal(w.m.fromName, 'Bob Example');
    assert.deepEqual(w.m.ccAddresses, ['carol@example.net']);
    assert.equal(w.m.inReplyTo, '<parent@example.org>');
    assert.equal(Buffer.from(w.files[0], 'base64').toString('hex'), '000102fffe');
  });

  test('a spoofed sender fails the same way on both', async () => {
    const [w, m] = await deliverToBoth({ from: 'ceo@spoofed.example', subject: 'wire money', text: 'now', messageId: '<spoof-1@spoofed.example>' });
    assert.deepEqual(analysed(w.m), analysed(m.m));
    assert.deepEqual(w.m.authentication, { spf: 'fail', dkim: 'none', dmarc: 'fail' });
  });

  test('malformed MIME is kept the same way on both', async () => {
    const raw =
      'From: x@example.org\r\nMessage-ID: <broken-1@example.org>\r\nSubject: broken\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nfirst part, never closed\r\n';
    const [w, m] = await deliverToBoth({ envelope: { from: 'x@example.org', to: 'alice@agents.test' }, raw });
    assert.deepEqual(analysed(w.m), analysed(m.m));
    assert.equal(w.m.subject, 'broken');
    assert.match(w.m.bodyText ?? '', /first part, never closed/);
  });

  test('a worker thread that dies mid-message loses nothing: the message is analysed again on a fresh thread and stored once', async () => {
    const s = servers.workers;
    // Its SPF lookup is never answered, so the message is still being analysed a moment later.
    const sending = s.transport.sendMail({ from: 'x@silent.example', to: 'alice@agents.test', subject: 'thread lost', text: 'still here' });
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(analysisWorkerCount() >= 1);
    await killAnalysisWorkers();
    const info = await sending;
    const m = (await s.t.api('GET', `/messages/${storedId(info.response)}`)).body;
    assert.equal(m.bodyText, 'still here');
    assert.equal(m.authentication.spf, 'temperror', 'the lookup that got no answer is a temporary error, as on the first thread');
    const list = (await s.t.api('GET', `/inboxes/${s.inboxId}/messages?limit=100`)).body;
    assert.equal(list.data.filter((x: { subject: string }) => x.subject === 'thread lost').length, 1);

    // The next message starts a fresh thread.
    const [w] = await deliverToBoth({ from: 'bob@example.org', subject: 'after the loss', text: 'x' });
    assert.ok(analysisWorkerCount() >= 1);
    assert.equal(w.m.authentication.spf, 'pass');
  });
});
