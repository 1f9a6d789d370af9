// One-click unsubscribe (RFC 8058) end to end: a send with `listUnsubscribe: true` reaches a
// capturing MX with List-Unsubscribe (an HTTPS URL and a mailto) and List-Unsubscribe-Post, both
// in the DKIM signature's h=; a POST to the URL (no API key) and a mail to the address each put
// their recipient on the suppression list with reason `unsubscribe` and an audit entry; forged
// tokens are 404 NOT_FOUND (HTTP) and 550 5.1.1 (SMTP); a later send to the address is refused.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Clock } from '../../src/context.ts';
import type { JobRunner } from '../../src/jobs/runner.ts';
import { deliverMail, smtpTransport } from '../support/mail.ts';
import { until } from '../support/wait.ts';
import { startOutboundRig, type OutboundRig } from '../support/outbound.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { expectError, readResponse, type TestServer } from '../support/server.ts';

let rig: OutboundRig;
let t: TestServer;
let inbox: { id: string; address: string };
/** The server's clock runs this far ahead of the real one (a scheduled send is made due by moving it). */
let offset = 0;
const clock: Clock = { now: () => new Date(Date.now() + offset) };

before(async () => {
  rig = await startOutboundRig();
  t = await rig.start({ clock });
  inbox = (await t.api('POST', '/inboxes', { address: 'news' })).body;
});

after(async () => {
  await t?.close();
  await rig?.close();
});

/** Sends with listUnsubscribe to `to` and returns the List-Unsubscribe URL and mailto address the MX received. */
async function sendListMail(to: string): Promise<{ url: string; mailto: string; headers: string }> {
  const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: [to], subject: 'Weekly news', bodyText: 'hello', listUnsubscribe: true });
  assert.equal(res.status, 202, res.text);
  return headersOf(res.body.messageIdHeader);
}

/** The List-Unsubscribe URL and mailto address of the message the MX received with this Message-ID. */
async function headersOf(messageIdHeader: string): Promise<{ url: string; mailto: string; headers: string }> {
  const mail = await rig.captured(messageIdHeader);
  const list = (mail.headerLines.find((h) => h.key === 'list-unsubscribe')?.line ?? '').replace(/\r?\n[ \t]+/g, ' ');
  const url = /<(https?:\/\/[^>]+)>/.exec(list)?.[1];
  const mailto = /<mailto:([^>]+)>/.exec(list)?.[1];
  assert.ok(url && mailto, `List-Unsubscribe: ${list}\n${mail.headerLines.map((h) => h.line).join('\n')}`);
  const headers = mail.headerLines.map((h) => h.line).join('\n');
  return { url, mailto, headers };
}

const entryOf = async (address: string) => (await t.api('GET', `/suppressions?address=${encodeURIComponent(address)}`)).body.data[0];

describe('one-click unsubscribe', () => {
  test('the headers are added, DKIM-signed, and a POST to the URL suppresses the recipient (reason unsubscribe, audited)', async () => {
    const { url, mailto, headers } = await sendListMail('reader@remote.test');
    assert.match(headers, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
    assert.ok(url.startsWith(`${t.url}/unsubscribe/`), url);
    assert.match(mailto, /^unsubscribe\+[0-9a-z]+\.[0-9a-v]{16}@/);
    const dkim = /^DKIM-Signature:[\s\S]*?(?=^\S)/m.exec(headers + '\nX')?.[0] ?? '';
    const h = /\bh=([^;]+)/.exec(dkim.replace(/\s+/g, ''))?.[1]?.toLowerCase().split(':') ?? [];
    assert.ok(h.includes('list-unsubscribe') && h.includes('list-unsubscribe-post'), `h=${h.join(':')}`);

    // What a mailbox provider does: a POST with the RFC 8058 body, no API key.
    const post = () => fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' }).then(readResponse);
    const res = await post();
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { address: 'reader@remote.test', suppressed: true });
    const entry = await entryOf('reader@remote.test');
    assert.equal(entry.reason, 'unsubscribe');
    assert.match(entry.messageId, /^msg_/);
    // Again: still 200, one entry, one audit entry.
    assert.equal((await post()).status, 200);
    const audit = (await t.api('GET', '/audit?action=suppression.added')).body.data.filter((e: any) => e.target === 'reader@remote.test');
    assert.equal(audit.length, 1);
    assert.deepEqual([audit[0].actor, audit[0].detail.reason, audit[0].detail.via], [{ type: 'system' }, 'unsubscribe', 'https']);

    // A later send to the address is refused.
    expectError(await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['reader@remote.test'], subject: 'again', bodyText: 'x' }), 422, 'RECIPIENTS_SUPPRESSED');
  });

  test('a forged or malformed token is 404 NOT_FOUND and suppresses nothing', async () => {
    const { url } = await sendListMail('other@remote.test');
    const forged = url.replace(/[0-9a-v]$/, (c) => (c === '0' ? '1' : '0'));
    for (const target of [forged, `${t.url}/unsubscribe/nothing`, `${t.url}/unsubscribe/${'a'.repeat(300)}`]) {
      const res = await fetch(target, { method: 'POST', body: 'List-Unsubscribe=One-Click' }).then(readResponse);
      expectError(res as never, 404, 'NOT_FOUND');
    }
    assert.equal(await entryOf('other@remote.test'), undefined);
  });

  test('a mail to the mailto address suppresses the recipient; a forged address is 550 5.1.1 at RCPT', async () => {
    const { mailto } = await sendListMail('mailer@remote.test');
    await deliverMail(t.server.smtpPort, { from: 'mailer@remote.test', to: mailto, subject: 'unsubscribe', text: 'unsubscribe' });
    const entry = await entryOf('mailer@remote.test');
    assert.equal(entry?.reason, 'unsubscribe');
    const audit = (await t.api('GET', '/audit?action=suppression.added')).body.data.find((e: any) => e.target === 'mailer@remote.test');
    assert.equal(audit.detail.via, 'mail');
    // Stored in no inbox.
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages`)).body.data.filter((m: any) => m.direction === 'inbound').length, 0);

    const forged = mailto.replace(/[0-9a-v]@/, (c) => (c[0] === '0' ? '1@' : '0@'));
    const { client } = await SmtpClient.open(t.server.smtpPort);
    try {
      await client.cmd('EHLO test.example');
      assert.equal((await client.cmd('MAIL FROM:<x@remote.test>')).code, 250);
      const reply = await client.cmd(`RCPT TO:<${forged}>`);
      assert.equal(reply.code, 550, reply.text);
      assert.match(reply.text, /5\.1\.1/);
    } finally {
      await client.quit();
    }
  });

  test('a reply, a forward, a draft send and a scheduled send (at its time) carry the headers too; a send without the flag has none', async () => {
    const original = await deliverMail(t.server.smtpPort, { from: 'writer@remote.test', to: inbox.address, subject: 'original', text: 'to pass on' });
    const forward = await t.api('POST', `/messages/${original}/forward`, { to: ['fwd@remote.test'], bodyText: 'fyi', listUnsubscribe: true });
    assert.equal(forward.status, 202, forward.text);
    assert.match((await headersOf(forward.body.messageIdHeader)).url, /\/unsubscribe\//);
    const reply = await t.api('POST', `/messages/${original}/reply`, { bodyText: 'thanks', listUnsubscribe: true });
    assert.equal(reply.status, 202, reply.text);
    assert.match((await headersOf(reply.body.messageIdHeader)).mailto, /^unsubscribe\+/);

    const draft = (await t.api('POST', `/inboxes/${inbox.id}/drafts`, { to: ['draft@remote.test'], subject: 'drafted', bodyText: 'x' })).body;
    const sent = await t.api('POST', `/drafts/${draft.id}/send`, { listUnsubscribe: true });
    assert.equal(sent.status, 202, sent.text);
    assert.match((await headersOf(sent.body.messageIdHeader)).mailto, /^unsubscribe\+/);

    const scheduled = await t.api('POST', `/inboxes/${inbox.id}/messages`, {
      to: ['later@remote.test'],
      subject: 'later',
      bodyText: 'x',
      listUnsubscribe: true,
      sendAt: new Date(clock.now().getTime() + 60_000).toISOString(),
    });
    assert.equal(scheduled.status, 202, scheduled.text);
    offset += 120_000;
    (t.server.services.find((s) => s.name === 'jobs') as unknown as JobRunner).wake();
    const { url } = await headersOf(scheduled.body.messageIdHeader);
    assert.equal((await fetch(url, { method: 'POST', body: 'List-Unsubscribe=One-Click' }).then(readResponse)).body.address, 'later@remote.test');

    const plain = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['plain@remote.test', 'plain2@remote.test'], subject: 'plain', bodyText: 'x' });
    assert.equal(plain.status, 202, plain.text);
    const mail = await rig.captured(plain.body.messageIdHeader);
    assert.equal(mail.headers.get('list-unsubscribe'), undefined);
    assert.equal(mail.headers.get('list-unsubscribe-post'), undefined);
  });

  test('an unsubscribe mail answered 250 from the spool (a busy server) suppresses when it is processed', async () => {
    // Another server on the same rig that spools every message (smtp.inline_processing = 0).
    const busy = await rig.start({ overrides: { smtp: { listen: '127.0.0.1:0', inline_processing: 0 } } });
    try {
      const sender = (await busy.api('POST', '/inboxes', { address: 'busy' })).body;
      const res = await busy.api('POST', `/inboxes/${sender.id}/messages`, { to: ['spooled@remote.test'], subject: 'news', bodyText: 'x', listUnsubscribe: true });
      assert.equal(res.status, 202, res.text);
      const mail = await rig.captured(res.body.messageIdHeader);
      const mailto = /<mailto:([^>]+)>/.exec((mail.headerLines.find((h) => h.key === 'list-unsubscribe')?.line ?? '').replace(/\r?\n[ \t]+/g, ' '))![1];
      const transport = smtpTransport(busy.server.smtpPort);
      try {
        const info = await transport.sendMail({ from: 'spooled@remote.test', to: mailto, subject: 'unsubscribe', text: 'unsubscribe' });
        assert.match(info.response, /queued as/);
      } finally {
        transport.close();
      }
      const entry = await until('the spooled unsubscribe', async () => (await busy.api('GET', '/suppressions?address=spooled%40remote.test')).body.data[0]);
      assert.equal(entry.reason, 'unsubscribe');
    } finally {
      await busy.close();
    }
  });

  test('listUnsubscribe needs exactly one recipient: 400 VALIDATION_ERROR naming the field, nothing sent', async () => {
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['a@remote.test'], cc: ['b@remote.test'], subject: 's', bodyText: 'x', listUnsubscribe: true });
    expectError(res, 400, 'VALIDATION_ERROR');
    assert.match(res.body.error.message, /listUnsubscribe/);
    expectError(await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['a@remote.test'], subject: 's', bodyText: 'x', listUnsubscribe: 'yes' }), 400, 'VALIDATION_ERROR');
  });

  test('inbox addresses in the unsubscribe and report namespaces are refused', async () => {
    for (const address of ['unsubscribe+x', 'dmarc-reports', 'tls-reports']) expectError(await t.api('POST', '/inboxes', { address }), 400, 'INVALID_ADDRESS');
  });
});
