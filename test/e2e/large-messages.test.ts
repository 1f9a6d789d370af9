// Messages past LARGE_MESSAGE_BYTES (src/domain/inbound/inbound-large.ts): SMTP DATA goes to a staged
// file and the message is parsed from disk in bounded memory. The guarantees of the in-memory
// path hold: the stored source is the trace fields and the bytes sent, exactly; attachments
// download byte-identical and are stored once by content; a redelivery stores nothing new; a
// DKIM signature over the whole body is checked; too large is 552 and blank is 554; and no
// staged file is left behind in any of these cases.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { LARGE_MESSAGE_BYTES } from '../../src/domain/inbound/inbound-large.ts';
import { renderMetrics } from '../../src/metrics.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { storedBlobs } from '../support/blobs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { until } from '../support/wait.ts';

let t: TestServer;
let dns: TestDns;
const dkimKeys = generateKeyPairSync('rsa', { modulusLength: 1024 });
const MAX = 12 * 1024 * 1024;

before(async () => {
  dns = await startTestDns();
  dns.set('example.org', [{ type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 -all' }]);
  dns.set('sel1._domainkey.example.org', [{ type: 'TXT', value: `v=DKIM1; k=rsa; p=${dkimKeys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}` }]);
  t = await startTestServer({ smtp: { max_message_bytes: MAX }, dns: { servers: [dns.server] } });
  for (const address of ['big', 'big2']) assert.equal((await t.api('POST', '/inboxes', { address })).status, 201);
});

after(async () => {
  await t?.close();
  await dns?.close();
});

/** Files under a data_dir folder, recursively (relative paths). */
const filesUnder = (dir: string): string[] => {
  try {
    return readdirSync(join(t.dataDir, dir), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name));
  } catch {
    return [];
  }
};

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const storedIds = (response: string) => /stored as (.+)$/.exec(response)![1].split(' ');
const compose = (opts: ConstructorParameters<typeof MailComposer>[0]): Promise<Buffer> => new MailComposer({ newline: 'windows', ...opts }).compile().build();

async function send(raw: Buffer, to: string[], opts: { dkim?: boolean } = {}): Promise<string> {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port: t.server.smtpPort,
    ignoreTLS: true,
    ...(opts.dkim ? { dkim: { domainName: 'example.org', keySelector: 'sel1', privateKey: dkimKeys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString() } } : {}),
  });
  try {
    return (await transport.sendMail({ envelope: { from: 'bob@example.org', to }, raw })).response;
  } finally {
    transport.close();
  }
}

describe('a message larger than LARGE_MESSAGE_BYTES', () => {
  const big = randomBytes(3 * 1024 * 1024 + 123);
  const small = randomBytes(200 * 1024);
  let raw: Buffer;
  before(async () => {
    raw = await compose({
      from: 'bob@example.org',
      to: 'big@agents.test, big2@agents.test',
      subject: 'large one',
      messageId: '<large-1@example.org>',
      text: 'see the files',
      html: '<p>see the <b>files</b></p>',
      attachments: [
        { filename: 'big.bin', content: big, contentType: 'application/octet-stream' },
        { filename: 'small.bin', content: small, contentType: 'application/octet-stream' },
        { filename: 'big-again.bin', content: big, contentType: 'application/octet-stream' },
      ],
    });
  });

  test('is stored for each recipient exactly as sent, its attachments byte-identical and stored once', async () => {
    assert.ok(raw.length > LARGE_MESSAGE_BYTES * 4);
    const blobsBefore = (await storedBlobs(t.server.ctx, 'attachments')).length;
    const response = await send(raw, ['big@agents.test', 'big2@agents.test']);
    const ids = storedIds(response);
    assert.equal(ids.length, 2);
    for (const id of ids) {
      const m = (await t.api('GET', `/messages/${id}`)).body;
      assert.equal(m.subject, 'large one');
      assert.equal(m.bodyText, 'see the files');
      assert.match(m.bodyHtml, /<b>files<\/b>/);
      assert.equal(m.size > raw.length, true);
      assert.deepEqual(
        m.attachments.map((a: { filename: string; size: number }) => [a.filename, a.size]),
        [
          ['big.bin', big.length],
          ['small.bin', small.length],
          ['big-again.bin', big.length],
        ],
      );
      for (const [i, expected] of [big, small, big].entries()) {
        const att = (await t.api('GET', `/attachments/${m.attachments[i].id}`)).body;
        assert.equal(sha(Buffer.from(await (await fetch(att.url)).arrayBuffer())), sha(expected), m.attachments[i].filename);
      }
      // The stored source: Return-Path and Received naming the first copy, then the bytes sent.
      const stored = Buffer.from(await (await fetch(`${t.url}/messages/${id}/raw`, { headers: { authorization: `Bearer ${t.key}` } })).arrayBuffer());
      const trace = new RegExp(
        `^Return-Path: <bob@example\\.org>\\r\\nReceived: from \\S+ \\(\\[127\\.0\\.0\\.1\\]\\)\\r\\n\\tby mx\\.test\\.localhost \\(mailroom\\) with ESMTP id ${ids[0]};\\r\\n\\t[^\\r]+\\r\\n`,
      ).exec(stored.subarray(0, 400).toString('latin1'));
      assert.ok(trace, stored.subarray(0, 400).toString('latin1'));
      assert.equal(sha(stored.subarray(trace[0].length)), sha(raw));
      assert.equal(m.size, stored.length);
    }
    // Two distinct attachment contents, each one file, whatever the number of copies.
    assert.equal((await storedBlobs(t.server.ctx, 'attachments')).length - blobsBefore, 2);
    assert.deepEqual(filesUnder('tmp'), []);
  });

  test('sent again (a lost 250), it is recognised: the same ids, nothing new stored', async () => {
    const listed = (await t.api('GET', '/messages?limit=100')).body.data.length;
    const raws = (await storedBlobs(t.server.ctx, 'raw')).length;
    const first = storedIds(await send(raw, ['big@agents.test']));
    const again = storedIds(await send(raw, ['big@agents.test']));
    assert.deepEqual(again, first);
    assert.equal((await t.api('GET', '/messages?limit=100')).body.data.length, listed);
    assert.equal((await storedBlobs(t.server.ctx, 'raw')).length, raws);
    assert.deepEqual(filesUnder('tmp'), []);
  });

  test('is parsed and authenticated on an analysis worker, from its file', async () => {
    const analysed = async (where: string) => Number(new RegExp(`^mailroom_inbound_analysed_total\\{where="${where}"\\} (\\d+)`, 'm').exec(await renderMetrics(t.server.ctx))?.[1] ?? 0);
    const before = { worker: await analysed('worker'), main: await analysed('main') };
    const message = await compose({ from: 'bob@example.org', to: 'big@agents.test', subject: 'on a worker', text: 'read from disk', attachments: [{ filename: 'big.bin', content: big }] });
    const [id] = storedIds(await send(message, ['big@agents.test']));
    const m = (await t.api('GET', `/messages/${id}`)).body;
    assert.equal(m.bodyText, 'read from disk');
    assert.deepEqual(
      m.attachments.map((a: { size: number }) => a.size),
      [big.length],
    );
    assert.deepEqual(m.authentication, { spf: 'pass', dkim: 'none', dmarc: 'none' });
    assert.deepEqual({ worker: await analysed('worker'), main: await analysed('main') }, { worker: before.worker + 1, main: before.main });
    assert.deepEqual(filesUnder('tmp'), []);
  });

  test('a DKIM signature over the whole large body is verified (read from disk)', async () => {
    const signed = await compose({
      from: 'bob@example.org',
      to: 'big@agents.test',
      subject: 'signed large',
      text:
        'x'.repeat(76) +
        '\r\n' +
        randomBytes(2 * 1024 * 1024)
          .toString('base64')
          .replace(/.{76}/g, '$&\r\n'),
    });
    const [id] = storedIds(await send(signed, ['big@agents.test'], { dkim: true }));
    const m = (await t.api('GET', `/messages/${id}`)).body;
    assert.deepEqual(m.authentication, { spf: 'pass', dkim: 'pass', dmarc: 'none' });
  });

  test('over smtp.max_message_bytes: 552 5.3.4, and the staged part is gone', async () => {
    const { client } = await SmtpClient.open(t.server.smtpPort);
    await client.cmd('EHLO tester.example');
    const r = await client.send('bob@example.org', ['big@agents.test'], Buffer.from(`Subject: too big\r\n\r\n${'y'.repeat(76)}\r\n`.repeat(Math.ceil(MAX / 78) + 10)));
    assert.equal(r.code, 552);
    assert.match(r.text, /^5\.3\.4 /);
    await client.quit();
    assert.deepEqual(filesUnder('tmp'), []);
  });

  test('a connection lost in the middle of DATA leaves no staged file', async () => {
    const { client } = await SmtpClient.open(t.server.smtpPort);
    await client.cmd('EHLO tester.example');
    await client.cmd('MAIL FROM:<bob@example.org>');
    await client.cmd('RCPT TO:<big@agents.test>');
    assert.equal((await client.cmd('DATA')).code, 354);
    client.socket.write(`Subject: cut off\r\n\r\n${`${'z'.repeat(76)}\r\n`.repeat(Math.ceil((3 * LARGE_MESSAGE_BYTES) / 78))}`);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(filesUnder('tmp').length, 1, 'the message was being staged');
    // A connection lost (RST): a client that only half-closes is held to smtp.idle_timeout,
    // since its last bytes may still be on their way through the parser (api.md).
    client.socket.resetAndDestroy();
    const deadline = Date.now() + 5000;
    while (filesUnder('tmp').length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(filesUnder('tmp'), []);
  });

  test('sent through the API from one inbox to another of this server: delivered from a staged copy of its source, byte-identical, nothing left staged', async () => {
    const inboxes = (await t.api('GET', '/inboxes?limit=100')).body.data as Array<{ id: string; address: string }>;
    const [from, to] = ['big@agents.test', 'big2@agents.test'].map((a) => inboxes.find((i) => i.address === a)!);
    const file = randomBytes(2 * 1024 * 1024 + 5);
    const form = new FormData();
    form.append('file', new Blob([file], { type: 'application/octet-stream' }), 'local.bin');
    const upload = await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: form });
    assert.equal(upload.status, 201);
    const attachmentId = ((await upload.json()) as { id: string }).id;
    const sent = await t.api('POST', `/inboxes/${from.id}/messages`, { to: [to.address], subject: 'large local', bodyText: 'here', attachmentIds: [attachmentId] });
    assert.equal(sent.status, 202, sent.text);
    const copy = await until('the inbound copy', async () => {
      const list = (await t.api('GET', `/inboxes/${to.id}/messages?limit=100`)).body.data as Array<{ id: string; subject: string; direction: string }>;
      return list.find((m) => m.subject === 'large local' && m.direction === 'inbound');
    });
    const m = (await t.api('GET', `/messages/${copy.id}`)).body;
    const att = (await t.api('GET', `/attachments/${m.attachments[0].id}`)).body;
    assert.equal(sha(Buffer.from(await (await fetch(att.url)).arrayBuffer())), sha(file));
    const source = async (id: string) => Buffer.from(await (await fetch(`${t.url}/messages/${id}/raw`, { headers: { authorization: `Bearer ${t.key}` } })).arrayBuffer());
    // Local delivery adds no trace fields: the inbox's source is the sent one, byte for byte.
    assert.equal(sha(await source(copy.id)), sha(await source(sent.body.id)));
    assert.deepEqual(filesUnder('tmp'), []);
  });

  test('only whitespace: 554 5.6.0 like an empty message, nothing stored or left', async () => {
    const { client } = await SmtpClient.open(t.server.smtpPort);
    await client.cmd('EHLO tester.example');
    const r = await client.send('bob@example.org', ['big@agents.test'], Buffer.from(' \r\n'.repeat(LARGE_MESSAGE_BYTES / 2)));
    assert.equal(r.code, 554);
    assert.match(r.text, /^5\.6\.0 empty message/);
    await client.quit();
    assert.deepEqual(filesUnder('tmp'), []);
  });
});
