// Outbound mail end to end: the send API against a capturing MX (smtp-server on loopback) found
// through a dns2 server. Covers headers and bodies as sent, bcc only in the envelope, DKIM
// checked by an independent verifier against the published key, every status path (sent,
// bounced, retried, failed, null MX, A fallback, dropped connection), a restart during a
// retry, dry-run, local delivery, bounce and complaint reports, and every validation error.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import nodemailer from 'nodemailer';
import { and, eq } from 'drizzle-orm';
import { events, jobs } from '../../src/db/schema.ts';
import { createResolver } from '../../src/dns.ts';
import { dkimTxtValue, publishedKeyFor } from '../../src/domain/dkim-keys.ts';
import { setDailyLimit, suspendInbox } from '../../src/domain/inboxes.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let dns: TestDns;
let mx: TestMx;
let inbox: { id: string; address: string };

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
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  for (;;) {
    const res = await server.api('GET', `/messages/${id}`, undefined, { key: opts.key });
    assert.equal(res.status, 200, res.text);
    if (statuses.includes(res.body.status)) return res.body;
    if (Date.now() > deadline) throw new Error(`message ${id} stayed ${res.body.status}, expected ${statuses.join('|')}: ${JSON.stringify(res.body.recipients)}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

const send = (body: Record<string, unknown>, inboxId = inbox.id, server = t) => server.api('POST', `/inboxes/${inboxId}/messages`, body);

function eventsOf(server: TestServer, type: string, messageId: string) {
  return server.server.ctx.db
    .select()
    .from(events)
    .where(eq(events.type, type))
    .all()
    .map((e) => JSON.parse(e.data))
    .filter((d) => d.id === messageId);
}

before(async () => {
  dns = await startTestDns();
  mx = await startTestMx();
  t = await startTestServer(overrides());
  // Publish the shared domain's DKIM key exactly as `mailroom domains show` prints it.
  const key = publishedKeyFor(t.server.ctx, t.config.shared_domain)!;
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
    assert.deepEqual(m.attachments.map((a: { id: string }) => a.id), [att.id]);
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
    const [captured] = (await mx.waitFor(before + 1)).slice(before);
    // One SMTP transaction for the domain: every recipient, bcc included, in the envelope.
    assert.deepEqual(captured.rcptTo.sort(), ['alice@remote.test', 'carol@remote.test', 'hidden@remote.test']);
    assert.equal(captured.mailFrom, inbox.address);
    assert.equal(captured.envid, m.id);
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
    const verdict = await dkimVerify(captured.raw, { resolver: resolver.raw as Parameters<typeof dkimVerify>[1]["resolver"] });
    const sig = verdict.results[0];
    assert.equal(sig?.status.result, 'pass', JSON.stringify(verdict.results));
    assert.equal(sig.signingDomain, t.config.shared_domain);

    // Counters and the event written with the status change.
    const ib = (await t.api('GET', `/inboxes/${inbox.id}`)).body;
    assert.ok(ib.sendsToday >= 1 && ib.totalSent >= 1);
    const sent = eventsOf(t, 'message.sent', m.id);
    assert.equal(sent.length, 1);
    assert.equal(sent[0].status, 'sent');

    // The stored source is what was sent.
    const raw = await fetch(`${t.url}/messages/${m.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(Buffer.from(await raw.arrayBuffer()).toString(), rawText);
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
