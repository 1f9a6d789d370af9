// Scheduled send end to end: `sendAt` on a send, reply and forward (400 naming the field when
// it is not ISO 8601, not in the future or more than 30 days ahead), the message `scheduled`
// until its time and then through the normal pipeline to a capturing MX with a Date of the send
// time; never early, never twice, none lost across restarts of the real server (the clock is
// injected) and across a SIGKILL of a child process; the daily limit counted on the day it is
// sent (over it then: failed with a clear response); cancel (409 NOT_CANCELABLE once past
// `scheduled`, message.canceled recorded, other accounts 404, read-only keys 403).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../../src/context.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { setDailyLimit, suspendInbox } from '../../src/domain/inboxes/inboxes.ts';
import type { JobRunner } from '../../src/jobs/runner.ts';
import { rawRows } from '../../src/store/store.ts';
import { prepareInstance, startChild, stopChild } from '../support/child-server.ts';
import { dbDigest } from '../support/db-digest.ts';
import { deliverMail } from '../support/mail.ts';
import { startOutboundRig, type OutboundRig } from '../support/outbound.ts';
import { expectError, readResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

let rig: OutboundRig;
/** The server's clock runs this far ahead of the real one. */
let offset = 0;
const clock: Clock = { now: () => new Date(Date.now() + offset) };

before(async () => {
  rig = await startOutboundRig();
});

after(async () => {
  await rig?.close();
});

const MINUTE = 60_000;
const at = (ms: number) => new Date(Date.now() + offset + ms).toISOString();
const jobsOf = (t: TestServer) => t.server.services.find((s) => s.name === 'jobs') as unknown as JobRunner;
/** Moves the clock to `ms` ahead of real time and has the runner look for due jobs now. */
function advance(t: TestServer, ms: number): void {
  offset = ms;
  jobsOf(t).wake();
}
/** Deliveries (envelope recipients: one SMTP transaction each) of this Message-ID the capturing MX has received so far. */
const copies = (messageIdHeader: string) => rig.mx.messages.filter((m) => m.raw.includes(`Message-ID: ${messageIdHeader}`)).flatMap((m) => m.rcptTo).length;
/** For a server in another process (no runner to ask): time for it to run whatever is due, before asserting that nothing happened. */
const quietly = () => new Promise((r) => setTimeout(r, 600));
/**
 * Lets the runner run whatever is due, used before asserting that nothing happened, without
 * guessing how long it takes: a claim pass started now, and every job it started, have finished
 * (a pass already under way is waited for first, as it may hold the wake).
 */
async function settled(t: TestServer): Promise<void> {
  const runner = jobsOf(t);
  await runner.idle();
  runner.wake();
  await new Promise((r) => setImmediate(r)); // the pass wake() queued runs before this
  await runner.idle();
}

async function statusOf(t: TestServer, id: string, key = t.key): Promise<any> {
  return (await t.api('GET', `/messages/${id}`, undefined, { key })).body;
}
const reaches = (t: TestServer, id: string, status: string, key = t.key) =>
  until(`${id} ${status}`, async () => {
    const m = await statusOf(t, id, key);
    return m.status === status ? m : undefined;
  });

describe('scheduling in one process', () => {
  let t: TestServer;
  let box: { id: string; address: string };
  before(async () => {
    offset = 0;
    t = await rig.start({ clock });
    box = (await t.api('POST', '/inboxes', { address: 'planner', displayName: 'Planner' })).body;
  });
  after(async () => {
    offset = 0;
    await t?.close();
  });

  test('sendAt that is not ISO 8601 with a zone, not in the future or over 30 days ahead: 400 naming sendAt on send, reply and forward', async () => {
    const original = await deliverMail(t.server.smtpPort, { from: 'a@remote.test', to: box.address, subject: 'q', text: 'x' });
    const before = await dbDigest(t.server.ctx);
    const bad: Array<[string, RegExp]> = [
      ['tomorrow', /ISO 8601/],
      ['2030-01-31', /ISO 8601/],
      ['2030-01-31T09:00:00', /ISO 8601/],
      ['2030-02-31T09:00:00Z', /ISO 8601/],
      ['2030-01-31T25:00:00Z', /ISO 8601/],
      ['1700000000', /ISO 8601/],
      [at(-1000), /in the future/],
      [at(31 * 24 * 60 * MINUTE), /at most 30 days ahead/],
    ];
    for (const [sendAt, why] of bad) {
      for (const [path, body] of [
        [`/inboxes/${box.id}/messages`, { to: ['b@remote.test'], subject: 's', bodyText: 'b', sendAt }],
        [`/messages/${original}/reply`, { bodyText: 'b', sendAt }],
        [`/messages/${original}/forward`, { to: ['b@remote.test'], sendAt }],
      ] as const) {
        const res = await t.api('POST', path, body);
        expectError(res, 400, 'VALIDATION_ERROR');
        assert.match(res.body.error.message, /^`sendAt`: /, `${path} ${sendAt}`);
        assert.match(res.body.error.message, why, `${path} ${sendAt}`);
      }
    }
    for (const sendAt of [42, true, {}, ['x']])
      expectError(await t.api('POST', `/inboxes/${box.id}/messages`, { to: ['b@remote.test'], subject: 's', bodyText: 'b', sendAt }), 400, 'VALIDATION_ERROR');
    assert.equal(await dbDigest(t.server.ctx), before);
  });

  test('a scheduled send waits, uncounted and unbuilt, then leaves at its time (Date: the send time) and is counted that day', async () => {
    const sendAt = at(10 * MINUTE);
    const res = await t.api('POST', `/inboxes/${box.id}/messages`, { to: ['Ann <ann@remote.test>'], cc: ['cc@remote.test'], subject: 'Later', bodyText: 'on time', sendAt });
    assert.equal(res.status, 202, res.text);
    const m = res.body;
    assert.deepEqual([m.status, m.sendAt], ['scheduled', sendAt]);
    assert.deepEqual(
      m.recipients.map((r: any) => [r.address, r.status]),
      [
        ['ann@remote.test', 'scheduled'],
        ['cc@remote.test', 'scheduled'],
      ],
    );
    assert.equal((await t.api('GET', `/inboxes/${box.id}`)).body.sendsToday, 0, 'scheduling counts nothing');
    expectError(await t.api('GET', `/messages/${m.id}/raw`), 404, 'MESSAGE_NOT_FOUND');
    assert.deepEqual(
      (await t.api('GET', `/inboxes/${box.id}/messages?status=scheduled`)).body.data.map((x: any) => x.id),
      [m.id],
    );
    assert.equal((await t.api('GET', `/messages?status=scheduled`)).body.total, 1);
    // The job in the one job table, due at sendAt.
    const [[runAt, jobStatus]] = await rawRows<[number, string]>(t.server.ctx.db, `SELECT run_at, status FROM jobs WHERE kind = 'release'`);
    assert.deepEqual([runAt, jobStatus], [Date.parse(sendAt), 'queued']);

    advance(t, 9 * MINUTE);
    await settled(t);
    assert.equal(copies(m.messageIdHeader), 0, 'sent early');
    assert.equal((await statusOf(t, m.id)).status, 'scheduled');

    advance(t, 10 * MINUTE + 1000);
    const sent = await reaches(t, m.id, 'sent');
    assert.deepEqual(
      sent.recipients.map((r: any) => r.status),
      ['sent', 'sent'],
    );
    const mail = await rig.captured(m.messageIdHeader);
    assert.ok(mail.date!.getTime() >= Date.parse(sendAt) - 1000, `Date ${mail.date?.toISOString()} is before ${sendAt}`);
    assert.deepEqual(
      [mail.to].flat().flatMap((a) => a!.value.map((v) => [v.name, v.address])),
      [['Ann', 'ann@remote.test']],
    );
    assert.equal(mail.text?.trim(), 'on time');
    assert.ok(mail.headers.get('dkim-signature'), 'signed at the send time');
    assert.equal((await t.api('GET', `/inboxes/${box.id}`)).body.sendsToday, 1);
    // Built at the release and kept in the database, committed with the release (Blobs.rowKey).
    const raw = await t.api('GET', `/messages/${m.id}/raw`);
    assert.equal(raw.status, 200);
    const [[rawPath, size]] = await rawRows<[string, number]>(t.server.ctx.db, 'SELECT raw_path, size FROM messages WHERE id = ?', [m.id]);
    assert.equal(rawPath, `raw/rows/${m.id}.eml`);
    assert.equal(Number((await rawRows<[number]>(t.server.ctx.db, 'SELECT sum(length(data)) FROM blob_chunks WHERE key = ?', [rawPath]))[0][0]), Number(size));
    await settled(t);
    assert.equal(copies(m.messageIdHeader), 2, 'one delivery per recipient, no more');
  });

  test('cancel: scheduled → canceled with message.canceled, the job retired, never sent; 409 NOT_CANCELABLE after; 404 and 403 for others', async () => {
    offset = 0;
    const sendAt = at(5 * MINUTE);
    const m = (await t.api('POST', `/inboxes/${box.id}/messages`, { to: ['bob@remote.test'], subject: 'Maybe', bodyText: 'x', sendAt })).body;
    const other = await t.newAccount('other');
    const ro = (await createApiKey(t.server.ctx, t.accountId, { name: 'reader', readOnly: true })).key;
    const before = await dbDigest(t.server.ctx);
    expectError(await t.api('POST', `/messages/${m.id}/cancel`, undefined, { key: other.key }), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('POST', `/messages/${m.id}/cancel`, undefined, { key: ro }), 403, 'FORBIDDEN');
    expectError(await t.api('POST', '/messages/msg_unknown/cancel'), 404, 'MESSAGE_NOT_FOUND');
    assert.equal(await dbDigest(t.server.ctx), before);

    const canceled = await t.api('POST', `/messages/${m.id}/cancel`);
    assert.equal(canceled.status, 200, canceled.text);
    assert.equal(canceled.body.status, 'canceled');
    assert.deepEqual(
      canceled.body.recipients.map((r: any) => r.status),
      ['canceled'],
    );
    const again = await t.api('POST', `/messages/${m.id}/cancel`);
    expectError(again, 409, 'NOT_CANCELABLE');
    assert.match(again.body.error.message, /is canceled/);
    const events = (await t.api('GET', '/events?types=message.canceled')).body.data;
    assert.deepEqual(
      events.map((e: any) => [e.type, e.data.id, e.data.status]),
      [['message.canceled', m.id, 'canceled']],
    );
    const [[jobStatus, jobError]] = await rawRows<[string, string]>(t.server.ctx.db, `SELECT status, last_error FROM jobs WHERE kind = 'release' AND json_extract(payload, '$.messageId') = ?`, [m.id]);
    assert.equal(jobStatus, 'done');
    assert.match(jobError, /canceled/);

    advance(t, 6 * MINUTE);
    await settled(t);
    assert.equal((await statusOf(t, m.id)).status, 'canceled');
    assert.equal(copies(m.messageIdHeader), 0);

    // A message sent at once is not cancelable (queued, sending or later), nor is an inbound one.
    const now = (await t.api('POST', `/inboxes/${box.id}/messages`, { to: ['bob@remote.test'], subject: 'Now', bodyText: 'x' })).body;
    await reaches(t, now.id, 'sent');
    const late = await t.api('POST', `/messages/${now.id}/cancel`);
    expectError(late, 409, 'NOT_CANCELABLE');
    assert.match(late.body.error.message, /is sent/);
    const inbound = await deliverMail(t.server.smtpPort, { from: 'a@remote.test', to: box.address, subject: 'in', text: 'x' });
    expectError(await t.api('POST', `/messages/${inbound}/cancel`), 409, 'NOT_CANCELABLE');
  });

  test('the daily limit counts on the day of sending: scheduling is not refused by it, a release over it fails with a clear response', async () => {
    const limited = (await t.api('POST', '/inboxes', { address: 'limited' })).body;
    await setDailyLimit(t.server.ctx, limited.id, 1);
    const sendAt = at(2 * MINUTE);
    const first = (await t.api('POST', `/inboxes/${limited.id}/messages`, { to: ['c@remote.test'], subject: 'one', bodyText: 'x', sendAt })).body;
    const second = (await t.api('POST', `/inboxes/${limited.id}/messages`, { to: ['d@remote.test'], subject: 'two', bodyText: 'x', sendAt: at(4 * MINUTE) })).body;
    assert.deepEqual([first.status, second.status], ['scheduled', 'scheduled']);
    const start = offset;
    advance(t, start + 3 * MINUTE);
    await reaches(t, first.id, 'sent');
    advance(t, start + 5 * MINUTE);
    const failed = await reaches(t, second.id, 'failed');
    assert.equal(failed.recipients[0].status, 'failed');
    assert.match(failed.recipients[0].response, /daily send limit of 1 on \d{4}-\d{2}-\d{2} \(UTC\)/);
    assert.equal(copies(second.messageIdHeader), 0);
    const events = (await t.api('GET', `/events?types=message.bounced&inboxId=${limited.id}`)).body.data;
    assert.deepEqual(
      events.map((e: any) => [e.data.id, e.data.status]),
      [[second.id, 'failed']],
    );
    // A send now is refused at once, as always.
    expectError(await t.api('POST', `/inboxes/${limited.id}/messages`, { to: ['e@remote.test'], subject: 'three', bodyText: 'x' }), 429, 'DAILY_SEND_LIMIT_EXCEEDED');
  });

  test('a suspended inbox cannot schedule (403), and a message whose inbox is suspended at its time fails', async () => {
    const held = (await t.api('POST', '/inboxes', { address: 'held' })).body;
    const m = (await t.api('POST', `/inboxes/${held.id}/messages`, { to: ['f@remote.test'], subject: 'held', bodyText: 'x', sendAt: at(MINUTE) })).body;
    await suspendInbox(t.server.ctx, held.id);
    expectError(await t.api('POST', `/inboxes/${held.id}/messages`, { to: ['f@remote.test'], subject: 'no', bodyText: 'x', sendAt: at(MINUTE) }), 403, 'INBOX_SUSPENDED');
    advance(t, offset + 2 * MINUTE);
    const failed = await reaches(t, m.id, 'failed');
    assert.match(failed.recipients[0].response, /suspended/);
    assert.equal(copies(m.messageIdHeader), 0);
  });

  test('a send list added after scheduling is applied at the send time: refused recipients fail, the others go; none left: nothing counted', async () => {
    const guarded = (await t.api('POST', '/inboxes', { address: 'guarded-later' })).body;
    const both = (await t.api('POST', `/inboxes/${guarded.id}/messages`, { to: ['ok@remote.test', 'no@remote.test'], subject: 'two', bodyText: 'x', sendAt: at(MINUTE) })).body;
    const only = (await t.api('POST', `/inboxes/${guarded.id}/messages`, { to: ['no@remote.test'], subject: 'one', bodyText: 'x', sendAt: at(MINUTE) })).body;
    const entry = (await t.api('POST', '/lists', { direction: 'send', kind: 'block', entry: 'no@remote.test', inboxId: guarded.id })).body;
    advance(t, offset + 2 * MINUTE);
    const mixed = await until('both settled', async () => {
      const m = await statusOf(t, both.id);
      return ['sent', 'failed'].includes(m.recipients[0].status) && m.recipients[1].status === 'failed' ? m : undefined;
    });
    assert.deepEqual(
      mixed.recipients.map((r: any) => [r.address, r.status]),
      [
        ['ok@remote.test', 'sent'],
        ['no@remote.test', 'failed'],
      ],
    );
    assert.match(mixed.recipients[1].response, /send allow\/block lists/);
    assert.equal(mixed.status, 'failed', 'the worst outcome names the message');
    const none = await reaches(t, only.id, 'failed');
    assert.match(none.recipients[0].response, /send allow\/block lists/);
    assert.equal((await t.api('GET', `/inboxes/${guarded.id}`)).body.sendsToday, 1, 'only the message that went out counts');
    const captured = rig.mx.messages.filter((m) => m.raw.includes(`Message-ID: ${both.messageIdHeader}`)).flatMap((m) => m.rcptTo);
    assert.deepEqual(captured, ['ok@remote.test']);
    await t.api('DELETE', `/lists/${entry.id}`);
  });

  test('a message due in a moment leaves on time without anything waking the runner', async () => {
    const sendAt = at(1500);
    const m = (await t.api('POST', `/inboxes/${box.id}/messages`, { to: ['kim@remote.test'], subject: 'Soon', bodyText: 'x', sendAt })).body;
    assert.equal(m.status, 'scheduled');
    const sent = await until('sent on time', async () => ((await statusOf(t, m.id)).status === 'sent' ? Date.now() + offset : undefined), 15_000);
    assert.ok(sent >= Date.parse(sendAt), 'sent early');
    // The runner sleeps up to 30 s when nothing wakes it: well under that means it was woken.
    assert.ok(sent - Date.parse(sendAt) < 12_000, `sent ${sent - Date.parse(sendAt)} ms late`);
  });

  test('a scheduled reply keeps its threading headers; a scheduled forward carries the attachments', async () => {
    const original = await deliverMail(t.server.smtpPort, {
      from: 'gil@remote.test',
      to: box.address,
      subject: 'Plan',
      text: 'thoughts?',
      messageId: '<plan-1@remote.test>',
      attachments: [{ filename: 'plan.txt', content: 'the plan' }],
    });
    const reply = (await t.api('POST', `/messages/${original}/reply`, { bodyText: 'later', sendAt: at(MINUTE) })).body;
    const forward = (await t.api('POST', `/messages/${original}/forward`, { to: ['hal@remote.test'], bodyText: 'fyi', sendAt: at(MINUTE) })).body;
    assert.deepEqual([reply.status, forward.status], ['scheduled', 'scheduled']);
    // The original may go meanwhile: the forward's attachment rows are its own.
    assert.equal((await t.api('DELETE', `/messages/${original}`)).status, 204);
    advance(t, offset + 2 * MINUTE);
    const r = await rig.captured(reply.messageIdHeader);
    assert.equal(r.subject, 'Re: Plan');
    assert.equal(r.inReplyTo, '<plan-1@remote.test>');
    const f = await rig.captured(forward.messageIdHeader);
    assert.equal(f.subject, 'Fwd: Plan');
    assert.deepEqual(
      f.attachments.map((a) => [a.filename, a.content.toString()]),
      [['plan.txt', 'the plan']],
    );
    await reaches(t, forward.id, 'sent');
  });
});

describe('restarts and crashes', () => {
  test('across restarts of the server: not sent before its time, sent once at its time, not again after', async () => {
    offset = 0;
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-scheduled-'));
    try {
      let t = await rig.start({ clock, dataDir });
      const key = t.key;
      const box = (await t.api('POST', '/inboxes', { address: 'restart' })).body;
      const sendAt = at(60 * MINUTE);
      const m = (await t.api('POST', `/inboxes/${box.id}/messages`, { to: ['ivy@remote.test'], subject: 'Across restarts', bodyText: 'x', sendAt })).body;
      assert.equal(m.status, 'scheduled');
      await t.close();

      // Half-way: a fresh process recovers the job table and still waits.
      offset = 30 * MINUTE;
      t = await rig.start({ clock, dataDir });
      await settled(t);
      assert.equal((await statusOf(t, m.id, key)).status, 'scheduled');
      assert.equal(copies(m.messageIdHeader), 0, 'sent early after a restart');
      await t.close();

      // Past its time while the server was down: sent at the next start, once.
      offset = 61 * MINUTE;
      t = await rig.start({ clock, dataDir });
      await reaches(t, m.id, 'sent', key);
      assert.equal(copies(m.messageIdHeader), 1);
      await t.close();

      offset = 120 * MINUTE;
      t = await rig.start({ clock, dataDir });
      await settled(t);
      assert.equal(copies(m.messageIdHeader), 1, 'sent twice');
      assert.equal((await statusOf(t, m.id, key)).status, 'sent');
      await t.close();
    } finally {
      offset = 0;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('SIGKILL of the real process while a send is scheduled: none lost, none twice', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-scheduled-kill-'));
    const inst = await prepareInstance(
      dir,
      `[outbound]\nmode = "email"\nmx_port = ${rig.mx.port}\nretry_schedule = ["1s"]\n[dns]\nservers = [${JSON.stringify(rig.dns.server)}]\ntimeout = "1s"\n[limits]\nrequests_per_minute = 100000`,
    );
    const api = async (method: string, path: string, body?: unknown) =>
      readResponse(
        await fetch(inst.httpUrl + path, { method, headers: { authorization: `Bearer ${inst.key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) }),
      );
    let server = await startChild(inst);
    try {
      const box = (await api('POST', '/inboxes', { address: 'killed' })).body;
      const sendAt = new Date(Date.now() + 3000).toISOString();
      const m = (await api('POST', `/inboxes/${box.id}/messages`, { to: ['jay@remote.test'], subject: 'Survives', bodyText: 'x', sendAt })).body;
      assert.equal(m.status, 'scheduled');
      await stopChild(server, 'SIGKILL');
      // Down past its time.
      await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(sendAt) - Date.now()) + 500));
      assert.equal(copies(m.messageIdHeader), 0);
      server = await startChild(inst);
      await until('sent after the restart', async () => ((await api('GET', `/messages/${m.id}`)).body.status === 'sent' ? true : undefined));
      await stopChild(server, 'SIGKILL');
      server = await startChild(inst);
      await quietly();
      assert.equal(copies(m.messageIdHeader), 1);
      assert.equal((await api('GET', `/messages/${m.id}`)).body.status, 'sent');
    } finally {
      await stopChild(server, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
