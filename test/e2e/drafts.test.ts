// Drafts end to end: create, read, list, update (absent fields stay, null clears), delete; the
// checks (addresses, thread and replied message of the inbox, attachments, sendAt); sending,
// which deletes the draft with the send and goes out through the send pipeline to a capturing
// MX (a reply draft carries In-Reply-To/References and stays in the thread); attachments that
// outlive the message they arrived with; Idempotency-Key, suspension, other accounts and
// read-only keys.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { suspendInbox, unsuspendInbox } from '../../src/domain/inboxes/inboxes.ts';
import { rawRows } from '../../src/store/store.ts';
import { dbDigest, settleJobs } from '../support/db-digest.ts';
import { deliverMail } from '../support/mail.ts';
import { startOutboundRig, type OutboundRig } from '../support/outbound.ts';
import { expectError, type TestServer } from '../support/server.ts';

let t: TestServer;
let rig: OutboundRig;
let box: { id: string; address: string };

before(async () => {
  rig = await startOutboundRig();
  t = await rig.start();
  box = (await t.api('POST', '/inboxes', { address: 'drafter', displayName: 'Drafter' })).body;
});

after(async () => {
  await t?.close();
  await rig?.close();
});

const captured = (messageIdHeader: string) => rig.captured(messageIdHeader);

async function upload(name: string, content: string): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([content], { type: 'text/plain' }), name);
  const res = await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: form });
  assert.equal(res.status, 201);
  return ((await res.json()) as { id: string }).id;
}

const draft = async (body: Record<string, unknown>, inboxId = box.id) => {
  const res = await t.api('POST', `/inboxes/${inboxId}/drafts`, body);
  assert.equal(res.status, 201, res.text);
  return res.body;
};

describe('draft CRUD', () => {
  test('create (every field optional), get, list newest first, update, delete', async () => {
    const empty = await draft({});
    assert.match(empty.id, /^drf_[0-9a-z]{26}$/);
    const { createdAt, updatedAt, ...rest } = empty;
    assert.deepEqual(rest, {
      id: empty.id,
      inboxId: box.id,
      to: [],
      cc: [],
      bcc: [],
      subject: null,
      bodyText: null,
      bodyHtml: null,
      threadId: null,
      inReplyTo: null,
      attachmentIds: [],
      sendAt: null,
    });
    assert.equal(createdAt, updatedAt);
    const full = await draft({ to: ['Ann <ann@remote.test>'], cc: ['cc@remote.test'], bcc: ['bcc@remote.test'], subject: 'Quote', bodyText: 'Draft text' });
    assert.deepEqual([full.to, full.cc, full.bcc, full.subject, full.bodyText], [['Ann <ann@remote.test>'], ['cc@remote.test'], ['bcc@remote.test'], 'Quote', 'Draft text']);
    assert.deepEqual((await t.api('GET', `/drafts/${full.id}`)).body, full);

    const list = (await t.api('GET', `/inboxes/${box.id}/drafts`)).body;
    assert.deepEqual([list.total, list.limit, list.offset], [2, 20, 0]);
    assert.deepEqual(
      list.data.map((d: any) => d.id),
      [full.id, empty.id],
    );
    assert.deepEqual(
      (await t.api('GET', `/inboxes/${box.id}/drafts?limit=1&offset=1`)).body.data.map((d: any) => d.id),
      [empty.id],
    );

    // PATCH: absent fields stay, null clears, [] empties a list.
    const patched = await t.api('PATCH', `/drafts/${full.id}`, { subject: 'Quote v2', bodyText: null, bodyHtml: '<p>v2</p>', cc: [] });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(
      [patched.body.to, patched.body.cc, patched.body.bcc, patched.body.subject, patched.body.bodyText, patched.body.bodyHtml],
      [['Ann <ann@remote.test>'], [], ['bcc@remote.test'], 'Quote v2', null, '<p>v2</p>'],
    );
    assert.ok(patched.body.updatedAt >= full.updatedAt);
    assert.equal(patched.body.createdAt, full.createdAt);
    assert.deepEqual((await t.api('GET', `/drafts/${full.id}`)).body, patched.body);

    for (const d of [empty, full]) {
      assert.equal((await t.api('DELETE', `/drafts/${d.id}`)).status, 204);
      expectError(await t.api('GET', `/drafts/${d.id}`), 404, 'DRAFT_NOT_FOUND');
      expectError(await t.api('DELETE', `/drafts/${d.id}`), 404, 'DRAFT_NOT_FOUND');
      expectError(await t.api('PATCH', `/drafts/${d.id}`, { subject: 'x' }), 404, 'DRAFT_NOT_FOUND');
    }
    assert.equal((await t.api('GET', `/inboxes/${box.id}/drafts`)).body.total, 0);
  });

  test('bad fields: addresses 400 INVALID_ADDRESS, thread and message of another inbox 404, unknown attachment and bad sendAt 400; nothing stored', async () => {
    const other = (await t.api('POST', '/inboxes', { address: 'drafter-other' })).body;
    const theirMessage = await deliverMail(t.server.smtpPort, { from: 'x@remote.test', to: other.address, subject: 'theirs', text: 'x' });
    const theirThread = (await t.api('GET', `/messages/${theirMessage}`)).body.threadId;
    const existing = await draft({ subject: 'keep' });
    const before = await dbDigest(t.server.ctx);
    const cases: Array<[Record<string, unknown>, number, string, RegExp]> = [
      [{ to: ['not an address'] }, 400, 'INVALID_ADDRESS', /to\[0\]/],
      [{ bcc: ['ok@remote.test', 'a@b@c'] }, 400, 'INVALID_ADDRESS', /bcc\[1\]/],
      [{ to: Array.from({ length: 60 }, (_v, i) => `a${i}@remote.test`), cc: Array.from({ length: 41 }, (_v, i) => `c${i}@remote.test`) }, 400, 'VALIDATION_ERROR', /`to`/],
      [{ threadId: theirThread }, 404, 'THREAD_NOT_FOUND', /thread/],
      [{ threadId: 'thr_unknown' }, 404, 'THREAD_NOT_FOUND', /thread/],
      [{ inReplyTo: theirMessage }, 404, 'MESSAGE_NOT_FOUND', /message/],
      [{ inReplyTo: 'msg_unknown' }, 404, 'MESSAGE_NOT_FOUND', /message/],
      [{ attachmentIds: ['att_unknown'] }, 400, 'VALIDATION_ERROR', /`attachmentIds`/],
      [{ sendAt: 'tomorrow' }, 400, 'VALIDATION_ERROR', /`sendAt`/],
      [{ sendAt: '2020-01-01T00:00:00Z' }, 400, 'VALIDATION_ERROR', /`sendAt`: must be in the future/],
      [{ sendAt: new Date(Date.now() + 31 * 86_400_000).toISOString() }, 400, 'VALIDATION_ERROR', /`sendAt`: must be at most 30 days ahead/],
      [{ subject: 'a\r\nBcc: x@y.z' }, 400, 'VALIDATION_ERROR', /`subject`/],
      [{ unknown: 1 }, 400, 'VALIDATION_ERROR', /unknown/],
    ];
    for (const [body, status, code, message] of cases) {
      for (const [method, path] of [
        ['POST', `/inboxes/${box.id}/drafts`],
        ['PATCH', `/drafts/${existing.id}`],
      ]) {
        const res = await t.api(method, path, body);
        expectError(res, status, code);
        assert.match(res.body.error.message, message, `${method} ${JSON.stringify(body).slice(0, 80)}`);
      }
    }
    expectError(await t.api('POST', '/inboxes/inb_unknown/drafts', {}), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('GET', '/inboxes/inb_unknown/drafts'), 404, 'INBOX_NOT_FOUND');
    assert.equal(await dbDigest(t.server.ctx), before);
    await t.api('DELETE', `/drafts/${existing.id}`);
  });
});

describe('sending a draft', () => {
  test('a draft lacking to, subject or a body is 400 naming the field and stays; a complete one goes out once and is gone', async () => {
    const d = await draft({});
    const missing = async (field: string) => {
      const res = await t.api('POST', `/drafts/${d.id}/send`, {});
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, new RegExp(`^\`${field}\``));
    };
    await missing('to');
    await t.api('PATCH', `/drafts/${d.id}`, { to: ['Ann <ann@remote.test>'], cc: ['bob@remote.test'] });
    await missing('subject');
    await t.api('PATCH', `/drafts/${d.id}`, { subject: 'Offer' });
    await missing('bodyText');
    assert.equal((await t.api('GET', `/drafts/${d.id}`)).status, 200, 'a refused send keeps the draft');
    await t.api('PATCH', `/drafts/${d.id}`, { bodyText: 'Our offer is attached in spirit.' });

    const sent = await t.api('POST', `/drafts/${d.id}/send`);
    assert.equal(sent.status, 202, sent.text);
    assert.equal(sent.body.status, 'queued');
    assert.deepEqual([sent.body.toAddresses, sent.body.ccAddresses, sent.body.subject], [['ann@remote.test'], ['bob@remote.test'], 'Offer']);
    expectError(await t.api('GET', `/drafts/${d.id}`), 404, 'DRAFT_NOT_FOUND');
    expectError(await t.api('POST', `/drafts/${d.id}/send`), 404, 'DRAFT_NOT_FOUND');
    const mail = await captured(sent.body.messageIdHeader);
    assert.equal(mail.subject, 'Offer');
    assert.equal(mail.text?.trim(), 'Our offer is attached in spirit.');
    assert.deepEqual(
      [mail.to].flat().flatMap((a) => a!.value.map((v) => [v.name, v.address])),
      [['Ann', 'ann@remote.test']],
    );
    await settleJobs(t.server.ctx);
    assert.equal((await t.api('GET', `/messages/${sent.body.id}`)).body.status, 'sent');
  });

  test('If-Match: a draft edited since it was read is 412 PRECONDITION_FAILED and stays unsent; the version read goes out', async () => {
    const created = await t.api('POST', `/inboxes/${box.id}/drafts`, { to: ['ann@remote.test'], subject: 'Approved text', bodyText: 'as shown' });
    assert.equal(created.headers.get('etag'), `"${created.body.updatedAt}"`);
    const shown = created.headers.get('etag')!;
    assert.equal((await t.api('GET', `/drafts/${created.body.id}`)).headers.get('etag'), shown);
    // An agent edits it after a person has seen it (a different millisecond: a new version).
    await new Promise((r) => setTimeout(r, 5));
    const edited = await t.api('PATCH', `/drafts/${created.body.id}`, { to: ['mallory@remote.test'] });
    assert.notEqual(edited.headers.get('etag'), shown);
    const before = (await t.api('GET', `/inboxes/${box.id}/messages?limit=100`)).body.total;
    const refused = await t.api('POST', `/drafts/${created.body.id}/send`, undefined, { headers: { 'if-match': shown } });
    expectError(refused, 412, 'PRECONDITION_FAILED');
    assert.match(refused.body.error.message, /changed since it was read/);
    assert.equal((await t.api('GET', `/inboxes/${box.id}/messages?limit=100`)).body.total, before, 'nothing was sent');
    assert.deepEqual((await t.api('GET', `/drafts/${created.body.id}`)).body.to, ['mallory@remote.test'], 'the draft stays');
    const sent = await t.api('POST', `/drafts/${created.body.id}/send`, undefined, { headers: { 'if-match': `W/${edited.headers.get('etag')}, "other"` } });
    assert.equal(sent.status, 202, sent.text);
    assert.deepEqual(sent.body.toAddresses, ['mallory@remote.test']);
    const star = await draft({ to: ['ann@remote.test'], subject: 's', bodyText: 'b' });
    assert.equal((await t.api('POST', `/drafts/${star.id}/send`, undefined, { headers: { 'if-match': '*' } })).status, 202);
  });

  test('a reply draft: recipients and subject filled from the original, sent with In-Reply-To and References in the same thread', async () => {
    const originalId = await deliverMail(t.server.smtpPort, {
      from: 'Carol <carol@remote.test>',
      replyTo: 'carol-replies@remote.test',
      to: box.address,
      subject: 'Invoice 7',
      text: 'Is it paid?',
      messageId: '<inv-7@remote.test>',
      references: ['<root-7@remote.test>'],
    });
    const original = (await t.api('GET', `/messages/${originalId}`)).body;
    const d = await draft({ inReplyTo: originalId, bodyText: 'Yes, paid yesterday.' });
    assert.deepEqual([d.to, d.subject, d.inReplyTo], [['carol-replies@remote.test'], 'Re: Invoice 7', originalId]);
    // A thread other than the original's is refused; the original's own is fine.
    const otherThread = (await t.api('GET', `/messages/${await deliverMail(t.server.smtpPort, { from: 'x@remote.test', to: box.address, subject: 'other', text: 'x' })}`)).body.threadId;
    expectError(await t.api('PATCH', `/drafts/${d.id}`, { threadId: otherThread }), 400, 'VALIDATION_ERROR');
    assert.equal((await t.api('PATCH', `/drafts/${d.id}`, { threadId: original.threadId })).status, 200);

    const sent = await t.api('POST', `/drafts/${d.id}/send`);
    assert.equal(sent.status, 202, sent.text);
    assert.equal(sent.body.threadId, original.threadId);
    assert.equal(sent.body.inReplyTo, '<inv-7@remote.test>');
    const mail = await captured(sent.body.messageIdHeader);
    assert.equal(mail.subject, 'Re: Invoice 7');
    assert.equal(mail.inReplyTo, '<inv-7@remote.test>');
    assert.deepEqual([mail.references].flat(), ['<root-7@remote.test>', '<inv-7@remote.test>']);
    assert.deepEqual(
      [mail.to].flat().flatMap((a) => a!.value.map((v) => v.address)),
      ['carol-replies@remote.test'],
    );
    const thread = (await t.api('GET', `/threads/${original.threadId}`)).body;
    assert.deepEqual(
      thread.messages.map((m: any) => m.id),
      [originalId, sent.body.id],
    );

    // The original deleted before the send: the reply draft cannot be sent (404), and stays.
    const orphan = await draft({
      inReplyTo: (await t.api('GET', `/messages/${await deliverMail(t.server.smtpPort, { from: 'y@remote.test', to: box.address, subject: 'gone', text: 'x' })}`)).body.id,
      bodyText: 'x',
    });
    assert.equal((await t.api('DELETE', `/messages/${orphan.inReplyTo}`)).status, 204);
    expectError(await t.api('POST', `/drafts/${orphan.id}/send`), 404, 'MESSAGE_NOT_FOUND');
    assert.equal((await t.api('GET', `/drafts/${orphan.id}`)).status, 200);
    await t.api('DELETE', `/drafts/${orphan.id}`);
    await settleJobs(t.server.ctx);
  });

  test('attachments a draft names stay valid while it exists, even when the message they arrived with is deleted', async () => {
    const uploaded = await upload('notes.txt', 'uploaded notes');
    const arrivedIn = await deliverMail(t.server.smtpPort, {
      from: 'dan@remote.test',
      to: box.address,
      subject: 'files',
      text: 'see attached',
      attachments: [{ filename: 'report.txt', content: 'inbound report' }],
    });
    const arrived = (await t.api('GET', `/messages/${arrivedIn}`)).body.attachments[0].id;
    const d = await draft({ to: ['dan@remote.test'], subject: 'Both files', bodyText: 'here', attachmentIds: [arrived, uploaded, arrived] });
    assert.deepEqual(d.attachmentIds, [arrived, uploaded]);

    assert.equal((await t.api('DELETE', `/messages/${arrivedIn}`)).status, 204);
    const kept = await t.api('GET', `/attachments/${arrived}`);
    assert.equal(kept.status, 200, kept.text);
    assert.equal(await (await fetch(kept.body.url)).text(), 'inbound report');
    assert.deepEqual((await t.api('GET', `/drafts/${d.id}`)).body.attachmentIds, [arrived, uploaded]);

    const sent = await t.api('POST', `/drafts/${d.id}/send`);
    assert.equal(sent.status, 202, sent.text);
    assert.deepEqual(
      sent.body.attachments.map((a: any) => a.id),
      [arrived, uploaded],
    );
    const mail = await captured(sent.body.messageIdHeader);
    assert.deepEqual(
      mail.attachments.map((a) => [a.filename, a.content.toString()]),
      [
        ['report.txt', 'inbound report'],
        ['notes.txt', 'uploaded notes'],
      ],
    );
    // An attachment no draft names still goes with its message.
    const plain = await deliverMail(t.server.smtpPort, { from: 'dan@remote.test', to: box.address, subject: 'one more', text: 'x', attachments: [{ filename: 'gone.txt', content: 'bye' }] });
    const goneId = (await t.api('GET', `/messages/${plain}`)).body.attachments[0].id;
    await t.api('DELETE', `/messages/${plain}`);
    expectError(await t.api('GET', `/attachments/${goneId}`), 404, 'ATTACHMENT_NOT_FOUND');
    await settleJobs(t.server.ctx);
  });

  test('Idempotency-Key replays the send; two concurrent sends of one draft make one message; a suspended inbox keeps its draft', async () => {
    const d = await draft({ to: ['eve@remote.test'], subject: 'Once', bodyText: 'only once' });
    const headers = { 'idempotency-key': `draft-${d.id}` };
    const first = await t.api('POST', `/drafts/${d.id}/send`, undefined, { headers });
    assert.equal(first.status, 202, first.text);
    const replay = await t.api('POST', `/drafts/${d.id}/send`, undefined, { headers });
    assert.equal(replay.status, 202);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.body.id, first.body.id);

    const race = await draft({ to: ['eve@remote.test'], subject: 'Race', bodyText: 'twice?' });
    const answers = await Promise.all([t.api('POST', `/drafts/${race.id}/send`), t.api('POST', `/drafts/${race.id}/send`)]);
    assert.deepEqual(answers.map((a) => a.status).sort(), [202, 404], answers.map((a) => a.text).join(' | '));
    const stored = (await rawRows<[number]>(t.server.ctx.db, `SELECT count(*) FROM messages WHERE subject = 'Race'`))[0]?.[0];
    assert.equal(stored, 1);

    const held = await draft({ to: ['eve@remote.test'], subject: 'Held', bodyText: 'x' });
    await suspendInbox(t.server.ctx, box.id);
    try {
      expectError(await t.api('POST', `/drafts/${held.id}/send`), 403, 'INBOX_SUSPENDED');
      assert.equal((await t.api('GET', `/drafts/${held.id}`)).status, 200);
    } finally {
      await unsuspendInbox(t.server.ctx, box.id);
    }
    assert.equal((await t.api('POST', `/drafts/${held.id}/send`, { sendAt: null })).status, 202);
    await settleJobs(t.server.ctx);
  });

  test('sendAt on the draft or in the send body schedules the message', async () => {
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const d = await draft({ to: ['fay@remote.test'], subject: 'Later', bodyText: 'x', sendAt: at });
    assert.equal(d.sendAt, at);
    const sent = await t.api('POST', `/drafts/${d.id}/send`);
    assert.equal(sent.status, 202, sent.text);
    assert.deepEqual([sent.body.status, sent.body.sendAt], ['scheduled', at]);
    assert.equal((await t.api('POST', `/messages/${sent.body.id}/cancel`)).body.status, 'canceled');

    const now = await draft({ to: ['fay@remote.test'], subject: 'Body wins', bodyText: 'x', sendAt: at });
    expectError(await t.api('POST', `/drafts/${now.id}/send`, { sendAt: '2020-01-01T00:00:00Z' }), 400, 'VALIDATION_ERROR');
    const immediate = await t.api('POST', `/drafts/${now.id}/send`, { sendAt: null });
    assert.deepEqual([immediate.status, immediate.body.status, immediate.body.sendAt], [202, 'queued', null]);
    await settleJobs(t.server.ctx);
  });
});

describe('access', () => {
  test("another account's drafts are 404 on every route; read-only keys read but get 403 on writes", async () => {
    const d = await draft({ to: ['gil@remote.test'], subject: 'private', bodyText: 'x' });
    const other = await t.newAccount('other');
    const before = await dbDigest(t.server.ctx);
    for (const [method, path, body] of [
      ['GET', `/drafts/${d.id}`],
      ['PATCH', `/drafts/${d.id}`, { subject: 'mine now' }],
      ['DELETE', `/drafts/${d.id}`],
      ['POST', `/drafts/${d.id}/send`, {}],
    ] as Array<[string, string, unknown?]>) {
      expectError(await t.api(method, path, body, { key: other.key }), 404, 'DRAFT_NOT_FOUND');
    }
    expectError(await t.api('GET', `/inboxes/${box.id}/drafts`, undefined, { key: other.key }), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('POST', `/inboxes/${box.id}/drafts`, {}, { key: other.key }), 404, 'INBOX_NOT_FOUND');
    assert.equal(await dbDigest(t.server.ctx), before, "another account's requests changed the database");
    // Their own inbox cannot name my message, thread or attachment either.
    const theirs = (await t.api('POST', '/inboxes', { address: 'other-drafter' }, { key: other.key })).body;
    const myMessage = await deliverMail(t.server.smtpPort, { from: 'x@remote.test', to: box.address, subject: 'mine', text: 'x', attachments: [{ filename: 'm.txt', content: 'm' }] });
    const mine = (await t.api('GET', `/messages/${myMessage}`)).body;
    const probeBefore = await dbDigest(t.server.ctx);
    expectError(await t.api('POST', `/inboxes/${theirs.id}/drafts`, { inReplyTo: myMessage }, { key: other.key }), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('POST', `/inboxes/${theirs.id}/drafts`, { threadId: mine.threadId }, { key: other.key }), 404, 'THREAD_NOT_FOUND');
    expectError(await t.api('POST', `/inboxes/${theirs.id}/drafts`, { attachmentIds: [mine.attachments[0].id] }, { key: other.key }), 400, 'VALIDATION_ERROR');
    assert.equal(await dbDigest(t.server.ctx), probeBefore);

    const ro = (await createApiKey(t.server.ctx, t.accountId, { name: 'reader', readOnly: true })).key;
    assert.equal((await t.api('GET', `/drafts/${d.id}`, undefined, { key: ro })).status, 200);
    assert.equal((await t.api('GET', `/inboxes/${box.id}/drafts`, undefined, { key: ro })).status, 200);
    const roBefore = await dbDigest(t.server.ctx);
    for (const [method, path, body] of [
      ['POST', `/inboxes/${box.id}/drafts`, {}],
      ['PATCH', `/drafts/${d.id}`, { subject: 'x' }],
      ['DELETE', `/drafts/${d.id}`],
      ['POST', `/drafts/${d.id}/send`, {}],
    ] as Array<[string, string, unknown?]>) {
      expectError(await t.api(method, path, body, { key: ro }), 403, 'FORBIDDEN');
    }
    assert.equal(await dbDigest(t.server.ctx), roBefore);
  });

  test('deleting the inbox deletes its drafts', async () => {
    const temp = (await t.api('POST', '/inboxes', { address: 'temp-drafts' })).body;
    const d = await draft({ subject: 'x' }, temp.id);
    assert.equal((await t.api('DELETE', `/inboxes/${temp.id}`)).status, 204);
    expectError(await t.api('GET', `/drafts/${d.id}`), 404, 'DRAFT_NOT_FOUND');
  });
});
