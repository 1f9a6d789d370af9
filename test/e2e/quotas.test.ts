// Per-account quotas (`[limits]`, docs/security.md): inboxes (403 INBOX_LIMIT_REACHED), drafts
// and uploads not sent yet (403 QUOTA_EXCEEDED), and stored bytes: past them inbound mail gets
// 452 4.2.2 at RCPT and sends and uploads get 403 QUOTA_EXCEEDED, while other accounts are
// served. The stored-bytes counter the database keeps follows inserts and every kind of deletion.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { rawRows } from '../../src/store/store.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';

const MiB = 1_048_576;
let t: TestServer;

before(async () => {
  t = await startTestServer({ limits: { inboxes_per_account: 3, drafts_per_account: 2, uploads_per_account: 2, storage_bytes_per_account: MiB } });
});
after(async () => {
  await t?.close();
});

type Account = { accountId: string; key: string };

const api = (who: Account, method: string, path: string, body?: unknown) => t.api(method, path, body, { key: who.key });

async function inboxOf(who: Account, address: string): Promise<{ id: string; address: string }> {
  const res = await api(who, 'POST', '/inboxes', { address });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

function upload(who: Account, bytes: Buffer | string, name = 'f.bin') {
  const form = new FormData();
  form.append('file', new Blob([typeof bytes === 'string' ? bytes : new Uint8Array(bytes)]), name);
  return fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${who.key}` }, body: form }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as any,
  }));
}

/** MAIL, RCPT, DATA of `bytes` of body to `to`: each reply. */
async function smtpSend(to: string, bodyBytes: number): Promise<{ rcpt: number; rcptText: string; data?: number }> {
  const { client } = await SmtpClient.open(t.server.smtpPort);
  try {
    await client.cmd('EHLO sender.test');
    await client.cmd('MAIL FROM:<someone@sender.test>');
    const rcpt = await client.cmd(`RCPT TO:<${to}>`);
    if (rcpt.code !== 250) return { rcpt: rcpt.code, rcptText: rcpt.text };
    const body = `From: someone@sender.test\r\nTo: ${to}\r\nSubject: big\r\n\r\n${(
      randomBytes(bodyBytes)
        .toString('base64')
        .match(/.{1,76}/g) ?? []
    ).join('\r\n')}\r\n`;
    const data = await client.data(Buffer.from(body));
    return { rcpt: rcpt.code, rcptText: rcpt.text, data: data.code };
  } finally {
    await client.cmd('QUIT');
  }
}

/** The counter the triggers keep, and the sum it stands for. */
async function usage(accountId: string): Promise<{ kept: number; summed: number }> {
  const db = t.server.ctx.db;
  const [kept] = await rawRows<[number]>(db, 'SELECT sum(bytes) FROM account_usage WHERE account_id = ?', [accountId]);
  const [summed] = await rawRows<[number]>(db, 'SELECT (SELECT coalesce(sum(size), 0) FROM messages WHERE account_id = ?) + (SELECT coalesce(sum(size), 0) FROM attachments WHERE account_id = ?)', [
    accountId,
    accountId,
  ]);
  return { kept: Number(kept?.[0] ?? 0), summed: Number(summed[0]) };
}

describe('per-account quotas', () => {
  test('inboxes_per_account: the next inbox gets 403 INBOX_LIMIT_REACHED; another account is not counted; a deletion makes room', async () => {
    const a = await t.newAccount('inboxes');
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await inboxOf(a, `many-${i}`));
    expectError(await api(a, 'POST', '/inboxes', { address: 'many-3' }), 403, 'INBOX_LIMIT_REACHED');
    const b = await t.newAccount('other');
    await inboxOf(b, 'other-0');
    assert.equal((await api(a, 'DELETE', `/inboxes/${made[0].id}`)).status, 204);
    await inboxOf(a, 'many-3');
  });

  test('drafts_per_account: the next draft gets 403 QUOTA_EXCEEDED, across inboxes; a deletion makes room', async () => {
    const a = await t.newAccount('drafts');
    const [x, y] = [await inboxOf(a, 'drafts-x'), await inboxOf(a, 'drafts-y')];
    const first = await api(a, 'POST', `/inboxes/${x.id}/drafts`, { subject: 'one' });
    assert.equal(first.status, 201);
    assert.equal((await api(a, 'POST', `/inboxes/${y.id}/drafts`, { subject: 'two' })).status, 201);
    const refused = await api(a, 'POST', `/inboxes/${x.id}/drafts`, { subject: 'three' });
    expectError(refused, 403, 'QUOTA_EXCEEDED');
    assert.match(refused.body.error.message, /drafts_per_account/);
    assert.equal((await api(a, 'DELETE', `/drafts/${first.body.id}`)).status, 204);
    assert.equal((await api(a, 'POST', `/inboxes/${x.id}/drafts`, { subject: 'three' })).status, 201);
  });

  test('uploads_per_account: the next upload gets 403 QUOTA_EXCEEDED until one is sent', async () => {
    const a = await t.newAccount('uploads');
    const box = await inboxOf(a, 'uploader');
    const one = await upload(a, 'one');
    assert.equal(one.status, 201);
    assert.equal((await upload(a, 'two')).status, 201);
    const refused = await upload(a, 'three');
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'QUOTA_EXCEEDED');
    assert.match(refused.body.error.message, /uploads_per_account/);
    const sent = await api(a, 'POST', `/inboxes/${box.id}/messages`, { to: ['x@example.com'], subject: 's', bodyText: 'b', attachmentIds: [one.body.id] });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    assert.equal((await upload(a, 'three')).status, 201);
  });

  test('storage_bytes_per_account: full, inbound mail gets 452 4.2.2 at RCPT and sends and uploads 403; other accounts are served; deleting makes room', async () => {
    const a = await t.newAccount('storage');
    const box = await inboxOf(a, 'hoarder');
    const b = await t.newAccount('neighbour');
    const other = await inboxOf(b, 'neighbour');

    // Below the quota: stored (the message that crosses it is taken whole).
    const first = await smtpSend(box.address, 800_000);
    assert.equal(first.data, 250);
    const u = await usage(a.accountId);
    assert.ok(u.kept >= MiB, `stored ${u.kept} bytes`);
    assert.equal(u.kept, u.summed);

    // Full: refused before any data, as a temporary failure (RFC 3463 4.2.2 mailbox full).
    const refused = await smtpSend(box.address, 1000);
    assert.equal(refused.rcpt, 452);
    assert.match(refused.rcptText, /^4\.2\.2 /);
    assert.equal((await smtpSend(other.address, 1000)).data, 250, 'another account still receives');

    const send = await api(a, 'POST', `/inboxes/${box.id}/messages`, { to: ['x@example.com'], subject: 's', bodyText: 'b' });
    expectError(send, 403, 'QUOTA_EXCEEDED');
    assert.match(send.body.error.message, /storage_bytes_per_account/);
    const up = await upload(a, 'tiny');
    assert.equal(up.status, 403);
    assert.equal(up.body.error.code, 'QUOTA_EXCEEDED');

    // Deleting the message gives the bytes back: mail is taken again.
    const list = await api(a, 'GET', `/inboxes/${box.id}/messages`);
    for (const m of list.body.data) assert.equal((await api(a, 'DELETE', `/messages/${m.id}`)).status, 204);
    assert.deepEqual(await usage(a.accountId), { kept: 0, summed: 0 });
    assert.equal((await smtpSend(box.address, 1000)).data, 250);
  });

  test('an upload larger than the room left gets 403 QUOTA_EXCEEDED and leaves nothing', async () => {
    const a = await t.newAccount('room');
    await inboxOf(a, 'roomy');
    const big = await upload(a, randomBytes(MiB + 10));
    assert.equal(big.status, 403);
    assert.equal(big.body.error.code, 'QUOTA_EXCEEDED');
    assert.deepEqual(await usage(a.accountId), { kept: 0, summed: 0 });
    assert.equal((await upload(a, randomBytes(1000))).status, 201);
  });

  test('the stored-bytes counter follows sends, attachments and the deletion of an inbox', async () => {
    const a = await t.newAccount('counter');
    const box = await inboxOf(a, 'counted');
    const att = await upload(a, randomBytes(5000));
    assert.equal((await api(a, 'POST', `/inboxes/${box.id}/messages`, { to: ['x@example.com'], subject: 's', bodyText: 'b', attachmentIds: [att.body.id] })).status, 202);
    assert.equal((await smtpSend(box.address, 3000)).data, 250);
    const u = await usage(a.accountId);
    assert.ok(u.kept > 5000 + 3000, `stored ${u.kept} bytes`);
    assert.equal(u.kept, u.summed);
    assert.equal((await api(a, 'DELETE', `/inboxes/${box.id}`)).status, 204);
    const left = await usage(a.accountId);
    assert.equal(left.kept, left.summed, 'the upload stays counted, the inbox mail is gone');
  });
});
