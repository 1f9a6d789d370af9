// Replies and forwards end to end: mail arrives over real SMTP, the reply or forward goes out
// through the send pipeline to a capturing MX (found through a dns2 server), and the headers
// it receives are checked: recipients (Reply-To first, reply-all without the inbox itself or
// duplicates), subjects without stacking, In-Reply-To/References, threads, the quoted original
// and the attachments carried over. Then the send rules: Idempotency-Key, the daily limit,
// suspended inboxes, read-only keys and other accounts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { simpleParser, type ParsedMail } from 'mailparser';
import type { SendMailOptions, Transporter } from 'nodemailer';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { setDailyLimit, suspendInbox } from '../../src/domain/inboxes/inboxes.ts';
import { forwardSubject, replySubject } from '../../src/domain/sending/replies.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { smtpTransport } from '../support/mail.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

let t: TestServer;
let dns: TestDns;
let mx: TestMx;
let transport: Transporter;
let inbox: { id: string; address: string };

before(async () => {
  dns = await startTestDns();
  mx = await startTestMx();
  t = await startTestServer({
    outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['200ms'], timeout: '5s' },
    dns: { servers: [dns.server], timeout: '1s' },
  });
  dns.set('remote.test', [{ type: 'MX', exchange: 'mx.remote.test', priority: 10 }]);
  dns.set('mx.remote.test', [{ type: 'A', address: '127.0.0.1' }]);
  transport = smtpTransport(t.server.smtpPort);
  inbox = (await t.api('POST', '/inboxes', { address: 'agent', displayName: 'Agent' })).body;
});

after(async () => {
  transport?.close();
  await t?.close();
  await mx?.close();
  await dns?.close();
});

/** Delivers mail to the agent inbox over SMTP; the stored Message. */
async function receive(mail: SendMailOptions): Promise<any> {
  const info = await transport.sendMail({ from: 'Alice <alice@remote.test>', to: inbox.address, subject: 'Plans', text: 'Shall we meet?', ...mail });
  const id = /stored as (msg_\w+)/.exec(info.response ?? '')![1];
  return (await t.api('GET', `/messages/${id}`)).body;
}

/**
 * What the capturing MX received for the message with this Message-ID, once `recipients`
 * envelope recipients have been seen (a delivery may use one transaction per recipient).
 */
async function captured(messageIdHeader: string, recipients = 1): Promise<{ rcptTo: string[]; mail: ParsedMail }> {
  const all = await until(`capture of ${messageIdHeader}`, () => {
    const found = mx.messages.filter((m) => m.raw.includes(`Message-ID: ${messageIdHeader}`));
    return found.flatMap((m) => m.rcptTo).length >= recipients ? found : undefined;
  });
  return { rcptTo: all.flatMap((c) => c.rcptTo.map((a) => a.toLowerCase())).sort(), mail: await simpleParser(all[0].raw) };
}

const addresses = (field: ParsedMail['to']) => [field ?? []].flat().flatMap((a) => a.value.map((v) => v.address));

describe('subjects', () => {
  test('Re: and Fwd: are added once, whatever the client wrote before', () => {
    assert.equal(replySubject('Plans'), 'Re: Plans');
    assert.equal(replySubject('Re: Plans'), 'Re: Plans');
    assert.equal(replySubject('RE: Plans'), 'RE: Plans');
    assert.equal(replySubject('AW: Pläne'), 'AW: Pläne');
    assert.equal(replySubject(''), 'Re:');
    assert.equal(replySubject('Fwd: Plans'), 'Re: Fwd: Plans');
    assert.equal(replySubject('x'.repeat(998)).length, 998);
    assert.equal(forwardSubject('Plans'), 'Fwd: Plans');
    assert.equal(forwardSubject('Fwd: Plans'), 'Fwd: Plans');
    assert.equal(forwardSubject('FW: Plans'), 'FW: Plans');
    assert.equal(forwardSubject('Re: Plans'), 'Fwd: Re: Plans');
  });
});

describe('POST /messages/{id}/reply', () => {
  test('to the sender, Re: once, In-Reply-To and References, same thread; a second reply does not stack Re:', async () => {
    const original = await receive({ subject: 'Plans', messageId: '<orig-1@remote.test>', references: ['<root@remote.test>'] });
    const res = await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'Tuesday works.' });
    assert.equal(res.status, 202, res.text);
    const reply = res.body;
    assert.equal(reply.status, 'queued');
    assert.equal(reply.direction, 'outbound');
    assert.equal(reply.inboxId, inbox.id);
    assert.equal(reply.threadId, original.threadId);
    assert.equal(reply.subject, 'Re: Plans');
    assert.deepEqual(reply.toAddresses, ['alice@remote.test']);
    assert.deepEqual(reply.ccAddresses, []);
    assert.equal(reply.inReplyTo, '<orig-1@remote.test>');

    const { rcptTo, mail } = await captured(reply.messageIdHeader);
    assert.deepEqual(rcptTo, ['alice@remote.test']);
    assert.equal(mail.subject, 'Re: Plans');
    assert.equal(mail.inReplyTo, '<orig-1@remote.test>');
    assert.deepEqual([mail.references].flat(), ['<root@remote.test>', '<orig-1@remote.test>']);
    assert.deepEqual(addresses(mail.from), [inbox.address]);
    assert.deepEqual(addresses(mail.to), ['alice@remote.test']);
    assert.equal(mail.cc, undefined);
    assert.equal(mail.text?.trim(), 'Tuesday works.');

    // Alice answers the reply; answering that does not give "Re: Re:".
    const answer = await receive({
      subject: 'Re: Plans',
      messageId: '<orig-2@remote.test>',
      inReplyTo: reply.messageIdHeader,
      references: ['<root@remote.test>', '<orig-1@remote.test>', reply.messageIdHeader],
    });
    assert.equal(answer.threadId, original.threadId);
    const again = await t.api('POST', `/messages/${answer.id}/reply`, { bodyHtml: '<p>See you <b>then</b>.</p>' });
    assert.equal(again.status, 202, again.text);
    assert.equal(again.body.subject, 'Re: Plans');
    assert.equal(again.body.threadId, original.threadId);
    const second = await captured(again.body.messageIdHeader);
    assert.equal(second.mail.subject, 'Re: Plans');
    assert.equal(second.mail.inReplyTo, '<orig-2@remote.test>');
    assert.deepEqual([second.mail.references].flat(), ['<root@remote.test>', '<orig-1@remote.test>', reply.messageIdHeader, '<orig-2@remote.test>']);
    assert.match(String(second.mail.html), /See you <b>then<\/b>/);
    const thread = (await t.api('GET', `/threads/${original.threadId}`)).body;
    assert.equal(thread.messageCount, 4);
  });

  test('Reply-To wins over From', async () => {
    const original = await receive({ replyTo: 'Support Desk <desk@remote.test>, tickets@remote.test', subject: 'Ticket 7' });
    const res = await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'On it.' });
    assert.equal(res.status, 202, res.text);
    assert.deepEqual(res.body.toAddresses, ['desk@remote.test', 'tickets@remote.test']);
    const { rcptTo, mail } = await captured(res.body.messageIdHeader, 2);
    assert.deepEqual(rcptTo, ['desk@remote.test', 'tickets@remote.test']);
    assert.deepEqual(addresses(mail.to), ['desk@remote.test', 'tickets@remote.test']);
  });

  test('replyAll: the original To and Cc in Cc, without the inbox itself and without duplicates', async () => {
    const original = await receive({
      from: 'alice@remote.test',
      to: [inbox.address, 'bob@remote.test', 'ALICE@remote.test'],
      cc: ['carol@remote.test', 'Bob <bob@remote.test>', inbox.address.toUpperCase()],
      subject: 'Group plans',
    });
    const one = await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'Only to Alice.' });
    assert.deepEqual(one.body.toAddresses, ['alice@remote.test']);
    assert.deepEqual(one.body.ccAddresses, []);
    const all = await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'To everyone.', replyAll: true });
    assert.equal(all.status, 202, all.text);
    assert.deepEqual(all.body.toAddresses, ['alice@remote.test']);
    assert.deepEqual(all.body.ccAddresses, ['bob@remote.test', 'carol@remote.test']);
    const { rcptTo, mail } = await captured(all.body.messageIdHeader, 3);
    assert.deepEqual(rcptTo, ['alice@remote.test', 'bob@remote.test', 'carol@remote.test']);
    assert.deepEqual(addresses(mail.cc), ['bob@remote.test', 'carol@remote.test']);
    assert.equal(mail.subject, 'Re: Group plans');
  });

  test('to a message the inbox sent: its To again (and its Cc with replyAll)', async () => {
    const sent = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['dave@remote.test'], cc: ['erin@remote.test'], subject: 'Follow-up', bodyText: 'ping' });
    assert.equal(sent.status, 202, sent.text);
    const res = await t.api('POST', `/messages/${sent.body.id}/reply`, { bodyText: 'ping again', replyAll: true });
    assert.equal(res.status, 202, res.text);
    assert.deepEqual(res.body.toAddresses, ['dave@remote.test']);
    assert.deepEqual(res.body.ccAddresses, ['erin@remote.test']);
    assert.equal(res.body.threadId, sent.body.threadId);
    assert.equal(res.body.inReplyTo, sent.body.messageIdHeader);
    const { mail } = await captured(res.body.messageIdHeader);
    assert.equal(mail.subject, 'Re: Follow-up');
    assert.deepEqual([mail.references].flat(), [sent.body.messageIdHeader]);
  });

  test('bcc on a reply and a forward: delivered, in the envelope only, listed as bccAddresses', async () => {
    const original = await receive({ subject: 'Blind copies' });
    const reply = await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'Noted.', bcc: ['boss@remote.test'] });
    assert.equal(reply.status, 202, reply.text);
    assert.deepEqual(reply.body.bccAddresses, ['boss@remote.test']);
    const r = await captured(reply.body.messageIdHeader, 2);
    assert.deepEqual(r.rcptTo, ['alice@remote.test', 'boss@remote.test']);
    assert.equal(r.mail.headers.has('bcc'), false);
    assert.doesNotMatch(r.mail.headerLines.map((h) => h.line).join('\n'), /boss@/);
    const fwd = await t.api('POST', `/messages/${original.id}/forward`, { to: ['frank@remote.test'], bcc: ['boss@remote.test'] });
    assert.equal(fwd.status, 202, fwd.text);
    const f = await captured(fwd.body.messageIdHeader, 2);
    assert.deepEqual(f.rcptTo, ['boss@remote.test', 'frank@remote.test']);
    assert.doesNotMatch(f.mail.headerLines.map((h) => h.line).join('\n'), /boss@/);
    expectError(await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'x', bcc: ['not an address'] }), 400, 'INVALID_ADDRESS');
  });

  test('attachments named by id go with the reply', async () => {
    const form = new FormData();
    form.append('file', new Blob([Buffer.from('minutes')], { type: 'text/plain' }), 'minutes.txt');
    const up = (await (await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: form })).json()) as { id: string };
    const original = await receive({ subject: 'Minutes?' });
    const res = await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'Attached.', attachmentIds: [up.id] });
    assert.equal(res.status, 202, res.text);
    assert.deepEqual(
      res.body.attachments.map((a: any) => a.filename),
      ['minutes.txt'],
    );
    const { mail } = await captured(res.body.messageIdHeader);
    assert.deepEqual(
      mail.attachments.map((a) => [a.filename, a.content.toString()]),
      [['minutes.txt', 'minutes']],
    );
  });

  test('errors: no body 400, unknown field 400, unknown attachment 400, unknown id 404', async () => {
    const original = await receive({ subject: 'errors' });
    expectError(await t.api('POST', `/messages/${original.id}/reply`, {}), 400, 'VALIDATION_ERROR');
    const unknown = await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'x', subject: 'mine' });
    expectError(unknown, 400, 'VALIDATION_ERROR');
    assert.match(unknown.body.error.message, /subject/);
    expectError(await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'x', replyAll: 'yes' }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'x', attachmentIds: ['att_nope'] }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', '/messages/msg_nope/reply', { bodyText: 'x' }), 404, 'MESSAGE_NOT_FOUND');
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages?status=queued`)).body.data.filter((m: any) => m.subject === 'Re: errors').length, 0);
  });
});

describe('POST /messages/{id}/forward', () => {
  test('Fwd: subject, the note above the quoted original, its attachments carried over, a new thread', async () => {
    const original = await receive({
      from: 'Alice Remote <alice@remote.test>',
      cc: 'carol@remote.test',
      subject: 'Invoice 42',
      text: 'Please find the invoice attached.',
      html: '<html><body><p>Please find the <i>invoice</i> attached.</p></body></html>',
      attachments: [
        { filename: 'invoice.pdf', content: Buffer.from('%PDF-1.4 invoice'), contentType: 'application/pdf' },
        { filename: 'notes.txt', content: 'line items' },
      ],
    });
    const res = await t.api('POST', `/messages/${original.id}/forward`, { to: ['Frank <frank@remote.test>'], cc: ['grace@remote.test'], bodyText: 'FYI, please pay this.' });
    assert.equal(res.status, 202, res.text);
    const fwd = res.body;
    assert.equal(fwd.subject, 'Fwd: Invoice 42');
    assert.notEqual(fwd.threadId, original.threadId);
    assert.equal(fwd.inReplyTo, null);
    assert.deepEqual(fwd.toAddresses, ['frank@remote.test']);
    assert.deepEqual(fwd.ccAddresses, ['grace@remote.test']);
    assert.deepEqual(
      fwd.attachments.map((a: any) => [a.filename, a.size]),
      original.attachments.map((a: any) => [a.filename, a.size]),
    );
    assert.ok(
      fwd.attachments.every((a: any) => !original.attachments.some((o: any) => o.id === a.id)),
      'the forward has attachment rows of its own',
    );
    assert.match(
      fwd.bodyText,
      /^FYI, please pay this\.\n\n---------- Forwarded message ---------\nFrom: Alice Remote <alice@remote.test>\nDate: .+\nSubject: Invoice 42\nTo: agent@agents\.test\nCc: carol@remote\.test\n\nPlease find the invoice attached\./,
    );

    const { rcptTo, mail } = await captured(fwd.messageIdHeader, 2);
    assert.deepEqual(rcptTo, ['frank@remote.test', 'grace@remote.test']);
    assert.equal(mail.subject, 'Fwd: Invoice 42');
    assert.equal(mail.inReplyTo, undefined);
    assert.equal(mail.references, undefined);
    assert.match(String(mail.text), /FYI, please pay this\.[\s\S]*Forwarded message[\s\S]*Please find the invoice attached\./);
    assert.match(String(mail.html), /FYI, please pay this\.[\s\S]*Forwarded message[\s\S]*From: Alice Remote &#60;alice@remote\.test&#62;[\s\S]*Please find the <i>invoice<\/i> attached\./);
    assert.deepEqual(
      mail.attachments.map((a) => [a.filename, a.content.toString()]),
      [
        ['invoice.pdf', '%PDF-1.4 invoice'],
        ['notes.txt', 'line items'],
      ],
    );

    // The original can go; the forward keeps its attachments.
    assert.equal((await t.api('DELETE', `/messages/${original.id}`)).status, 204);
    const att = await t.api('GET', `/attachments/${fwd.attachments[0].id}`);
    assert.equal(att.status, 200, att.text);
    const bytes = await fetch(att.body.url);
    assert.equal(await bytes.text(), '%PDF-1.4 invoice');
    // And the forward goes with its own rows, leaving nothing behind.
    assert.equal((await t.api('DELETE', `/messages/${fwd.id}`)).status, 204);
    expectError(await t.api('GET', `/attachments/${fwd.attachments[0].id}`), 404, 'ATTACHMENT_NOT_FOUND');
  });

  test('no note and a text-only original: a text-only forward; Fwd: not stacked', async () => {
    const original = await receive({ subject: 'Fwd: chain letter', text: 'Pass it on.' });
    const res = await t.api('POST', `/messages/${original.id}/forward`, { to: ['heidi@remote.test'] });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.subject, 'Fwd: chain letter');
    assert.equal(res.body.bodyHtml, null);
    assert.match(res.body.bodyText, /^---------- Forwarded message ---------\n/);
    const { mail } = await captured(res.body.messageIdHeader);
    assert.equal(mail.html, false);
    assert.match(String(mail.text), /Pass it on\./);
  });

  test('errors: missing to 400, bad address 400, unknown id 404', async () => {
    const original = await receive({ subject: 'fwd errors' });
    expectError(await t.api('POST', `/messages/${original.id}/forward`, { bodyText: 'x' }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', `/messages/${original.id}/forward`, { to: [] }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', `/messages/${original.id}/forward`, { to: ['not an address'] }), 400, 'INVALID_ADDRESS');
    expectError(await t.api('POST', '/messages/msg_nope/forward', { to: ['x@remote.test'] }), 404, 'MESSAGE_NOT_FOUND');
  });
});

describe('the rules of a send apply', () => {
  test('another account: 404 MESSAGE_NOT_FOUND; read-only key: 403 FORBIDDEN', async () => {
    const original = await receive({ subject: 'private' });
    const other = await t.newAccount('stranger');
    expectError(await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'x' }, { key: other.key }), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('POST', `/messages/${original.id}/forward`, { to: ['x@remote.test'] }, { key: other.key }), 404, 'MESSAGE_NOT_FOUND');
    const ro = await createApiKey(t.server.ctx, t.accountId, { name: 'ro', readOnly: true });
    expectError(await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'x' }, { key: ro.key }), 403, 'FORBIDDEN');
    expectError(await t.api('POST', `/messages/${original.id}/forward`, { to: ['x@remote.test'] }, { key: ro.key }), 403, 'FORBIDDEN');
    expectError(await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'x' }, { key: null }), 401, 'UNAUTHORIZED');
  });

  test('suspended inbox: 403 INBOX_SUSPENDED; daily limit: 429 DAILY_SEND_LIMIT_EXCEEDED', async () => {
    const frozen = (await t.api('POST', '/inboxes', { address: 'frozen' })).body;
    const original = await receive({ to: frozen.address, subject: 'cold' });
    await suspendInbox(t.server.ctx, frozen.id);
    expectError(await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'x' }), 403, 'INBOX_SUSPENDED');
    expectError(await t.api('POST', `/messages/${original.id}/forward`, { to: ['x@remote.test'] }), 403, 'INBOX_SUSPENDED');

    const lim = (await t.api('POST', '/inboxes', { address: 'limited' })).body;
    await setDailyLimit(t.server.ctx, lim.id, 2);
    const msg = await receive({ to: lim.address, subject: 'busy' });
    assert.equal((await t.api('POST', `/messages/${msg.id}/reply`, { bodyText: '1' })).status, 202);
    assert.equal((await t.api('POST', `/messages/${msg.id}/forward`, { to: ['x@remote.test'] })).status, 202);
    expectError(await t.api('POST', `/messages/${msg.id}/reply`, { bodyText: '3' }), 429, 'DAILY_SEND_LIMIT_EXCEEDED');
    expectError(await t.api('POST', `/messages/${msg.id}/forward`, { to: ['x@remote.test'] }), 429, 'DAILY_SEND_LIMIT_EXCEEDED');
    assert.equal((await t.api('GET', `/inboxes/${lim.id}`)).body.sendsToday, 2);
  });

  test('Idempotency-Key: a retried reply or forward is queued once', async () => {
    const original = await receive({ subject: 'retry me' });
    for (const [path, body] of [
      ['reply', { bodyText: 'once' }],
      ['forward', { to: ['ivan@remote.test'] }],
    ] as const) {
      const headers = { 'Idempotency-Key': `${path}-${original.id}` };
      const a = await t.api('POST', `/messages/${original.id}/${path}`, body, { headers });
      const b = await t.api('POST', `/messages/${original.id}/${path}`, body, { headers });
      assert.equal(a.status, 202, a.text);
      assert.equal(b.status, 202);
      assert.equal(b.headers.get('idempotent-replayed'), 'true');
      assert.equal(b.body.id, a.body.id);
      expectError(await t.api('POST', `/messages/${original.id}/${path}`, { ...body, bodyHtml: '<p>other</p>' }, { headers }), 409, 'IDEMPOTENCY_KEY_REUSED');
    }
    const list = (await t.api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).body.data;
    assert.equal(list.filter((m: any) => m.subject === 'Re: retry me').length, 1);
    assert.equal(list.filter((m: any) => m.subject === 'Fwd: retry me').length, 1);
  });
});
