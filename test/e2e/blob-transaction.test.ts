// Where blobs are rows (PostgreSQL), a received message's raw source and attachment bytes are
// written in the transaction that stores its rows (BlobStore.writeIn): nothing before it, and
// nothing left when it rolls back. Files (SQLite) are written and fsynced before the commit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { storedBlobs } from '../support/blobs.ts';
import { onEngine, startTestServer, type TestServer } from '../support/server.ts';
import { prepareInbound } from '../../src/domain/inbound/inbound.ts';
import { findInboxByAddress } from '../../src/domain/inboxes/inboxes.ts';

const message = (id: string) =>
  Buffer.from(
    [
      'From: Ann <ann@example.org>',
      'To: box@agents.test',
      'Subject: one transaction',
      `Message-ID: <${id}@example.org>`,
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b"',
      '',
      '--b',
      'Content-Type: text/plain',
      '',
      'hello',
      '--b',
      'Content-Type: application/octet-stream; name="a.bin"',
      'Content-Disposition: attachment; filename="a.bin"',
      'Content-Transfer-Encoding: base64',
      '',
      Buffer.from(`bytes of ${id}`).toString('base64'),
      '--b--',
      '',
    ].join('\r\n'),
  );

/** An inbox `box` on `t`, and the input of message `id` received for it over SMTP. */
async function delivery(t: TestServer, id: string) {
  await t.api('POST', '/inboxes', { address: 'box' });
  const ctx = t.server.ctx;
  const inbox = (await findInboxByAddress(ctx, 'box@agents.test'))!;
  return { ctx, input: { raw: message(id), mailFrom: 'ann@example.org', recipients: [inbox], remoteAddress: '192.0.2.7', heloName: 'mx.example.org' } };
}

onEngine('postgres').test('PostgreSQL: the raw source and the attachment commit with the message rows, and a rollback leaves neither', async () => {
  const t = await startTestServer();
  try {
    const { ctx, input } = await delivery(t, 'm1');

    const rolledBack = (await prepareInbound(ctx, input))!;
    assert.deepEqual(await storedBlobs(ctx, 'raw'), [], 'nothing is written before the transaction');
    assert.deepEqual(await storedBlobs(ctx, 'attachments'), []);
    await assert.rejects(
      ctx.store.transaction(async (tx) => {
        assert.equal((await rolledBack.store(tx)).length, 1);
        throw new Error('rolled back');
      }),
      /rolled back/,
    );
    assert.deepEqual(await storedBlobs(ctx, 'raw'), [], 'the rollback took the raw source with the rows');
    assert.deepEqual(await storedBlobs(ctx, 'attachments'), []);

    const prepared = (await prepareInbound(ctx, input))!;
    const [id] = await ctx.store.transaction((tx) => prepared.store(tx));
    assert.equal((await storedBlobs(ctx, 'raw')).length, 1);
    assert.equal((await storedBlobs(ctx, 'attachments')).length, 1);
    const raw = await (await fetch(`${t.url}/messages/${id}/raw`, { headers: { authorization: `Bearer ${t.key}` } })).text();
    assert.match(raw, /^Return-Path: <ann@example\.org>\r\nReceived: from mx\.example\.org \(\[192\.0\.2\.7\]\)/);
    assert.ok(raw.endsWith(input.raw.toString()), 'the stored source is the trace fields, then the message as received');
    const message1 = (await t.api('GET', `/messages/${id}`)).body;
    const att = (await t.api('GET', `/attachments/${message1.attachments[0].id}`)).body;
    assert.equal(Buffer.from(await (await fetch(att.url)).arrayBuffer()).toString(), 'bytes of m1');

    // The same delivery again stores nothing new: no second raw source is written at all.
    const again = (await prepareInbound(ctx, input))!;
    assert.deepEqual(await ctx.store.transaction((tx) => again.store(tx)), [id]);
    assert.equal((await storedBlobs(ctx, 'raw')).length, 1);
    assert.deepEqual(
      again.files,
      (await storedBlobs(ctx, 'attachments')).map((b) => b.key),
      'only the shared attachment is left to release',
    );
  } finally {
    await t.close();
  }
});

test('the stored source of a message received over SMTP is the trace fields and the message, on either engine', async () => {
  const t = await startTestServer();
  try {
    const { ctx, input } = await delivery(t, 'm2');
    const prepared = (await prepareInbound(ctx, input))!;
    const [id] = await ctx.store.transaction((tx) => prepared.store(tx));
    const raw = await (await fetch(`${t.url}/messages/${id}/raw`, { headers: { authorization: `Bearer ${t.key}` } })).text();
    assert.ok(raw.startsWith('Return-Path: <ann@example.org>\r\n') && raw.endsWith(input.raw.toString()));
    assert.deepEqual(
      (await storedBlobs(ctx, 'raw')).map((b) => b.size),
      [Buffer.byteLength(raw)],
    );
  } finally {
    await t.close();
  }
});
