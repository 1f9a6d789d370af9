// Messages and threads API over real sockets, fed by real SMTP deliveries: listing with status
// filter and pagination, reading, the raw source, deleting (with the thread of an only message,
// and the files), cross-account isolation, and deleting an inbox with everything under it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { type SendMailOptions, type Transporter } from 'nodemailer';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { storedBlobs } from '../support/blobs.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { smtpTransport } from '../support/mail.ts';

let t: TestServer;
let transport: Transporter;

before(async () => {
  t = await startTestServer();
  transport = smtpTransport(t.server.smtpPort);
});

after(async () => {
  transport?.close();
  await t?.close();
});

async function deliver(mail: SendMailOptions): Promise<{ id: string; messageId: string }> {
  const info = await transport.sendMail({ from: 'bob@example.org', text: 'body', ...mail });
  return { id: /stored as (msg_\w+)/.exec(info.response ?? '')![1], messageId: info.messageId };
}

/** Every stored blob of `kind` (raw sources, attachment bytes), on either engine. */
const files = (kind: 'raw' | 'attachments') => storedBlobs(t.server.ctx, kind);

describe('listing and reading', () => {
  let inboxId: string;
  const ids: string[] = [];
  before(async () => {
    inboxId = (await t.api('POST', '/inboxes', { address: 'lister' })).body.id;
    for (let i = 1; i <= 5; i++) ids.push((await deliver({ to: 'lister@agents.test', subject: `message ${i}` })).id);
  });

  test('newest first, with limit and offset', async () => {
    const all = await t.api('GET', `/inboxes/${inboxId}/messages`);
    assert.equal(all.status, 200);
    assert.equal(all.body.total, 5);
    assert.equal(all.body.limit, 20);
    assert.equal(all.body.offset, 0);
    assert.deepEqual(
      all.body.data.map((m: any) => m.id),
      [...ids].reverse(),
    );
    const page = await t.api('GET', `/inboxes/${inboxId}/messages?limit=2&offset=1`);
    assert.equal(page.body.total, 5);
    assert.equal(page.body.limit, 2);
    assert.equal(page.body.offset, 1);
    assert.deepEqual(
      page.body.data.map((m: any) => m.subject),
      ['message 4', 'message 3'],
    );
    expectError(await t.api('GET', `/inboxes/${inboxId}/messages?limit=101`), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', `/inboxes/${inboxId}/messages?offset=-1`), 400, 'VALIDATION_ERROR');
  });

  test('status filter', async () => {
    const received = await t.api('GET', `/inboxes/${inboxId}/messages?status=received`);
    assert.equal(received.body.total, 5);
    const sent = await t.api('GET', `/inboxes/${inboxId}/messages?status=sent`);
    assert.equal(sent.status, 200);
    assert.deepEqual(sent.body.data, []);
    assert.equal(sent.body.total, 0);
    const bad = await t.api('GET', `/inboxes/${inboxId}/messages?status=bogus`);
    expectError(bad, 400, 'VALIDATION_ERROR');
    assert.match(bad.body.error.message, /status/);
  });

  test('get one, and its raw RFC 5322 source', async () => {
    const m = await t.api('GET', `/messages/${ids[0]}`);
    assert.equal(m.status, 200);
    assert.equal(m.body.subject, 'message 1');
    const raw = await fetch(`${t.url}/messages/${ids[0]}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(raw.status, 200);
    assert.equal(raw.headers.get('content-type'), 'message/rfc822');
    assert.equal(raw.headers.get('x-content-type-options'), 'nosniff');
    const text = await raw.text();
    assert.match(text, /^Subject: message 1\r$/m);
    assert.match(text, new RegExp(`^Message-ID: ${m.body.messageIdHeader.replace(/[.+]/g, '\\$&')}\\r$`, 'mi'));
    assert.equal(Buffer.byteLength(text), m.body.size);
  });

  test('unknown ids are 404 with the resource code', async () => {
    expectError(await t.api('GET', '/messages/msg_nope'), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('GET', '/messages/msg_nope/raw'), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('DELETE', '/messages/msg_nope'), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('GET', '/inboxes/inb_nope/messages'), 404, 'INBOX_NOT_FOUND');
  });

  test('another account sees none of it', async () => {
    const other = await t.newAccount('other');
    const opts = { key: other.key };
    const m = (await t.api('GET', `/messages/${ids[0]}`)).body;
    expectError(await t.api('GET', `/messages/${ids[0]}`, undefined, opts), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('GET', `/messages/${ids[0]}/raw`, undefined, opts), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('DELETE', `/messages/${ids[0]}`, undefined, opts), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('GET', `/inboxes/${inboxId}/messages`, undefined, opts), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('GET', `/inboxes/${inboxId}/threads`, undefined, opts), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('GET', `/threads/${m.threadId}`, undefined, opts), 404, 'THREAD_NOT_FOUND');
    // Still there for its owner.
    assert.equal((await t.api('GET', `/messages/${ids[0]}`)).status, 200);
  });

  test('without a key: 401', async () => {
    expectError(await t.api('GET', `/messages/${ids[0]}`, undefined, { key: null }), 401, 'UNAUTHORIZED');
  });
});

describe('a plain page of an inbox', () => {
  // A plain page reads what changes with the ids, and the rest of each message from memory once
  // read (src/store/repo/messages.ts); a filtered page reads whole rows, GET /messages/{id} one.
  // All of them must show the same messages, read again, and after they change.
  const unsigned = (page: any) => ({ ...page, data: page.data.map((m: any) => ({ ...m, attachments: m.attachments.map(({ url, ...a }: any) => a) })) });

  test('answers what a filtered page and GET /messages/{id} do, before and after changes', async () => {
    const inboxId = (await t.api('POST', '/inboxes', { address: 'pages' })).body.id;
    const plain = (await deliver({ to: 'pages@agents.test', subject: 'plain' })).id;
    const attached = (await deliver({ to: 'pages@agents.test', subject: 'attached', attachments: [{ filename: 'a.txt', content: 'attached bytes' }] })).id;
    // Two bytes a character: more bytes than characters, under the list's cut.
    const labelled = (await deliver({ to: 'pages@agents.test', subject: 'labelled', text: 'é'.repeat(3000) })).id;
    assert.equal((await t.api('PATCH', `/messages/${labelled}`, { addLabels: ['todo', 'billing'] })).status, 200);
    const same = async () => {
      const page = unsigned((await t.api('GET', `/inboxes/${inboxId}/messages`)).body);
      assert.deepEqual(unsigned((await t.api('GET', `/inboxes/${inboxId}/messages?status=received`)).body), page);
      assert.deepEqual(unsigned((await t.api('GET', `/inboxes/${inboxId}/messages?direction=inbound`)).body), page);
      for (const m of page.data) assert.deepEqual(unsigned({ data: [(await t.api('GET', `/messages/${m.id}`)).body] }).data[0], m);
      return page;
    };

    const first = await same();
    assert.equal(first.total, 3);
    assert.deepEqual(
      first.data.map((m: any) => [m.id, m.labels, m.attachments.map((a: any) => a.filename), m.unread]),
      [
        [labelled, ['billing', 'todo'], [], true],
        [attached, [], ['a.txt'], true],
        [plain, [], [], true],
      ],
    );
    assert.equal(first.data[0].bodyText, 'é'.repeat(3000));
    // Read again, from memory this time: the same answer.
    assert.deepEqual(await same(), first);

    assert.equal((await t.api('PATCH', `/messages/${plain}`, { unread: false, addLabels: ['done'] })).status, 200);
    assert.equal((await t.api('PATCH', `/messages/${labelled}`, { removeLabels: ['todo'] })).status, 200);
    assert.equal((await t.api('DELETE', `/messages/${attached}`)).status, 204);
    const changed = await same();
    assert.equal(changed.total, 2);
    assert.deepEqual(
      changed.data.map((m: any) => [m.id, m.labels, m.unread]),
      [
        [labelled, ['billing'], true],
        [plain, ['done'], false],
      ],
    );
  });
});

describe('deleting', () => {
  test('a message of a longer thread leaves the thread; the only message takes the thread with it; files go too', async () => {
    const inboxId = (await t.api('POST', '/inboxes', { address: 'deleter' })).body.id;
    const first = await deliver({ to: 'deleter@agents.test', subject: 'topic', attachments: [{ filename: 'a.txt', content: 'attached bytes' }] });
    const second = await deliver({ to: 'deleter@agents.test', subject: 'Re: topic', inReplyTo: first.messageId, references: first.messageId });
    const firstMsg = (await t.api('GET', `/messages/${first.id}`)).body;
    const threadId = firstMsg.threadId;
    assert.equal((await t.api('GET', `/messages/${second.id}`)).body.threadId, threadId);
    const attId = firstMsg.attachments[0].id;
    const rawBefore = (await files('raw')).length;
    const attBefore = (await files('attachments')).length;

    const del = await t.api('DELETE', `/messages/${first.id}`);
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    expectError(await t.api('GET', `/messages/${first.id}`), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('GET', `/attachments/${attId}`), 404, 'ATTACHMENT_NOT_FOUND');
    assert.equal((await files('raw')).length, rawBefore - 1);
    assert.equal((await files('attachments')).length, attBefore - 1);
    const thread = await t.api('GET', `/threads/${threadId}`);
    assert.equal(thread.status, 200);
    assert.equal(thread.body.messageCount, 1);
    assert.deepEqual(
      thread.body.messages.map((m: any) => m.id),
      [second.id],
    );

    assert.equal((await t.api('DELETE', `/messages/${second.id}`)).status, 204);
    expectError(await t.api('GET', `/threads/${threadId}`), 404, 'THREAD_NOT_FOUND');
    assert.equal((await t.api('GET', `/inboxes/${inboxId}/threads`)).body.total, 0);
    assert.equal((await files('raw')).length, rawBefore - 2);
    expectError(await t.api('DELETE', `/messages/${second.id}`), 404, 'MESSAGE_NOT_FOUND');
  });

  test('a read-only key cannot delete', async () => {
    await t.api('POST', '/inboxes', { address: 'ro' });
    const { id } = await deliver({ to: 'ro@agents.test', subject: 'keep me' });
    const ro = await createApiKey(t.server.ctx, t.accountId, { name: 'ro', readOnly: true });
    expectError(await t.api('DELETE', `/messages/${id}`, undefined, { key: ro.key }), 403, 'FORBIDDEN');
    assert.equal((await t.api('GET', `/messages/${id}`, undefined, { key: ro.key })).status, 200);
  });

  test('deleting an inbox removes its messages, threads and files', async () => {
    const inboxId = (await t.api('POST', '/inboxes', { address: 'goner' })).body.id;
    const a = await deliver({ to: 'goner@agents.test', subject: 'one', attachments: [{ filename: 'x.bin', content: Buffer.alloc(1000, 7) }] });
    const b = await deliver({ to: 'goner@agents.test', subject: 'Re: one', inReplyTo: a.messageId });
    const msg = (await t.api('GET', `/messages/${a.id}`)).body;
    const rawBefore = (await files('raw')).length;
    const attBefore = (await files('attachments')).length;
    assert.equal((await t.api('DELETE', `/inboxes/${inboxId}`)).status, 204);
    expectError(await t.api('GET', `/messages/${a.id}`), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('GET', `/messages/${b.id}`), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('GET', `/threads/${msg.threadId}`), 404, 'THREAD_NOT_FOUND');
    expectError(await t.api('GET', `/attachments/${msg.attachments[0].id}`), 404, 'ATTACHMENT_NOT_FOUND');
    assert.equal((await files('raw')).length, rawBefore - 2);
    assert.equal((await files('attachments')).length, attBefore - 1);
    // The address is free again and receives nothing old.
    await assert.rejects(transport.sendMail({ from: 'bob@example.org', to: 'goner@agents.test', subject: 'x', text: 'x' }), (err: any) => err.responseCode === 550);
  });
});
