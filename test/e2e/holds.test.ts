// Outbound holds for a person end to end (PRODUCT.md "Outbound policy"): each rule
// (first_contact, always, secret_detected) holds a send — status `held`, `hold.reasons`, every
// recipient `held`, message.held, the audit entry by the system, nothing attempted; POST
// /messages/{id}/release (scope review) queues it and it is sent, audited with the releasing key;
// POST /messages/{id}/cancel cancels it; `[policy] hold_expiry` cancels it by the system; a
// scheduled send is judged when it is due; and EVERY sending path (API, reply, forward, draft
// send, scheduled, SMTP submission through nodemailer, MCP) meets a suppressed address (refused),
// a first-contact rule and a secret (held). On both engines.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodemailer from 'nodemailer';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Clock } from '../../src/context.ts';
import type { JobRunner } from '../../src/jobs/runner.ts';
import { rawRows } from '../../src/store/store.ts';
import { deliverMail } from '../support/mail.ts';
import { startOutboundRig, type OutboundRig } from '../support/outbound.ts';
import { expectError, readResponse, type ApiResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

let rig: OutboundRig;
let t: TestServer;
/** The server's clock runs this far ahead of the real one (scheduled sends and hold expiry). */
let offset = 0;
const clock: Clock = { now: () => new Date(Date.now() + offset) };
let plain: { id: string; address: string };
let careful: { id: string; address: string };
let strict: { id: string; address: string };
/** A key with read, send (an agent's) and one with read and review (a person's). */
let agent: { key: string; id: string };
let reviewer: { key: string; id: string };

// Built from parts: this file should not itself look like a leak.
const TOKEN = `ghp_${'x'.repeat(36)}`;

before(async () => {
  rig = await startOutboundRig();
  t = await rig.start({ clock, overrides: { submission: { listen: '127.0.0.1:0' } } });
  plain = (await t.api('POST', '/inboxes', { address: 'plain' })).body;
  careful = (await t.api('POST', '/inboxes', { address: 'careful' })).body;
  strict = (await t.api('POST', '/inboxes', { address: 'strict' })).body;
  assert.equal((await t.api('PATCH', `/inboxes/${careful.id}`, { sendPolicy: { approval: 'first_contact' } })).status, 200);
  assert.equal((await t.api('PATCH', `/inboxes/${strict.id}`, { sendPolicy: { approval: 'always' } })).status, 200);
  const a = (await t.api('POST', '/account/api-keys', { name: 'agent', scopes: ['read', 'send'] })).body;
  const r = (await t.api('POST', '/account/api-keys', { name: 'person', scopes: ['read', 'review'] })).body;
  agent = { key: a.key, id: a.id };
  reviewer = { key: r.key, id: r.id };
});

after(async () => {
  await t?.close();
  await rig?.close();
});

const message = async (id: string) => (await t.api('GET', `/messages/${id}`)).body;
const reaches = (id: string, status: string) =>
  until(`${id} ${status}`, async () => {
    const m = await message(id);
    return m.status === status ? m : undefined;
  });
const wakeJobs = () => (t.server.services.find((s) => s.name === 'jobs') as unknown as JobRunner).wake();
const send = (inbox: { id: string }, body: Record<string, unknown>, key = agent.key) => t.api('POST', `/inboxes/${inbox.id}/messages`, { subject: 's', bodyText: 'hello', ...body }, { key });
const auditOf = async (action: string, target: string) => {
  const res = await t.api('GET', `/audit?action=${action}&limit=100`, undefined, { key: reviewer.key });
  assert.equal(res.status, 200, res.text);
  return (res.body.data as Array<{ actor: { type: string; id?: string }; target: string; detail: any }>).filter((e) => e.target === target);
};
/**
 * The events of `type` about message `id`, once there is one: on PostgreSQL GET /events shows an
 * event only when every transaction older than its own has ended, a moment after its commit.
 */
const eventsOf = (type: string, id: string) =>
  until(`${type} of ${id}`, async () => {
    const list = ((await t.api('GET', `/events?types=${type}&limit=1000`)).body.data as any[]).filter((e) => e.data.id === id);
    return list.length ? list : undefined;
  });
const codes = (m: { hold: { reasons: Array<{ code: string }> } | null }) => m.hold?.reasons.map((r) => r.code);

/** A held send as every path answers it: status held, the reasons, every recipient held, message.held, the audit entry, nothing attempted. */
async function expectHeld(id: string, reasons: string[], recipients: string[]) {
  const m = await message(id);
  assert.equal(m.status, 'held', JSON.stringify(m));
  assert.deepEqual(codes(m), reasons);
  for (const address of recipients) assert.equal(m.recipients.find((r: any) => r.address.toLowerCase() === address).status, 'held');
  assert.equal((await eventsOf('message.held', id)).length, 1);
  const [entry, ...more] = await auditOf('message.held', id);
  assert.equal(more.length, 0);
  assert.deepEqual(entry!.actor, { type: 'system' });
  assert.deepEqual(
    entry!.detail.reasons.map((r: any) => r.code),
    reasons,
  );
  for (const address of recipients) assert.equal(rig.mx.attempts(address), 0);
  return m;
}

describe('the rules', () => {
  test('first_contact: a new address is held (202, held, reasons, message.held, audit by the system); one the inbox received mail from is sent', async () => {
    const res = await send(careful, { to: ['new1@remote.test'] });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.status, 'held');
    assert.equal(res.body.hold.reasons[0].code, 'first_contact');
    assert.match(res.body.hold.reasons[0].detail, /new1@remote\.test/);
    await expectHeld(res.body.id, ['first_contact'], ['new1@remote.test']);

    await deliverMail(t.server.smtpPort, { from: 'Known@remote.test', to: careful.address, subject: 'hi', text: 'hello' });
    const known = await send(careful, { to: ['known@remote.test'] });
    assert.equal(known.status, 202, known.text);
    assert.equal(known.body.hold, null);
    await reaches(known.body.id, 'sent');
    // Only the new one of two recipients is named; the message is held as a whole.
    const mixed = await send(careful, { to: ['known@remote.test'], cc: ['new2@remote.test'] });
    assert.equal(mixed.body.status, 'held');
    assert.match(mixed.body.hold.reasons[0].detail, /never exchanged mail with new2@remote\.test \(/);
  });

  test('always: every send of the inbox is held', async () => {
    const res = await send(strict, { to: ['anyone@remote.test'] });
    assert.equal(res.status, 202, res.text);
    await expectHeld(res.body.id, ['always'], ['anyone@remote.test']);
  });

  test('secret_detected: in the subject, the bodies and an uploaded attachment; the detail names the kind, never the secret; a card number only when Luhn-valid', async () => {
    const inSubject = await send(plain, { to: ['s1@remote.test'], subject: `token ${TOKEN}` });
    await expectHeld(inSubject.body.id, ['secret_detected'], ['s1@remote.test']);
    assert.match(inSubject.body.hold.reasons[0].detail, /a GitHub token in the subject/);
    assert.ok(!inSubject.body.hold.reasons[0].detail.includes(TOKEN));
    const inHtml = await send(plain, { to: ['s2@remote.test'], bodyText: null, bodyHtml: `<p>key: mr_live_${'A'.repeat(40)}</p>` });
    assert.match(inHtml.body.hold.reasons[0].detail, /a mailroom API key in the HTML body/);
    const card = await send(plain, { to: ['s3@remote.test'], bodyText: 'my card is 4111 1111 1111 1111' });
    assert.match(card.body.hold.reasons[0].detail, /a payment card number in the text body/);
    const notCard = await send(plain, { to: ['s4@remote.test'], bodyText: 'order 4111 1111 1111 1112' });
    assert.equal(notCard.body.status, 'queued');

    const fd = new FormData();
    fd.append('file', new Blob([`-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n`], { type: 'text/plain' }), 'id_ed25519.txt');
    const upload = await readResponse(await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${agent.key}` }, body: fd }));
    assert.equal(upload.status, 201, upload.text);
    const inFile = await send(plain, { to: ['s5@remote.test'], attachmentIds: [upload.body.id] });
    await expectHeld(inFile.body.id, ['secret_detected'], ['s5@remote.test']);
    assert.match(inFile.body.hold.reasons[0].detail, /a private key \(PEM\) in attachment id_ed25519\.txt/);
  });

  test('auto_reply_loop: answering mail marked Auto-Submitted: auto-*, Precedence bulk|list|junk, or from a no-reply / MAILER-DAEMON sender is held (reply, a send into its thread, SMTP submission with In-Reply-To); Auto-Submitted: no is answered', async () => {
    const cases: Array<[string, Record<string, string>, boolean]> = [
      ['robot1@remote.test', { 'Auto-Submitted': 'auto-replied' }, true],
      ['robot2@remote.test', { 'Auto-Submitted': 'auto-generated; owner-email="x@remote.test"' }, true],
      ['robot3@remote.test', { Precedence: 'bulk' }, true],
      ['robot4@remote.test', { Precedence: 'list' }, true],
      ['robot5@remote.test', { Precedence: 'junk' }, true],
      ['no-reply@remote.test', {}, true],
      ['noreply+news@remote.test', {}, true],
      ['mailer-daemon@remote.test', {}, true],
      ['human@remote.test', { 'Auto-Submitted': 'no', Precedence: 'first-class' }, false],
    ];
    for (const [from, headers, held] of cases) {
      const subject = `auto ${from}`;
      await deliverMail(t.server.smtpPort, { from, to: plain.address, subject, text: 'automatic', headers });
      const original = await until(subject, async () => ((await t.api('GET', `/inboxes/${plain.id}/messages?direction=inbound`)).body.data as any[]).find((m) => m.subject === subject));
      const reply = await t.api('POST', `/messages/${original.id}/reply`, { bodyText: 'thanks' }, { key: agent.key });
      assert.equal(reply.status, 202, reply.text);
      if (!held) {
        assert.equal(reply.body.status, 'queued', from);
        continue;
      }
      await expectHeld(reply.body.id, ['auto_reply_loop'], [from]);
      assert.match(reply.body.hold.reasons[0].detail, /answers automatic mail/);
      // A send into the thread answers its last message: the automatic one is still that for the held reply.
      const inThread = await send(plain, { to: [from], threadId: original.threadId });
      assert.deepEqual(codes(inThread.body), ['auto_reply_loop'], from);
      if (from === 'robot1@remote.test') {
        const transport = nodemailer.createTransport({ host: '127.0.0.1', port: t.server.submissionPort, secure: false, ignoreTLS: true, auth: { user: plain.address, pass: agent.key } });
        try {
          const info = await transport.sendMail({ from: plain.address, to: from, subject: `Re: ${subject}`, text: 'ok', inReplyTo: original.messageIdHeader });
          assert.match(info.response, /held for a person \(auto_reply_loop\)/);
        } finally {
          transport.close();
        }
      }
    }
  });

  test('thread_budget: the sixth send of an inbox in one thread within an hour is held ([policy] thread_hourly_sends = 5); an hour later the thread goes on', async () => {
    const first = (await send(plain, { to: ['budget@remote.test'], subject: 'budget' })).body;
    for (let i = 0; i < 4; i++) assert.equal((await send(plain, { to: ['budget@remote.test'], threadId: first.threadId })).body.status, 'queued');
    const sixth = (await send(plain, { to: ['budget@remote.test'], threadId: first.threadId })).body;
    assert.equal(sixth.status, 'held');
    assert.deepEqual(codes(sixth), ['thread_budget']);
    assert.match(sixth.hold.reasons[0].detail, /already sent 5 messages in thread thr_\w+ within the last hour; \[policy\] thread_hourly_sends is 5/);
    const [entry] = await auditOf('message.held', sixth.id);
    assert.deepEqual(
      entry!.detail.reasons.map((r: any) => r.code),
      ['thread_budget'],
    );
    // Held sends do not count: the next one is held for the same reason, not for more.
    assert.match((await send(plain, { to: ['budget@remote.test'], threadId: first.threadId })).body.hold.reasons[0].detail, /already sent 5 messages/);
    // Another thread is not concerned.
    assert.equal((await send(plain, { to: ['budget@remote.test'], subject: 'another' })).body.status, 'queued');
    offset += 3_600_000 + 60_000;
    assert.equal((await send(plain, { to: ['budget@remote.test'], threadId: first.threadId })).body.status, 'queued');
  });

  test('several rules at once: every reason, in order', async () => {
    const res = await send(strict, { to: ['both@remote.test'], bodyText: `here: ${TOKEN}` });
    await expectHeld(res.body.id, ['always', 'secret_detected'], ['both@remote.test']);
  });
});

describe('POST /inboxes/{id}/messages/check', () => {
  const messageCount = async (): Promise<number> => Number((await rawRows<[number]>(t.server.ctx.db, 'SELECT count(*) FROM messages'))[0]?.[0]);
  // The table itself: GET /events on PostgreSQL shows an event a moment after its commit.
  const heldEvents = async (): Promise<number> => Number((await rawRows<[number]>(t.server.ctx.db, "SELECT count(*) FROM events WHERE type = 'message.held'"))[0]?.[0]);
  const check = (inbox: { id: string }, body: Record<string, unknown>, key = agent.key) => t.api('POST', `/inboxes/${inbox.id}/messages/check`, { subject: 's', bodyText: 'hello', ...body }, { key });

  test("each recipient's decision (send, hold, suppressed, blocked), allowed, held and the reasons; nothing stored, sent, recorded or audited", async () => {
    assert.equal((await t.api('POST', '/suppressions', { address: 'check-sup@remote.test' })).status, 201);
    await deliverMail(t.server.smtpPort, { from: 'check-known@remote.test', to: careful.address, subject: 'known', text: 'hi' });
    await until('check-known arrived', async () =>
      ((await t.api('GET', `/inboxes/${careful.id}/messages?direction=inbound`)).body.data as any[]).find((m) => m.fromAddress === 'check-known@remote.test'),
    );
    const [stored, held] = [await messageCount(), await heldEvents()];

    const res = await check(careful, { to: ['check-known@remote.test', 'Check-New@remote.test'], cc: ['check-sup@remote.test'] });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      { ...res.body, reasons: res.body.reasons.map((r: any) => r.code) },
      {
        allowed: true,
        held: true,
        reasons: ['first_contact'],
        recipients: [
          { address: 'check-known@remote.test', decision: 'send' },
          { address: 'Check-New@remote.test', decision: 'hold' },
          { address: 'check-sup@remote.test', decision: 'suppressed' },
        ],
      },
    );
    // A secret holds the message for every recipient; a clean one is sent.
    const secret = (await check(plain, { to: ['a@remote.test', 'b@remote.test'], bodyText: TOKEN })).body;
    assert.deepEqual([secret.allowed, secret.held, secret.reasons[0].code, secret.recipients.map((r: any) => r.decision)], [true, true, 'secret_detected', ['hold', 'hold']]);
    assert.deepEqual((await check(plain, { to: ['a@remote.test'] })).body, { allowed: true, held: false, reasons: [], recipients: [{ address: 'a@remote.test', decision: 'send' }] });
    // Everyone suppressed: not allowed (the send would be 422).
    assert.deepEqual((await check(plain, { to: ['check-sup@remote.test'] })).body, {
      allowed: false,
      held: false,
      reasons: [],
      recipients: [{ address: 'check-sup@remote.test', decision: 'suppressed' }],
    });
    // A send list blocks one: not allowed (the send would be 403 RECIPIENT_BLOCKED).
    const entry = (await t.api('POST', '/lists', { direction: 'send', kind: 'block', entry: 'blocked.test', inboxId: plain.id })).body;
    const blocked = (await check(plain, { to: ['x@blocked.test', 'a@remote.test'] })).body;
    assert.deepEqual([blocked.allowed, blocked.held, blocked.recipients.map((r: any) => r.decision)], [false, false, ['blocked', 'send']]);
    assert.equal((await t.api('DELETE', `/lists/${entry.id}`)).status, 204);

    assert.equal(await messageCount(), stored);
    assert.equal(await heldEvents(), held);
    assert.equal(rig.mx.attempts('Check-New@remote.test'), 0);
  });

  test("errors: 404 INBOX_NOT_FOUND (another account's too), 400 on a bad address or body, 403 INSUFFICIENT_SCOPE without `send`", async () => {
    expectError(await check({ id: 'inb_nope' }, { to: ['a@remote.test'] }), 404, 'INBOX_NOT_FOUND');
    const other = await t.newAccount('check-other');
    expectError(await check(plain, { to: ['a@remote.test'] }, other.key), 404, 'INBOX_NOT_FOUND');
    expectError(await check(plain, { to: ['not an address'] }), 400, 'INVALID_ADDRESS');
    expectError(await check(plain, { to: [] }), 400, 'VALIDATION_ERROR');
    expectError(await check(plain, { to: ['a@remote.test'] }, reviewer.key), 403, 'INSUFFICIENT_SCOPE');
  });

  test('MCP check_message answers the same; a read-only key does not see it', async () => {
    const client = new Client({ name: 'holds-check', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
    try {
      const res = (await client.callTool({ name: 'check_message', arguments: { inboxId: strict.id, to: ['mcp-check@remote.test'], subject: 's', bodyText: 'x' } })) as CallToolResult;
      assert.equal(res.isError, undefined);
      const body = res.structuredContent as any;
      assert.deepEqual([body.allowed, body.held, body.reasons.map((r: any) => r.code), body.recipients], [true, true, ['always'], [{ address: 'mcp-check@remote.test', decision: 'hold' }]]);
    } finally {
      await client.close();
    }
    const readOnly = new Client({ name: 'holds-check-ro', version: '1.0.0' });
    await readOnly.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${reviewer.key}` } } }));
    try {
      assert.ok(!(await readOnly.listTools()).tools.some((tool) => tool.name === 'check_message'));
    } finally {
      await readOnly.close();
    }
  });
});

describe('release, cancel, expiry', () => {
  test('release: an agent key lacks `review` (403); a reviewer queues it (200 queued), it is sent, audited with the key; again: 409 NOT_HELD', async () => {
    const held = (await send(careful, { to: ['release@remote.test'] })).body;
    expectError(await t.api('POST', `/messages/${held.id}/release`, {}, { key: agent.key }), 403, 'INSUFFICIENT_SCOPE');
    // The agent follows its held send by id (held inbound mail is what stays hidden from it).
    const followed = await t.api('GET', `/messages/${held.id}`, undefined, { key: agent.key });
    assert.deepEqual([followed.status, followed.body.status], [200, 'held']);
    const released = await t.api('POST', `/messages/${held.id}/release`, {}, { key: reviewer.key });
    assert.equal(released.status, 200, released.text);
    assert.equal(released.body.status, 'queued');
    assert.equal(released.body.recipients[0].status, 'queued');
    // The hold stays on the message as a record.
    assert.deepEqual(codes(released.body), ['first_contact']);
    await reaches(held.id, 'sent');
    assert.equal(rig.mx.attempts('release@remote.test'), 1);
    const [entry] = await auditOf('message.released', held.id);
    assert.deepEqual(entry!.actor, { type: 'key', id: reviewer.id });
    expectError(await t.api('POST', `/messages/${held.id}/release`, {}, { key: reviewer.key }), 409, 'NOT_HELD');
    // Mail was exchanged now: the next send to that address is no first contact.
    assert.equal((await send(careful, { to: ['release@remote.test'] })).body.status, 'queued');
  });

  test("release of what is not held or not there: 409 NOT_HELD for a sent or an inbound message, 404 for another account's or none", async () => {
    const sent = (await send(plain, { to: ['x1@remote.test'] })).body;
    expectError(await t.api('POST', `/messages/${sent.id}/release`, {}, { key: reviewer.key }), 409, 'NOT_HELD');
    const inbound = ((await t.api('GET', `/inboxes/${careful.id}/messages?direction=inbound`)).body.data as any[])[0];
    expectError(await t.api('POST', `/messages/${inbound.id}/release`, {}, { key: reviewer.key }), 409, 'NOT_HELD');
    expectError(await t.api('POST', '/messages/msg_00000000000000000000000000/release', {}, { key: reviewer.key }), 404, 'MESSAGE_NOT_FOUND');
    const held = (await send(strict, { to: ['x2@remote.test'] })).body;
    const other = await t.newAccount('other');
    expectError(await t.api('POST', `/messages/${held.id}/release`, {}, { key: other.key }), 404, 'MESSAGE_NOT_FOUND');
    assert.equal((await message(held.id)).status, 'held');
  });

  test('release re-reads the suppression list: an address suppressed meanwhile is 422 RECIPIENTS_SUPPRESSED and the send stays held', async () => {
    const held = (await send(strict, { to: ['gone@remote.test'] })).body;
    assert.equal((await t.api('POST', '/suppressions', { address: 'gone@remote.test' })).status, 201);
    expectError(await t.api('POST', `/messages/${held.id}/release`, {}, { key: reviewer.key }), 422, 'RECIPIENTS_SUPPRESSED');
    assert.equal((await message(held.id)).status, 'held');
  });

  test("cancel: a held send becomes canceled (the agent's own key may), message.canceled, audited with the key; release then: 409 NOT_HELD", async () => {
    const held = (await send(strict, { to: ['cancel@remote.test'] })).body;
    const res = await t.api('POST', `/messages/${held.id}/cancel`, {}, { key: agent.key });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.status, 'canceled');
    assert.equal(res.body.recipients[0].status, 'canceled');
    assert.equal((await eventsOf('message.canceled', held.id)).length, 1);
    const [entry] = await auditOf('message.canceled', held.id);
    assert.deepEqual([entry!.actor, entry!.detail.was], [{ type: 'key', id: agent.id }, 'held']);
    expectError(await t.api('POST', `/messages/${held.id}/release`, {}, { key: reviewer.key }), 409, 'NOT_HELD');
    expectError(await t.api('POST', `/messages/${held.id}/cancel`, {}, { key: agent.key }), 409, 'NOT_CANCELABLE');
    assert.equal(rig.mx.attempts('cancel@remote.test'), 0);
  });

  test('expiry: unreleased after [policy] hold_expiry (72h) the send is canceled by the system; a released one is left alone', async () => {
    const held = (await send(strict, { to: ['expire@remote.test'] })).body;
    const kept = (await send(strict, { to: ['kept@remote.test'] })).body;
    assert.equal((await t.api('POST', `/messages/${kept.id}/release`, {}, { key: reviewer.key })).status, 200);
    offset += 71 * 3_600_000;
    wakeJobs();
    // Not yet: the message is still held an hour before its expiry (the job is not due).
    assert.equal((await message(held.id)).status, 'held');
    offset += 2 * 3_600_000;
    wakeJobs();
    const m = await reaches(held.id, 'canceled');
    assert.match(m.recipients[0].response, /hold_expiry/);
    const [entry] = await auditOf('message.canceled', held.id);
    assert.deepEqual(entry!.actor, { type: 'system' });
    assert.equal((await eventsOf('message.canceled', held.id)).length, 1);
    assert.equal((await reaches(kept.id, 'sent')).status, 'sent');
  });

  test('a scheduled send is judged when it is made: held at once (sendAt kept); released, it waits for its time and then goes without being judged again', async () => {
    const sendAt = new Date(clock.now().getTime() + 60_000).toISOString();
    const res = await send(careful, { to: ['later@remote.test'], sendAt });
    assert.equal(res.status, 202, res.text);
    await expectHeld(res.body.id, ['first_contact'], ['later@remote.test']);
    assert.equal(res.body.sendAt, sendAt);
    const released = await t.api('POST', `/messages/${res.body.id}/release`, {}, { key: reviewer.key });
    assert.equal(released.status, 200, released.text);
    assert.deepEqual([released.body.status, released.body.recipients[0].status, released.body.hold.released], ['scheduled', 'scheduled', true]);
    offset += 120_000;
    wakeJobs();
    // Still a first contact at its time: a person released it, so it is sent.
    await reaches(res.body.id, 'sent');
  });

  test('released after its time had passed, a send held when scheduled leaves at once', async () => {
    const res = await send(careful, { to: ['late@remote.test'], sendAt: new Date(clock.now().getTime() + 60_000).toISOString() });
    assert.equal(res.body.status, 'held');
    offset += 120_000;
    wakeJobs();
    // Its first release job ran at the send time and left it held.
    await until('the release job ran', async () =>
      (await rawRows<[string]>(t.server.ctx.db, "SELECT status FROM jobs WHERE kind = 'release' AND payload LIKE ?", [`%${res.body.id}%`]))[0]?.[0] === 'done' ? true : undefined,
    );
    assert.equal((await message(res.body.id)).status, 'held');
    assert.equal((await t.api('POST', `/messages/${res.body.id}/release`, {}, { key: reviewer.key })).body.status, 'scheduled');
    wakeJobs();
    const m = await reaches(res.body.id, 'sent');
    assert.equal(m.recipients[0].status, 'sent');
    assert.equal(rig.mx.attempts('late@remote.test'), 1);
  });

  test('a scheduled send is judged again when it is due: clear when made, held at its time (the inbox turned to approval "always"), released and sent', async () => {
    const later = (await t.api('POST', '/inboxes', { address: 'later' })).body;
    const res = await send(later, { to: ['due@remote.test'], sendAt: new Date(clock.now().getTime() + 60_000).toISOString() });
    assert.equal(res.body.status, 'scheduled');
    assert.equal((await t.api('PATCH', `/inboxes/${later.id}`, { sendPolicy: { approval: 'always' } })).status, 200);
    offset += 120_000;
    wakeJobs();
    await reaches(res.body.id, 'held');
    await expectHeld(res.body.id, ['always'], ['due@remote.test']);
    assert.equal((await t.api('POST', `/messages/${res.body.id}/release`, {}, { key: reviewer.key })).body.status, 'queued');
    await reaches(res.body.id, 'sent');
  });
});

describe('every sending path against a suppressed address, a first contact and a secret', () => {
  // Originals to answer: from a suppressed sender (plain), from a friend (plain), and one that
  // copies a stranger (careful: a reply-all reaches a first contact).
  const suppressed = 'sup@remote.test';
  let fromSuppressed: string;
  let fromFriend: string;
  let withStranger: string;
  let mcp: Client;

  before(async () => {
    assert.equal((await t.api('POST', '/suppressions', { address: suppressed })).status, 201);
    const arrive = async (inbox: { id: string; address: string }, from: string, subject: string, cc?: string) => {
      await deliverMail(t.server.smtpPort, { from, to: inbox.address, cc, subject, text: 'hello?' });
      return (await until(subject, async () => ((await t.api('GET', `/inboxes/${inbox.id}/messages?direction=inbound`)).body.data as any[]).find((m) => m.subject === subject))).id as string;
    };
    fromSuppressed = await arrive(plain, suppressed, 'from sup');
    fromFriend = await arrive(plain, 'friend@remote.test', 'from friend');
    withStranger = await arrive(careful, 'friend2@remote.test', 'with stranger', 'stranger@remote.test');
    mcp = new Client({ name: 'holds-test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
  });

  after(async () => {
    await mcp?.close();
  });

  type Outcome = { refused: string } | { held: string };
  /** Each path, given an inbox, a target (or the original to answer) and a body: what happened. */
  const paths: Record<string, (inbox: { id: string; address: string }, to: string, original: string, bodyText: string) => Promise<Outcome>> = {
    api: async (inbox, to, _o, bodyText) => api(await send(inbox, { to: [to], bodyText })),
    reply: async (_i, _t, original, bodyText) => api(await t.api('POST', `/messages/${original}/reply`, { bodyText, replyAll: true }, { key: agent.key })),
    forward: async (_i, to, original, bodyText) => api(await t.api('POST', `/messages/${original}/forward`, { to: [to], bodyText }, { key: agent.key })),
    draft: async (inbox, to, _o, bodyText) => {
      const draft = await t.api('POST', `/inboxes/${inbox.id}/drafts`, { to: [to], subject: 'draft', bodyText }, { key: agent.key });
      return api(await t.api('POST', `/drafts/${draft.body.id}/send`, {}, { key: agent.key }));
    },
    scheduled: async (inbox, to, _o, bodyText) => {
      const res = await send(inbox, { to: [to], bodyText, sendAt: new Date(clock.now().getTime() + 60_000).toISOString() });
      // Judged when it is made; the test above shows it judged at its time too.
      if (res.status !== 202 || res.body.status === 'held') return api(res);
      offset += 120_000;
      wakeJobs();
      const m = await until(`${res.body.id} leaves scheduled`, async () => {
        const now = await message(res.body.id);
        return now.status === 'scheduled' ? undefined : now;
      });
      return m.status === 'held' ? { held: m.id } : { refused: m.status };
    },
    submission: async (inbox, to, _o, bodyText) => {
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: t.server.submissionPort, secure: false, ignoreTLS: true, auth: { user: inbox.address, pass: agent.key } });
      try {
        const info = await transport.sendMail({ from: inbox.address, to, subject: 'submitted', text: bodyText });
        const id = /queued as (msg_\w+)/.exec(info.response)![1];
        assert.match(info.response, /held for a person/);
        return { held: id };
      } catch (err) {
        return { refused: String((err as { responseCode?: number }).responseCode) };
      } finally {
        transport.close();
      }
    },
    mcp: async (inbox, to, _o, bodyText) => {
      const res = (await mcp.callTool({ name: 'send_message', arguments: { inboxId: inbox.id, to: [to], subject: 'via mcp', bodyText } })) as CallToolResult;
      const body = res.structuredContent as any;
      if (res.isError) return { refused: body.error.code };
      assert.equal(body.status, 'held');
      // Said in words too: held, why, and not to send it again.
      const notice = (res.content as Array<{ type: string; text: string }>).map((c) => c.text).join('\n');
      assert.match(notice, /HELD, NOT SENT/);
      assert.match(notice, new RegExp(body.hold.reasons[0].code));
      assert.match(notice, /Do not send it again/);
      return { held: body.id };
    },
  };
  function api(res: ApiResponse): Outcome {
    if (res.status !== 202) return { refused: `${res.status} ${res.body?.error?.code}` };
    assert.equal(res.body.status, 'held', res.text);
    return { held: res.body.id };
  }

  for (const [name, path] of Object.entries(paths)) {
    test(`${name}: a suppressed address is refused; a first contact and a secret are held`, async () => {
      const tag = name;
      // Suppressed: the reply answers the suppressed sender; the others address it.
      const refused = await path(plain, suppressed, fromSuppressed, 'hello');
      const expected = name === 'submission' ? '550' : name === 'mcp' ? 'RECIPIENTS_SUPPRESSED' : '422 RECIPIENTS_SUPPRESSED';
      assert.deepEqual(refused, { refused: expected });
      assert.equal(rig.mx.attempts(suppressed), 0);

      // First contact: careful inbox; the reply (reply-all) reaches the stranger copied on the original.
      const target = name === 'reply' ? 'stranger@remote.test' : `first-${tag}@remote.test`;
      const first = await path(careful, target, withStranger, 'hello');
      assert.ok('held' in first, JSON.stringify(first));
      await expectHeld(first.held, ['first_contact'], [target]);

      // A secret in the body: plain inbox, to a friend (the reply answers the friend).
      const to = name === 'reply' ? 'friend@remote.test' : `secret-${tag}@remote.test`;
      const secret = await path(plain, to, fromFriend, `the deploy key is ${TOKEN}`);
      assert.ok('held' in secret, JSON.stringify(secret));
      await expectHeld(secret.held, ['secret_detected'], [to]);
    });
  }
});

test('the suppression list is audited: suppression.added by the key (manual) or by the system (a hard bounce), suppression.removed by the key; an address already listed adds no entry', async () => {
  const address = 'audited@remote.test';
  assert.equal((await t.api('POST', '/suppressions', { address })).status, 201);
  assert.equal((await t.api('POST', '/suppressions', { address })).status, 200);
  const [added, ...again] = await auditOf('suppression.added', address);
  assert.equal(again.length, 0);
  assert.deepEqual([added!.actor, added!.detail], [{ type: 'key', id: t.keyId }, { reason: 'manual' }]);
  assert.equal((await t.api('DELETE', `/suppressions/${address}`, undefined, { key: reviewer.key })).status, 204);
  const [removed] = await auditOf('suppression.removed', address);
  assert.deepEqual(removed!.actor, { type: 'key', id: reviewer.id });

  rig.mx.script('hard@remote.test', '550');
  const res = await send(plain, { to: ['hard@remote.test'] });
  await reaches(res.body.id, 'bounced');
  const [bounce] = await auditOf('suppression.added', 'hard@remote.test');
  assert.deepEqual([bounce!.actor, bounce!.detail], [{ type: 'system' }, { reason: 'bounce', messageId: res.body.id }]);
});
