// Read state, labels and list filters over real sockets: mail received over SMTP arrives
// unread, sent mail is read; PATCH /messages/{id} and /threads/{id} change read state and
// labels (a thread: every message; it shows the union of labels and its unread count); the
// label, unread, direction and status filters on the inbox and account-wide message and thread
// lists, with the pagination envelope; validation, read-only keys and other accounts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { SendMailOptions, Transporter } from 'nodemailer';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { smtpTransport } from '../support/mail.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let transport: Transporter;
let a: { id: string; address: string };

before(async () => {
  t = await startTestServer();
  transport = smtpTransport(t.server.smtpPort);
  a = (await t.api('POST', '/inboxes', { address: 'labels-a' })).body;
  await t.api('POST', '/inboxes', { address: 'labels-b' });
});

after(async () => {
  transport?.close();
  await t?.close();
});

async function receive(mail: SendMailOptions): Promise<any> {
  const info = await transport.sendMail({ from: 'zed@example.org', to: a.address, subject: 'hello', text: 'body', ...mail });
  const id = /stored as (msg_\w+)/.exec(info.response ?? '')![1];
  return (await t.api('GET', `/messages/${id}`)).body;
}

const ids = (res: { body: { data: Array<{ id: string }> } }) => res.body.data.map((m) => m.id);
const patch = (path: string, body: unknown, key?: string) => t.api('PATCH', path, body, { key });

describe('read state and labels', () => {
  test('received mail arrives unread with no labels; sent mail is read', async () => {
    const m = await receive({ subject: 'fresh' });
    assert.equal(m.unread, true);
    assert.deepEqual(m.labels, []);
    const sent = await t.api('POST', `/inboxes/${a.id}/messages`, { to: ['x@example.net'], subject: 'out', bodyText: 'x' });
    assert.equal(sent.status, 202);
    assert.equal(sent.body.unread, false);
    assert.deepEqual(sent.body.labels, []);
    assert.equal((await t.api('GET', `/messages/${sent.body.id}`)).body.unread, false);
  });

  test('PATCH /messages/{id}: unread, addLabels, removeLabels; labels sorted, adding twice keeps one', async () => {
    const m = await receive({ subject: 'to mark' });
    let res = await patch(`/messages/${m.id}`, { unread: false, addLabels: ['todo', 'crm:lead', 'todo'] });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, m.id);
    assert.equal(res.body.unread, false);
    assert.deepEqual(res.body.labels, ['crm:lead', 'todo']);
    assert.equal(res.body.updatedAt, m.updatedAt, 'read state and labels do not change updatedAt');
    res = await patch(`/messages/${m.id}`, { addLabels: ['todo', 'v1.2_x-y'] });
    assert.deepEqual(res.body.labels, ['crm:lead', 'todo', 'v1.2_x-y']);
    res = await patch(`/messages/${m.id}`, { unread: true, removeLabels: ['todo', 'never-there'] });
    assert.equal(res.body.unread, true);
    assert.deepEqual(res.body.labels, ['crm:lead', 'v1.2_x-y']);
    // An empty body changes nothing.
    res = await patch(`/messages/${m.id}`, {});
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.labels, ['crm:lead', 'v1.2_x-y']);
    const read = await t.api('GET', `/messages/${m.id}`);
    assert.equal(read.body.unread, true);
    assert.deepEqual(read.body.labels, ['crm:lead', 'v1.2_x-y']);
  });

  test('bad labels: 400 VALIDATION_ERROR naming the label; nothing changes', async () => {
    const m = await receive({ subject: 'bad labels' });
    for (const [body, name] of [
      [{ addLabels: ['ok', 'Urgent'] }, '"Urgent"'],
      [{ addLabels: ['-dash'] }, '"-dash"'],
      [{ addLabels: [''] }, '""'],
      [{ removeLabels: ['has space'] }, '"has space"'],
      [{ addLabels: ['x'.repeat(65)] }, 'x'.repeat(65)],
    ] as const) {
      const res = await patch(`/messages/${m.id}`, { unread: false, ...body });
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.ok(res.body.error.message.includes(name), res.body.error.message);
      assert.match(res.body.error.message, /Labels\[\d\]/);
    }
    const both = await patch(`/messages/${m.id}`, { addLabels: ['a'], removeLabels: ['a'] });
    expectError(both, 400, 'VALIDATION_ERROR');
    assert.match(both.body.error.message, /"a"/);
    expectError(await patch(`/messages/${m.id}`, { unread: 'no' }), 400, 'VALIDATION_ERROR');
    expectError(await patch(`/messages/${m.id}`, { labels: ['a'] }), 400, 'VALIDATION_ERROR');
    const after = await t.api('GET', `/messages/${m.id}`);
    assert.equal(after.body.unread, true);
    assert.deepEqual(after.body.labels, []);
  });

  test('PATCH /threads/{id}: every message; the thread shows the union of labels and unreadCount', async () => {
    const first = await receive({ subject: 'conversation', messageId: '<conv-1@example.org>' });
    const second = await receive({ subject: 'Re: conversation', inReplyTo: '<conv-1@example.org>', references: ['<conv-1@example.org>'] });
    assert.equal(second.threadId, first.threadId);
    let thread = (await t.api('GET', `/threads/${first.threadId}`)).body;
    assert.equal(thread.unreadCount, 2);
    assert.deepEqual(thread.labels, []);
    await patch(`/messages/${first.id}`, { addLabels: ['only-first'] });
    thread = (await t.api('GET', `/threads/${first.threadId}`)).body;
    assert.deepEqual(thread.labels, ['only-first']);
    assert.deepEqual(
      thread.messages.map((m: any) => m.labels),
      [['only-first'], []],
    );

    const res = await patch(`/threads/${first.threadId}`, { unread: false, addLabels: ['support'] });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, first.threadId);
    assert.equal(res.body.unreadCount, 0);
    assert.equal(res.body.messageCount, 2);
    assert.deepEqual(res.body.labels, ['only-first', 'support']);
    assert.equal('messages' in res.body, false);
    thread = (await t.api('GET', `/threads/${first.threadId}`)).body;
    assert.deepEqual(
      thread.messages.map((m: any) => [m.unread, m.labels]),
      [
        [false, ['only-first', 'support']],
        [false, ['support']],
      ],
    );
    const back = await patch(`/threads/${first.threadId}`, { unread: true, removeLabels: ['only-first'] });
    assert.equal(back.body.unreadCount, 2);
    assert.deepEqual(back.body.labels, ['support']);
    // The listing shows the same.
    const listed = (await t.api('GET', `/inboxes/${a.id}/threads?label=support`)).body.data;
    assert.deepEqual(
      listed.map((x: any) => [x.id, x.unreadCount, x.labels]),
      [[first.threadId, 2, ['support']]],
    );
    // Deleting a message takes its labels with it.
    await patch(`/messages/${second.id}`, { addLabels: ['second-only'] });
    assert.equal((await t.api('DELETE', `/messages/${second.id}`)).status, 204);
    thread = (await t.api('GET', `/threads/${first.threadId}`)).body;
    assert.deepEqual(thread.labels, ['support']);
    assert.equal(thread.unreadCount, 1);
    expectError(await patch(`/threads/${first.threadId}`, { addLabels: ['Bad'] }), 400, 'VALIDATION_ERROR');
  });

  test('at most limits.labels_per_message (50) labels a message: past it 400 VALIDATION_ERROR naming addLabels, nothing changes', async () => {
    const max = t.config.limits.labels_per_message;
    assert.equal(max, 50);
    const names = (from: number, n: number) => Array.from({ length: n }, (_, i) => `l${from + i}`);
    const m = await receive({ subject: 'many labels' });
    assert.equal((await patch(`/messages/${m.id}`, { addLabels: names(0, 30) })).status, 200);
    const over = await patch(`/messages/${m.id}`, { unread: false, addLabels: names(30, 21) });
    expectError(over, 400, 'VALIDATION_ERROR');
    assert.match(over.body.error.message, /`addLabels`.*at most 50 labels.*51/);
    let now = (await t.api('GET', `/messages/${m.id}`)).body;
    assert.equal(now.labels.length, 30, 'nothing added');
    assert.equal(now.unread, true, 'nor marked read');
    // Exactly the bound; labels it has already do not count twice; a removal makes room.
    assert.equal((await patch(`/messages/${m.id}`, { addLabels: [...names(30, 20), 'l0', 'l1'] })).status, 200);
    expectError(await patch(`/messages/${m.id}`, { addLabels: ['one-more'] }), 400, 'VALIDATION_ERROR');
    const swapped = await patch(`/messages/${m.id}`, { removeLabels: ['l0'], addLabels: ['one-more'] });
    assert.equal(swapped.status, 200, swapped.text);
    assert.equal(swapped.body.labels.length, max);
    assert.ok(swapped.body.labels.includes('one-more') && !swapped.body.labels.includes('l0'));

    // A thread: the message with the most labels decides, and no message of it changes.
    const first = await receive({ subject: 'labelled conversation', messageId: '<many-1@example.org>' });
    const second = await receive({ subject: 'Re: labelled conversation', inReplyTo: '<many-1@example.org>', references: ['<many-1@example.org>'] });
    assert.equal(second.threadId, first.threadId);
    assert.equal((await patch(`/messages/${second.id}`, { addLabels: names(0, 49) })).status, 200);
    assert.equal((await patch(`/threads/${first.threadId}`, { addLabels: ['both'] })).status, 200);
    const full = await patch(`/threads/${first.threadId}`, { unread: false, addLabels: ['extra'] });
    expectError(full, 400, 'VALIDATION_ERROR');
    assert.match(full.body.error.message, new RegExp(`\`addLabels\`.*message ${second.id}.*51`));
    now = (await t.api('GET', `/threads/${first.threadId}`)).body;
    assert.deepEqual(
      now.messages.map((x: any) => [x.labels.length, x.unread]),
      [
        [1, true],
        [50, true],
      ],
    );
  });

  test('unknown ids, another account, read-only keys', async () => {
    const m = await receive({ subject: 'mine' });
    expectError(await patch('/messages/msg_nope', { unread: false }), 404, 'MESSAGE_NOT_FOUND');
    expectError(await patch('/threads/thr_nope', { unread: false }), 404, 'THREAD_NOT_FOUND');
    const other = await t.newAccount('other');
    expectError(await patch(`/messages/${m.id}`, { unread: false, addLabels: ['x'] }, other.key), 404, 'MESSAGE_NOT_FOUND');
    expectError(await patch(`/threads/${m.threadId}`, { unread: false, addLabels: ['x'] }, other.key), 404, 'THREAD_NOT_FOUND');
    const ro = await createApiKey(t.server.ctx, t.accountId, { name: 'ro', readOnly: true });
    expectError(await patch(`/messages/${m.id}`, { unread: false }, ro.key), 403, 'FORBIDDEN');
    expectError(await patch(`/threads/${m.threadId}`, { unread: false }, ro.key), 403, 'FORBIDDEN');
    const still = (await t.api('GET', `/messages/${m.id}`)).body;
    assert.equal(still.unread, true);
    assert.deepEqual(still.labels, []);
    // The read-only key reads.
    assert.equal((await t.api('GET', '/messages?unread=true', undefined, { key: ro.key })).status, 200);
  });
});

describe('list filters', () => {
  let server: TestServer;
  let mail: Transporter;
  let x: { id: string; address: string };
  let y: { id: string; address: string };
  const m: Record<string, any> = {};

  // Its own server, so totals are exact: inbox x gets 3 received and 1 sent, inbox y 1 received.
  before(async () => {
    server = await startTestServer();
    mail = smtpTransport(server.server.smtpPort);
    x = (await server.api('POST', '/inboxes', { address: 'filter-x' })).body;
    y = (await server.api('POST', '/inboxes', { address: 'filter-y' })).body;
    const get = async (to: string, subject: string, extra: SendMailOptions = {}) => {
      const info = await mail.sendMail({ from: 'zed@example.org', to, subject, text: 'b', ...extra });
      return (await server.api('GET', `/messages/${/stored as (msg_\w+)/.exec(info.response ?? '')![1]}`)).body;
    };
    m.x1 = await get(x.address, 'x one', { messageId: '<x1@example.org>' });
    m.x2 = await get(x.address, 'x two');
    m.x3 = await get(x.address, 'Re: x one', { inReplyTo: '<x1@example.org>' });
    m.y1 = await get(y.address, 'y one');
    m.out = (await server.api('POST', `/inboxes/${x.id}/messages`, { to: ['someone@example.net'], subject: 'x out', bodyText: 'x' })).body;
    await server.api('PATCH', `/messages/${m.x1.id}`, { unread: false, addLabels: ['invoice'] });
    await server.api('PATCH', `/messages/${m.y1.id}`, { addLabels: ['invoice', 'urgent'] });
    await server.api('PATCH', `/messages/${m.out.id}`, { addLabels: ['invoice'] });
  });

  after(async () => {
    mail?.close();
    await server?.close();
  });

  const list = (path: string, key?: string | null) => server.api('GET', path, undefined, { key });

  test('inbox messages: label, unread, direction, status, combined, with the pagination envelope', async () => {
    const base = `/inboxes/${x.id}/messages`;
    const all = await list(base);
    assert.deepEqual(ids(all), [m.out.id, m.x3.id, m.x2.id, m.x1.id]);
    assert.equal(all.body.total, 4);
    const inv = await list(`${base}?label=invoice`);
    assert.deepEqual(ids(inv), [m.out.id, m.x1.id]);
    assert.deepEqual({ ...inv.body, data: undefined }, { data: undefined, total: 2, limit: 20, offset: 0 });
    assert.deepEqual(ids(await list(`${base}?unread=true`)), [m.x3.id, m.x2.id]);
    assert.deepEqual(ids(await list(`${base}?unread=false`)), [m.out.id, m.x1.id]);
    assert.deepEqual(ids(await list(`${base}?direction=inbound`)), [m.x3.id, m.x2.id, m.x1.id]);
    assert.deepEqual(ids(await list(`${base}?direction=outbound`)), [m.out.id]);
    assert.deepEqual(ids(await list(`${base}?status=received`)), [m.x3.id, m.x2.id, m.x1.id]);
    assert.deepEqual(ids(await list(`${base}?label=invoice&direction=inbound`)), [m.x1.id]);
    assert.deepEqual(ids(await list(`${base}?label=invoice&unread=true`)), []);
    const page = await list(`${base}?direction=inbound&limit=2&offset=1`);
    assert.deepEqual(ids(page), [m.x2.id, m.x1.id]);
    assert.equal(page.body.total, 3);
    assert.equal(page.body.limit, 2);
    assert.equal(page.body.offset, 1);
    const labelPage = await list(`${base}?label=invoice&limit=1&offset=1`);
    assert.deepEqual(ids(labelPage), [m.x1.id]);
    assert.equal(labelPage.body.total, 2);
    assert.deepEqual(ids(await list(`${base}?label=nothing-here`)), []);
    // Empty values are no filter.
    assert.equal((await list(`${base}?label=&unread=&status=`)).body.total, 4);
  });

  test('GET /messages: every inbox of the account, same filters', async () => {
    const all = await list('/messages');
    assert.deepEqual(ids(all), [m.out.id, m.y1.id, m.x3.id, m.x2.id, m.x1.id]);
    assert.equal(all.body.total, 5);
    const inv = await list('/messages?label=invoice');
    assert.deepEqual(ids(inv), [m.out.id, m.y1.id, m.x1.id]);
    assert.equal(inv.body.total, 3);
    assert.deepEqual(ids(await list('/messages?label=urgent')), [m.y1.id]);
    assert.deepEqual(ids(await list('/messages?unread=true')), [m.y1.id, m.x3.id, m.x2.id]);
    assert.deepEqual(ids(await list('/messages?status=received&limit=2')), [m.y1.id, m.x3.id]);
    assert.equal((await list('/messages?status=received&limit=2')).body.total, 4);
    assert.equal((await list('/messages?status=queued')).body.total, 0);
    assert.deepEqual(ids(await list('/messages?direction=outbound')), [m.out.id]);
    assert.deepEqual(ids(await list('/messages?offset=4')), [m.x1.id]);
  });

  test('threads: a thread is listed when one of its messages passes every filter', async () => {
    const base = `/inboxes/${x.id}/threads`;
    const all = await list(base);
    assert.equal(all.body.total, 3);
    assert.deepEqual(ids(all), [m.out.threadId, m.x3.threadId, m.x2.threadId]);
    assert.equal(m.x3.threadId, m.x1.threadId);
    const conv = all.body.data.find((th: any) => th.id === m.x1.threadId);
    assert.deepEqual([conv.unreadCount, conv.labels, conv.messageCount], [1, ['invoice'], 2]);
    assert.deepEqual(ids(await list(`${base}?label=invoice`)), [m.out.threadId, m.x1.threadId]);
    assert.deepEqual(ids(await list(`${base}?unread=true`)), [m.x1.threadId, m.x2.threadId]);
    assert.deepEqual(ids(await list(`${base}?label=invoice&unread=true`)), []);
    assert.deepEqual(ids(await list(`${base}?direction=outbound`)), [m.out.threadId]);
    assert.deepEqual(ids(await list(`${base}?status=received&limit=1&offset=1`)), [m.x2.threadId]);
    assert.equal((await list(`${base}?status=received&limit=1&offset=1`)).body.total, 2);

    const acct = await list('/threads');
    assert.equal(acct.body.total, 4);
    assert.deepEqual(ids(acct), [m.out.threadId, m.y1.threadId, m.x1.threadId, m.x2.threadId]);
    assert.deepEqual(ids(await list('/threads?label=urgent')), [m.y1.threadId]);
    const unread = await list('/threads?unread=true&limit=2');
    assert.deepEqual(ids(unread), [m.y1.threadId, m.x1.threadId]);
    assert.deepEqual({ total: unread.body.total, limit: unread.body.limit, offset: unread.body.offset }, { total: 3, limit: 2, offset: 0 });
  });

  test('bad filter values: 400 VALIDATION_ERROR naming the parameter', async () => {
    for (const path of [`/inboxes/${x.id}/messages`, '/messages', `/inboxes/${x.id}/threads`, '/threads']) {
      for (const [q, name] of [
        ['label=Invoice', 'label'],
        ['unread=yes', 'unread'],
        ['direction=sideways', 'direction'],
        ['status=bogus', 'status'],
        ['limit=101', 'limit'],
      ]) {
        const res = await list(`${path}?${q}`);
        expectError(res, 400, 'VALIDATION_ERROR');
        assert.ok(res.body.error.message.includes(`\`${name}\``), `${path}?${q}: ${res.body.error.message}`);
      }
    }
  });

  test('another account sees nothing of these lists; an unknown inbox is 404', async () => {
    const other = await server.newAccount('other');
    for (const path of ['/messages', '/threads', '/messages?label=invoice', '/threads?label=invoice', '/messages?unread=true', '/threads?status=received']) {
      const res = await list(path, other.key);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { data: [], total: 0, limit: 20, offset: 0 });
    }
    expectError(await list(`/inboxes/${x.id}/messages?label=invoice`, other.key), 404, 'INBOX_NOT_FOUND');
    expectError(await list(`/inboxes/${x.id}/threads?unread=true`, other.key), 404, 'INBOX_NOT_FOUND');
    expectError(await list('/inboxes/inb_nope/messages?unread=true'), 404, 'INBOX_NOT_FOUND');
    expectError(await list('/messages', null), 401, 'UNAUTHORIZED');
  });
});
