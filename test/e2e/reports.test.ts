// Bounces and complaints about our own outbound mail, through real SMTP both ways: a message is
// sent to a capturing MX, which records the per-recipient bounce address (VERP) it was sent
// with; then a report written like a real MTA's (test/fixtures/reports/, hand-written from RFC
// 3464/5965/6591 and from what Postfix, Exim, Exchange, Gmail, Yahoo and qmail produce) comes
// back to that address. Forged reports change nothing: at the inbox they are stored as ordinary
// mail; at the bounce address anything that is no report (a DSN from a non-null sender, an
// out-of-office reply, plain mail) gets 550 5.7.1 and is stored nowhere.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { eq } from 'drizzle-orm';
import { events } from '../../src/store/schema.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { sqlDb } from '../support/db.ts';

let t: TestServer;
let dns: TestDns;
let mx: TestMx;
let inbox: { id: string; address: string };
let smtp: SmtpClient;

before(async () => {
  dns = await startTestDns();
  mx = await startTestMx();
  t = await startTestServer({
    outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['200ms'], timeout: '5s' },
    dns: { servers: [dns.server], timeout: '1s' },
    limits: { requests_per_minute: 100_000 },
  });
  dns.set('remote.test', [{ type: 'MX', exchange: 'mx.remote.test', priority: 10 }]);
  dns.set('mx.remote.test', [{ type: 'A', address: '127.0.0.1' }]);
  inbox = (await t.api('POST', '/inboxes', { address: 'sender' })).body;
  smtp = (await SmtpClient.open(t.server.smtpPort)).client;
  assert.equal((await smtp.cmd('EHLO mx.remote.test')).code, 250);
});

after(async () => {
  await smtp?.quit();
  await t?.close();
  await mx?.close();
  await dns?.close();
});

interface Sent {
  id: string;
  messageIdHeader: string;
  /** The bounce address each recipient's transaction used as MAIL FROM. */
  bounceTo: Record<string, string>;
}

async function message(id: string) {
  const res = await t.api('GET', `/messages/${id}`);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

async function sendAndCapture(to: string[]): Promise<Sent> {
  const before = mx.messages.length;
  const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to, subject: 'original', bodyText: 'hi' });
  assert.equal(res.status, 202, res.text);
  await until('sent', async () => ((await message(res.body.id)).status === 'sent' ? true : undefined));
  const captured = (await mx.waitFor(before + to.length)).slice(before);
  return { id: res.body.id, messageIdHeader: res.body.messageIdHeader, bounceTo: Object.fromEntries(captured.map((c) => [c.rcptTo[0], c.mailFrom])) };
}

function fixture(name: string, vars: { to: string; rcpt: string; msgid: string; envid: string }): string {
  return readFileSync(new URL(`../fixtures/reports/${name}`, import.meta.url), 'utf8')
    .replaceAll('{{TO}}', vars.to)
    .replaceAll('{{RCPT_LOCAL}}', vars.rcpt.split('@')[0])
    .replaceAll('{{RCPT}}', vars.rcpt)
    .replaceAll('{{MSGID}}', vars.msgid)
    .replaceAll('{{ENVID}}', vars.envid)
    .replace(/\r?\n/g, '\r\n');
}

/** One SMTP transaction on the shared session; the final reply. */
async function deliver(mailFrom: string, rcpt: string, raw: string) {
  return smtp.send(mailFrom, [rcpt], Buffer.from(raw));
}

const inboxCounts = async () => (await t.api('GET', `/inboxes/${inbox.id}`)).body as { bounceCount: number; complaintCount: number };
const received = async () => (await t.api('GET', `/inboxes/${inbox.id}/messages?status=received`)).body.total as number;
const eventsOf = async (type: string, id: string) => (await sqlDb(t.server.ctx).select().from(events).where(eq(events.type, type)).all()).filter((e) => JSON.parse(e.data).id === id).length;

describe('bounces at the bounce address: status bounced, the remote diagnostic kept', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['postfix-dsn.eml', '', /^smtp; 550 5\.1\.1 <[^>]+>: Recipient address rejected: User unknown in virtual mailbox table$/],
    // Exim names only "Status: 5.0.0": the reason comes from the human-readable part.
    ['exim-dsn.eml', '', /^Unrouteable address$/],
    ['microsoft-ndr.eml', '', /^smtp;550 5\.1\.10 RESOLVER\.ADR\.RecipientNotFound; Recipient not found by SMTP address lookup$/],
    ['gmail-dsn.eml', '', /^smtp; 550-5\.1\.1 The email account that you tried to reach does not exist\. Please try/],
    // No message/delivery-status at all: plain-text notices from the null sender.
    ['yahoo-plain.eml', '', /^554: delivery error: dd This user doesn't have a remote\.test account/],
    ['qmail-plain.eml', '', /^Sorry, no mailbox here by that name\. \(#5\.1\.1\)$/],
  ];
  for (const [file, mailFrom, response] of cases) {
    test(file, async () => {
      const sent = await sendAndCapture([`gone-${file.split('.')[0]}@remote.test`, 'stays@remote.test']);
      const rcpt = `gone-${file.split('.')[0]}@remote.test`;
      const counts = await inboxCounts();
      const storedBefore = await received();
      const reply = await deliver(mailFrom, sent.bounceTo[rcpt], fixture(file, { to: sent.bounceTo[rcpt], rcpt, msgid: sent.messageIdHeader, envid: sent.id }));
      assert.equal(reply.code, 250, reply.text);
      const m = await message(sent.id);
      assert.equal(m.status, 'bounced');
      const gone = m.recipients.find((r: { address: string }) => r.address === rcpt);
      assert.equal(gone.status, 'bounced');
      assert.match(gone.response, response);
      // Only the recipient its bounce address names.
      assert.equal(m.recipients.find((r: { address: string }) => r.address === 'stays@remote.test').status, 'sent');
      assert.equal((await inboxCounts()).bounceCount, counts.bounceCount + 1);
      assert.equal(await eventsOf('message.bounced', sent.id), 1);
      assert.equal(await received(), storedBefore, 'a report is not stored as mail');
    });
  }
});

describe('complaints at the bounce address: status complained', () => {
  for (const file of ['arf-attached.eml', 'arf-inline.eml', 'arf-headers.eml']) {
    test(file, async () => {
      // One reader per report: a complaint puts its reader on the suppression list.
      const rcpt = `reader-${file.split('.')[0]}@remote.test`;
      const sent = await sendAndCapture([rcpt]);
      const to = sent.bounceTo[rcpt];
      const before = (await inboxCounts()).complaintCount;
      // Feedback loops send from their own address, not the null sender.
      const reply = await deliver('fbl@remote.test', to, fixture(file, { to, rcpt, msgid: sent.messageIdHeader, envid: sent.id }));
      assert.equal(reply.code, 250, reply.text);
      assert.equal((await message(sent.id)).status, 'complained');
      assert.equal((await inboxCounts()).complaintCount, before + 1);
      assert.equal(await eventsOf('message.complained', sent.id), 1);
    });
  }
});

describe('forged and stray reports change nothing', () => {
  test('a DSN quoting our Message-ID and ENVID, sent to the inbox itself: stored as ordinary mail, message stays sent', async () => {
    const sent = await sendAndCapture(['victim@remote.test']);
    const counts = await inboxCounts();
    const storedBefore = await received();
    const reply = await deliver('', inbox.address, fixture('postfix-dsn.eml', { to: inbox.address, rcpt: 'victim@remote.test', msgid: sent.messageIdHeader, envid: sent.id }));
    assert.equal(reply.code, 250, reply.text);
    assert.match(reply.text, /stored as msg_/);
    const m = await message(sent.id);
    assert.equal(m.status, 'sent');
    assert.equal(m.recipients[0].status, 'sent');
    assert.deepEqual(await inboxCounts(), counts);
    assert.equal(await eventsOf('message.bounced', sent.id), 0);
    assert.equal(await received(), storedBefore + 1);
  });

  test('a bounce address with a wrong token, or of another message, is refused at RCPT', async () => {
    const sent = await sendAndCapture(['someone@remote.test']);
    const real = sent.bounceTo['someone@remote.test'];
    const [local, domain] = real.split('@');
    const flipped = local.slice(0, -1) + (local.endsWith('a') ? 'b' : 'a');
    assert.equal((await smtp.cmd('MAIL FROM:<>')).code, 250);
    for (const forged of [`${flipped}@${domain}`, `bounces+${'0'.repeat(26)}.${'a'.repeat(12)}@${domain}`, `bounces+anything@${domain}`]) {
      const r = await smtp.cmd(`RCPT TO:<${forged}>`);
      assert.equal(r.code, 550, `${forged}: ${r.text}`);
    }
    assert.equal((await smtp.cmd('RSET')).code, 250);
    assert.equal((await message(sent.id)).status, 'sent');
  });

  test("one recipient's bounce address cannot bounce another recipient", async () => {
    const sent = await sendAndCapture(['a@remote.test', 'b@remote.test']);
    // A's address, with a DSN that names B.
    const to = sent.bounceTo['a@remote.test'];
    const raw = fixture('postfix-dsn.eml', { to, rcpt: 'b@remote.test', msgid: sent.messageIdHeader, envid: sent.id });
    assert.equal((await deliver('', to, raw)).code, 250);
    const m = await message(sent.id);
    assert.equal(m.recipients.find((r: { address: string }) => r.address === 'b@remote.test').status, 'sent');
  });

  test('a DSN from a non-null sender at the bounce address: 550 5.7.1 at the end of DATA, nothing stored, nothing bounced', async () => {
    const sent = await sendAndCapture(['c@remote.test']);
    const to = sent.bounceTo['c@remote.test'];
    const storedBefore = await received();
    const reply = await deliver('attacker@evil.test', to, fixture('postfix-dsn.eml', { to, rcpt: 'c@remote.test', msgid: sent.messageIdHeader, envid: sent.id }));
    assert.deepEqual(reply, { code: 550, text: '5.7.1 only delivery status and feedback reports are accepted at this address' });
    assert.equal((await message(sent.id)).status, 'sent');
    assert.equal(await received(), storedBefore);
  });

  test('an out-of-office reply or any other mail to the bounce address: 550 5.7.1, and it never reaches the inbox', async () => {
    const sent = await sendAndCapture(['d@remote.test']);
    const to = sent.bounceTo['d@remote.test'];
    const storedBefore = await received();
    const reply = await deliver('', to, fixture('out-of-office.eml', { to, rcpt: 'd@remote.test', msgid: sent.messageIdHeader, envid: sent.id }));
    assert.deepEqual(reply, { code: 550, text: '5.7.1 only delivery status and feedback reports are accepted at this address' });
    // Every recipient sees the address in Return-Path: a plain message there is no way in.
    const plain = await deliver('someone@elsewhere.test', to, `From: someone@elsewhere.test\r\nTo: ${to}\r\nSubject: hello\r\n\r\nlet me in\r\n`);
    assert.deepEqual(plain, { code: 550, text: '5.7.1 only delivery status and feedback reports are accepted at this address' });
    assert.equal((await message(sent.id)).status, 'sent');
    assert.equal(await received(), storedBefore);
  });

  test('no inbox can take an address in the bounce namespace', async () => {
    expectError(await t.api('POST', '/inboxes', { address: 'bounces+mine' }), 400, 'INVALID_ADDRESS');
  });
});

// A report is read up to 64 K characters of each part and 1 M in all (src/domain/inbound/reports.ts):
// the fields and the explanation are at the starts of their parts, and a returned message can
// be 25 MB of text. mailparser joins the explanation and the delivery-status fields into one
// text: the fields are read from where they start in it, so a long explanation does not hide them.
describe('reports past the read bounds', () => {
  const explained = (raw: string, lines: number) =>
    raw.replace('                   The mail system\r\n', `${'This line only pads the explanation of the notice.\r\n'.repeat(lines)}                   The mail system\r\n`);

  test('900 KB of explanation before the delivery-status fields: the fields are still read, and the recipient bounces', async () => {
    const rcpt = 'far@remote.test';
    const sent = await sendAndCapture([rcpt]);
    const to = sent.bounceTo[rcpt];
    const raw = explained(fixture('postfix-dsn.eml', { to, rcpt, msgid: sent.messageIdHeader, envid: sent.id }), 18_000);
    assert.ok(raw.length > 900_000);
    const reply = await deliver('', to, raw);
    assert.equal(reply.code, 250, reply.text);
    const m = await message(sent.id);
    assert.equal(m.status, 'bounced');
    assert.match(m.recipients[0].response, /^smtp; 550 5\.1\.1 <far@remote\.test>: Recipient address rejected/);
  });

  const unread: Array<[string, (raw: string) => string]> = [
    [
      'a recipient block past the first 64 K characters of the fields',
      (raw) => raw.replace('Reporting-MTA: dns; mx.remote.test\r\n', `Reporting-MTA: dns; mx.remote.test\r\n${`X-Padding: ${'p'.repeat(990)}\r\n`.repeat(70)}`),
    ],
    ['fields past the first 1 M characters of the text', (raw) => explained(raw, 21_000)],
  ];
  for (const [what, pad] of unread) {
    test(`${what} is not read: the report is taken and changes nothing`, async () => {
      const rcpt = `deep-${unread.findIndex(([w]) => w === what)}@remote.test`;
      const sent = await sendAndCapture([rcpt]);
      const to = sent.bounceTo[rcpt];
      const counts = await inboxCounts();
      const storedBefore = await received();
      const reply = await deliver('', to, pad(fixture('postfix-dsn.eml', { to, rcpt, msgid: sent.messageIdHeader, envid: sent.id })));
      assert.equal(reply.code, 250, reply.text);
      const m = await message(sent.id);
      assert.equal(m.status, 'sent');
      assert.equal(m.recipients[0].status, 'sent');
      assert.deepEqual(await inboxCounts(), counts);
      assert.equal(await eventsOf('message.bounced', sent.id), 0);
      assert.equal(await received(), storedBefore, 'a report is not stored as mail');
    });
  }
});
