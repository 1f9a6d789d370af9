// Realtime: GET /events (filters, cursor, limits, the webhook envelope), GET /events/stream
// (Server-Sent Events over a real socket: live delivery, filters, resume with Last-Event-ID or
// `after` across a disconnect and a restart, keep-alive comments, a short request timeout, a
// client that stops reading is dropped with a final event), and the long-poll of
// GET /inboxes/{id}/messages?after=&wait=. Another account's events are never visible.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EventType } from '../../src/domain/events/events.ts';
import { STREAM_SETTINGS } from '../../src/http/sse.ts';
import { emitEvent } from '../support/events.ts';
import { openStream, parseBlock, type Frame } from '../support/sse.ts';
import { deliverMail } from '../support/mail.ts';
import { startReceiver } from '../support/receiver.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { silentLogger } from '../../src/log.ts';

/** The error answer of a stream request (read whole, like any API error). */
async function streamError(t: TestServer, query: string, headers: Record<string, string> = {}, key: string | null = t.key) {
  return t.api('GET', `/events/stream${query}`, undefined, { key, headers });
}

const emit = (t: TestServer, type: EventType, data?: unknown, accountId = t.accountId) => emitEvent(t.server.ctx, accountId, type, data);
const envelope = (e: { id: string; type: string; createdAt: string; data: unknown }) => ({ id: e.id, type: e.type, createdAt: e.createdAt, data: e.data });

describe('GET /events', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ limits: { requests_per_minute: 100_000 } });
  });
  after(async () => t?.close());

  test('oldest first, the webhook envelope, after as a cursor, types, inboxId, limit; another account sees none of it', async () => {
    const other = await t.newAccount('other');
    const inboxA = (await t.api('POST', '/inboxes', { address: 'ev-a' })).body;
    const inboxB = (await t.api('POST', '/inboxes', { address: 'ev-b' })).body;
    const theirs = (await t.api('POST', '/inboxes', { address: 'ev-theirs' }, { key: other.key })).body;
    const e1 = await emit(t, 'message.received', { id: 'msg_ev1', inboxId: inboxA.id, subject: 'one' });
    await emit(t, 'message.received', { id: 'msg_theirs1', inboxId: theirs.id }, other.accountId);
    const e2 = await emit(t, 'domain.verified', { id: 'dom_1', domain: 'x.example' });
    const e3 = await emit(t, 'message.sent', { id: 'msg_ev3', inboxId: inboxB.id, subject: 'three' });
    const e4 = await emit(t, 'message.bounced', { id: 'msg_ev4', inboxId: inboxA.id, subject: 'four' });

    const all = await t.api('GET', '/events');
    assert.equal(all.status, 200, all.text);
    assert.deepEqual(Object.keys(all.body), ['data']);
    assert.deepEqual(all.body.data, [e1, e2, e3, e4].map(envelope));

    assert.deepEqual(
      (await t.api('GET', `/events?after=${e1.id}`)).body.data.map((e: any) => e.id),
      [e2.id, e3.id, e4.id],
    );
    assert.deepEqual((await t.api('GET', `/events?after=${e4.id}`)).body.data, []);
    assert.deepEqual(
      (await t.api('GET', '/events?limit=2')).body.data.map((e: any) => e.id),
      [e1.id, e2.id],
    );
    assert.deepEqual(
      (await t.api('GET', `/events?limit=2&after=${e2.id}`)).body.data.map((e: any) => e.id),
      [e3.id, e4.id],
    );
    assert.deepEqual(
      (await t.api('GET', '/events?types=message.sent,domain.verified')).body.data.map((e: any) => e.id),
      [e2.id, e3.id],
    );
    assert.deepEqual((await t.api('GET', '/events?types=message.complained')).body.data, []);
    assert.deepEqual(
      (await t.api('GET', `/events?inboxId=${inboxA.id}`)).body.data.map((e: any) => e.id),
      [e1.id, e4.id],
    );
    assert.deepEqual(
      (await t.api('GET', `/events?inboxId=${inboxA.id}&types=message.bounced`)).body.data.map((e: any) => e.id),
      [e4.id],
    );
    assert.deepEqual(
      (await t.api('GET', `/events?inboxId=${inboxA.id}&after=${e1.id}`)).body.data.map((e: any) => e.id),
      [e4.id],
    );
    // An event id that no longer exists (swept, or its message deleted) is still a cursor.
    assert.deepEqual((await t.api('GET', `/events?after=evt_00000000000000000000000000`)).body.data.length, 4);

    // The other account: only its own event; our inbox is not found for it.
    const theirsList = (await t.api('GET', '/events', undefined, { key: other.key })).body.data;
    assert.deepEqual(
      theirsList.map((e: any) => e.data.id),
      ['msg_theirs1'],
    );
    expectError(await t.api('GET', `/events?inboxId=${inboxA.id}`, undefined, { key: other.key }), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('GET', `/events?inboxId=${theirs.id}`), 404, 'INBOX_NOT_FOUND');
  });

  test('limit defaults to 100 and is at most 1000; bad parameters are 400 VALIDATION_ERROR naming the parameter', async () => {
    const fresh = await t.newAccount('many');
    for (let i = 0; i < 105; i++) await emit(t, 'domain.verified', { id: `dom_${i}` }, fresh.accountId);
    const page = (await t.api('GET', '/events', undefined, { key: fresh.key })).body.data;
    assert.equal(page.length, 100);
    assert.deepEqual(
      page.map((e: any) => e.data.id),
      Array.from({ length: 100 }, (_v, i) => `dom_${i}`),
    );
    assert.equal((await t.api('GET', '/events?limit=1000', undefined, { key: fresh.key })).body.data.length, 105);

    for (const [query, field] of [
      ['limit=1001', 'limit'],
      ['limit=0', 'limit'],
      ['limit=abc', 'limit'],
      ['types=message.opened', 'types'],
      ['types=message.received,nope', 'types'],
      ['types=', 'types'],
      ['after=msg_00000000000000000000000000', 'after'],
      ['after=evt_x', 'after'],
      ['inboxId=', 'inboxId'],
    ]) {
      const res = await t.api('GET', `/events?${query}`);
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, new RegExp(`\`${field}\``), query);
    }
    expectError(await t.api('GET', '/events?inboxId=inb_nope'), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('GET', '/events', undefined, { key: null }), 401, 'UNAUTHORIZED');
  });

  test('mail received over SMTP: the message.received event names its inbox and is the envelope the webhook got', async () => {
    const rx = await startReceiver(200);
    try {
      const inbox = (await t.api('POST', '/inboxes', { address: 'ev-smtp' })).body;
      await t.api('POST', '/webhooks', { url: `${rx.url}/ev`, events: ['message.received'] });
      const id = await deliverMail(t.server.smtpPort, { from: 'bob@example.org', to: inbox.address, subject: 'Realtime', text: 'hi' });
      const [hook] = await rx.waitFor(1);
      const events = (await t.api('GET', `/events?inboxId=${inbox.id}`)).body.data;
      assert.equal(events.length, 1);
      assert.equal(events[0].data.id, id);
      assert.equal(events[0].data.inboxId, inbox.id);
      const { webhookId: _w, ...sameAsWebhook } = hook.json;
      // The webhook has the message whole; the list says its bodies were not cut.
      assert.deepEqual(events[0], { ...sameAsWebhook, data: { ...sameAsWebhook.data, bodyTruncated: false } });
    } finally {
      await rx.close();
    }
  });
});

describe('GET /events/stream', () => {
  let t: TestServer;
  const dropped: unknown[] = [];
  before(async () => {
    const log = { ...silentLogger, info: (msg: string, fields?: unknown) => void (msg === 'event stream dropped' && dropped.push(fields)) };
    t = await startTestServer({ limits: { requests_per_minute: 100_000, stream_stall_timeout: '1s' } }, { log });
  });
  after(async () => t?.close());

  test('live events as id/event/data, filters, only the own account; resume with Last-Event-ID or after loses and repeats nothing', async () => {
    const other = await t.newAccount('other');
    const inbox = (await t.api('POST', '/inboxes', { address: 'st-a' })).body;
    const before = await emit(t, 'domain.verified', { id: 'dom_before' });

    const s = await openStream(t);
    assert.equal(s.status, 200);
    assert.match(s.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(s.headers.get('cache-control'), 'no-cache, no-transform');
    await until('stream open', () => (s.comments.includes('connected') ? true : undefined));
    const onlyReceived = await openStream(t, `?types=message.received&inboxId=${inbox.id}`);
    const theirs = await openStream(t, '', { key: other.key });

    await emit(t, 'message.received', { id: 'msg_other_acct', subject: 'not yours' }, other.accountId);
    const e1 = await emit(t, 'message.received', { id: 'msg_st1', inboxId: inbox.id, subject: 'first' });
    const e2 = await emit(t, 'message.sent', { id: 'msg_st2', inboxId: inbox.id });
    const e3 = await emit(t, 'domain.verified', { id: 'dom_st3' });
    const frames = await s.waitFrames(3);
    // Only what came after the stream opened; never the other account's event.
    assert.deepEqual(
      frames,
      [e1, e2, e3].map((e) => ({ id: e.id, event: e.type, data: envelope(e) })),
    );
    assert.ok(!frames.some((f) => f.id === before.id));
    assert.deepEqual(
      (await onlyReceived.waitFrames(1)).map((f) => f.id),
      [e1.id],
    );
    assert.deepEqual(
      (await theirs.waitFrames(1)).map((f) => f.data.data.id),
      ['msg_other_acct'],
    );

    // Disconnect, miss three events, reconnect with Last-Event-ID: exactly those three, then live.
    s.close();
    const missed = [
      await emit(t, 'message.bounced', { id: 'msg_m1', inboxId: inbox.id }),
      await emit(t, 'domain.verified', { id: 'dom_m2' }),
      await emit(t, 'message.complained', { id: 'msg_m3', inboxId: inbox.id }),
    ];
    const resumed = await openStream(t, `?after=${e1.id}`, { headers: { 'Last-Event-ID': e3.id } });
    assert.deepEqual(
      (await resumed.waitFrames(3)).map((f) => f.id),
      missed.map((e) => e.id),
      'Last-Event-ID wins over after',
    );
    const live = await emit(t, 'message.sent', { id: 'msg_live', inboxId: inbox.id });
    assert.deepEqual(
      (await resumed.waitFrames(4)).map((f) => f.id),
      [...missed, live].map((e) => e.id),
    );
    // `after` alone resumes the same way.
    const fromAfter = await openStream(t, `?after=${e2.id}&types=message.bounced,message.complained,domain.verified`);
    assert.deepEqual(
      (await fromAfter.waitFrames(4)).map((f) => f.id),
      [e3, ...missed].map((e) => e.id),
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(fromAfter.frames.length, 4, 'nothing repeated, the filtered-out message.sent not sent');
    for (const x of [resumed, fromAfter, onlyReceived, theirs]) x.close();
  });

  test("error paths: 401, 400 for bad filters and a bad Last-Event-ID, 404 for another account's inbox", async () => {
    const other = await t.newAccount('other2');
    const theirs = (await t.api('POST', '/inboxes', { address: 'st-theirs' }, { key: other.key })).body;
    expectError(await streamError(t, '', {}, null), 401, 'UNAUTHORIZED');
    expectError(await streamError(t, '?types=message.nope'), 400, 'VALIDATION_ERROR');
    expectError(await streamError(t, '?limit=5000'), 400, 'VALIDATION_ERROR');
    expectError(await streamError(t, '?after=nope'), 400, 'VALIDATION_ERROR');
    const badHeader = await streamError(t, '', { 'Last-Event-ID': 'not-an-id' });
    expectError(badHeader, 400, 'VALIDATION_ERROR');
    assert.match(badHeader.body.error.message, /Last-Event-ID/);
    expectError(await streamError(t, `?inboxId=${theirs.id}`), 404, 'INBOX_NOT_FOUND');
    expectError(await streamError(t, '?inboxId=inb_nope'), 404, 'INBOX_NOT_FOUND');
  });

  test('keep-alive comments while idle', async () => {
    const saved = STREAM_SETTINGS.keepAliveMs;
    STREAM_SETTINGS.keepAliveMs = 150;
    try {
      const s = await openStream(t);
      await until('two keep-alive comments', () => (s.comments.filter((c) => c === 'keep-alive').length >= 2 ? true : undefined), 5000);
      assert.equal(s.frames.length, 0);
      s.close();
    } finally {
      STREAM_SETTINGS.keepAliveMs = saved;
    }
  });

  test('a client that stops reading is dropped with a final event naming the last event written; it resumes from there', async () => {
    const saved = { ...STREAM_SETTINGS };
    STREAM_SETTINGS.dropGraceMs = 60_000;
    const acc = await t.newAccount('slow');
    try {
      // A real HTTP client whose response is paused: the kernel's buffers fill, then the server's.
      let res!: IncomingMessage;
      await new Promise<void>((resolve, reject) => {
        const req = httpGet(`${t.url}/events/stream`, { headers: { authorization: `Bearer ${acc.key}` } }, (r) => {
          res = r;
          r.pause();
          resolve();
        });
        req.on('error', reject);
      });
      assert.equal(res.statusCode, 200);
      const big = 'x'.repeat(64 * 1024);
      const emitted: string[] = [];
      for (let i = 0; i < 320; i++) emitted.push((await emit(t, 'domain.verified', { id: `dom_${i}`, pad: big }, acc.accountId)).id);
      // Let the stream write until it gives up on this client (the server logs it).
      await until('the stream dropped the client', () => (dropped.length ? true : undefined), 20_000);
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      await new Promise<void>((resolve) => {
        res.on('end', resolve);
        res.on('close', resolve);
        res.resume();
      });
      const frames: Frame[] = [];
      for (const block of Buffer.concat(chunks).toString('utf8').split('\n\n')) parseBlock(block, frames, []);
      const last = frames.at(-1)!;
      assert.equal(last.event, 'dropped', 'the stream ended with event: dropped');
      assert.equal(last.id, undefined);
      const got = frames.slice(0, -1).map((f) => f.id);
      assert.ok(got.length > 0 && got.length < emitted.length, `some but not all written (${got.length} of ${emitted.length})`);
      assert.deepEqual(got, emitted.slice(0, got.length), 'in order, none skipped');
      assert.equal(last.data.lastEventId, got.at(-1));
      assert.match(last.data.reason, /Last-Event-ID/);
      // What the server held for this client stayed within the bound: each frame was counted first.
      const { buffered } = dropped[0] as { buffered: number };
      assert.ok(buffered <= t.config.limits.stream_buffer_bytes, `held ${buffered} bytes`);

      // Resuming from the dropped event's id delivers the rest, exactly once.
      const resumed = await openStream(t, '', { key: acc.key, headers: { 'Last-Event-ID': last.data.lastEventId } });
      const rest = await resumed.waitFrames(emitted.length - got.length, 20_000);
      assert.deepEqual([...got, ...rest.map((f) => f.id)], emitted);
      resumed.close();
    } finally {
      Object.assign(STREAM_SETTINGS, saved);
    }
  });
});

describe('GET /events/stream: timeouts and restarts', () => {
  test('a stream outlives http.request_timeout (which covers receiving the request only)', async () => {
    const t = await startTestServer({ http: { request_timeout: '1s', headers_timeout: '1s' } });
    try {
      const s = await openStream(t);
      await new Promise((r) => setTimeout(r, 2500));
      const e = await emit(t, 'domain.verified', { id: 'dom_late' });
      assert.deepEqual(
        (await s.waitFrames(1)).map((f) => f.id),
        [e.id],
      );
      s.close();
    } finally {
      await t.close();
    }
  });

  test('resume across a restart: the events missed while the server was down arrive, once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-events-'));
    let t = await startTestServer({}, { dataDir });
    const { key, accountId } = t;
    try {
      const s = await openStream(t);
      const e1 = await emit(t, 'domain.verified', { id: 'dom_r1' });
      const [f1] = await s.waitFrames(1);
      assert.equal(f1.id, e1.id);
      await t.close();
      // The server stopping ends the stream (it does not hold shutdown up).
      await s.ended;
      t = await startTestServer({}, { dataDir });
      const e2 = await emit(t, 'domain.verified', { id: 'dom_r2' }, accountId);
      const e3 = await emit(t, 'domain.verified', { id: 'dom_r3' }, accountId);
      const again = await openStream(t, '', { key, headers: { 'Last-Event-ID': f1.id! } });
      assert.deepEqual(
        (await again.waitFrames(2)).map((f) => f.id),
        [e2.id, e3.id],
      );
      const e4 = await emit(t, 'domain.verified', { id: 'dom_r4' }, accountId);
      assert.deepEqual(
        (await again.waitFrames(3)).map((f) => f.id),
        [e2.id, e3.id, e4.id],
      );
      again.close();
    } finally {
      await t.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('GET /inboxes/{id}/messages?after=&wait= (long-poll)', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ limits: { requests_per_minute: 100_000 } });
  });
  after(async () => t?.close());

  const list = (inboxId: string, query: string, key?: string) => t.api('GET', `/inboxes/${inboxId}/messages?${query}`, undefined, key ? { key } : {});

  test('answers as soon as a newer message arrives; with one already there at once; else empty after wait', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'lp' })).body;
    const m1 = await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'one', text: '1' });

    const none = await list(inbox.id, `after=${m1}`);
    assert.equal(none.status, 200, none.text);
    assert.deepEqual([none.body.data, none.body.total], [[], 0]);

    // Waiting: a message arriving over SMTP ends the wait.
    const started = Date.now();
    const waiting = list(inbox.id, `after=${m1}&wait=30`);
    await new Promise((r) => setTimeout(r, 300));
    const m2 = await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'two', text: '2' });
    const woke = await waiting;
    assert.equal(woke.status, 200, woke.text);
    assert.deepEqual(
      woke.body.data.map((m: any) => m.id),
      [m2],
    );
    assert.equal(woke.body.total, 1);
    assert.ok(Date.now() - started < 20_000, 'answered before the wait ran out');

    // Already newer: at once, newest first.
    const m3 = await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'three', text: '3' });
    assert.deepEqual(
      (await list(inbox.id, `after=${m1}&wait=30`)).body.data.map((m: any) => m.id),
      [m3, m2],
    );
    // Without after, wait only matters for an empty list: this one is not.
    assert.equal((await list(inbox.id, 'wait=30')).body.data.length, 3);

    // Nothing newer: empty data once the wait is over.
    const empty = await list(inbox.id, `after=${m3}&wait=1`);
    assert.equal(empty.status, 200);
    assert.deepEqual([empty.body.data, empty.body.total], [[], 0]);

    // A message sent from the inbox (no event until its outcome) also ends a wait.
    const waitingOut = list(inbox.id, `after=${m3}&wait=30`);
    await new Promise((r) => setTimeout(r, 200));
    const sent = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['someone@example.org'], subject: 'out', bodyText: 'x' });
    assert.equal(sent.status, 202, sent.text);
    assert.ok((await waitingOut).body.data.some((m: any) => m.id === sent.body.id));

    // The `after` message deleted: its id still works as the cursor.
    assert.equal((await t.api('DELETE', `/messages/${m1}`)).status, 204);
    assert.deepEqual(new Set((await list(inbox.id, `after=${m1}`)).body.data.map((m: any) => m.id)), new Set([sent.body.id, m3, m2]));
  });

  test("errors: wait above 60, negative or not a number, a bad after: 400 VALIDATION_ERROR; another account's inbox: 404 at once", async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'lp-err' })).body;
    for (const q of ['wait=61', 'wait=-1', 'wait=abc', 'wait=1.5', 'after=nope', 'after=evt_00000000000000000000000000']) {
      const res = await list(inbox.id, q);
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, new RegExp(`\`${q.split('=')[0]}\``));
    }
    assert.equal((await list(inbox.id, 'wait=0')).status, 200);
    const other = await t.newAccount('lp-other');
    const started = Date.now();
    expectError(await list(inbox.id, 'wait=30', other.key), 404, 'INBOX_NOT_FOUND');
    assert.ok(Date.now() - started < 10_000);
    // Mail to another account's inbox does not end this account's wait.
    const theirs = (await t.api('POST', '/inboxes', { address: 'lp-theirs' }, { key: other.key })).body;
    const waiting = list(inbox.id, 'wait=2');
    await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: theirs.address, subject: 'not yours', text: 'x' });
    assert.deepEqual((await waiting).body.data, []);
  });
});
