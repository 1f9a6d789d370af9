// One unauthenticated transaction to many inboxes must not multiply its bytes on disk: the
// copies of one delivery share one raw file, and attachment bytes are stored once by their
// hash, also across deliveries. A file goes with the last message naming it, never before.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { smtpTransport } from '../support/mail.ts';
import { storedBlobs } from '../support/blobs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
const INBOXES = 50;
let addresses: string[] = [];
let inboxIds: string[] = [];

before(async () => {
  t = await startTestServer({ smtp: { max_recipients: 100 }, limits: { requests_per_minute: 100_000 } });
  for (let i = 0; i < INBOXES; i++) {
    const inbox = (await t.api('POST', '/inboxes', { address: `fan${i}` })).body;
    addresses.push(inbox.address);
    inboxIds.push(inbox.id);
  }
});
after(async () => {
  await t?.close();
});

/** Bytes of every stored blob: raw messages and attachments (files, or rows on PostgreSQL). */
async function blobBytes(): Promise<number> {
  const all = [...(await storedBlobs(t.server.ctx, 'raw')), ...(await storedBlobs(t.server.ctx, 'attachments'))];
  return all.reduce((sum, b) => sum + b.size, 0);
}

async function download(messageId: string): Promise<Buffer> {
  const m = (await t.api('GET', `/messages/${messageId}`)).body;
  const a = (await t.api('GET', `/attachments/${m.attachments[0].id}`)).body;
  return Buffer.from(await (await fetch(a.url)).arrayBuffer());
}

describe('shared files', () => {
  const attachment = randomBytes(600_000);
  let ids: string[] = [];

  test(`one message with a 600 KB attachment to ${INBOXES} inboxes adds its bytes about once, not ${INBOXES} times`, async () => {
    const before = await blobBytes();
    const transport = smtpTransport(t.server.smtpPort);
    try {
      const info = await transport.sendMail({ from: 'bulk@example.org', to: addresses, subject: 'fan-out', text: 'to everyone', attachments: [{ filename: 'big.bin', content: attachment }] });
      ids = /stored as (.+)$/.exec(info.response)![1].split(' ');
    } finally {
      transport.close();
    }
    assert.equal(ids.length, INBOXES);
    const added = (await blobBytes()) - before;
    // The raw message (base64: 4/3 of the attachment) once, and the attachment once.
    assert.ok(added < attachment.length * 2.5, `added ${added} bytes for ${INBOXES} recipients`);
    assert.ok(added > attachment.length, 'the bytes are stored');
    assert.deepEqual(await download(ids[INBOXES - 1]), attachment);
  });

  test('deleting all but one copy keeps the shared files; deleting the last removes them', async () => {
    const withFiles = await blobBytes();
    for (const id of ids.slice(0, -1)) assert.equal((await t.api('DELETE', `/messages/${id}`)).status, 204);
    assert.equal(await blobBytes(), withFiles, 'nothing removed while one copy names the files');
    assert.deepEqual(await download(ids[INBOXES - 1]), attachment);
    const raw = await fetch(`${t.url}/messages/${ids[INBOXES - 1]}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(raw.status, 200);
    assert.equal((await t.api('DELETE', `/messages/${ids[INBOXES - 1]}`)).status, 204);
    assert.ok((await blobBytes()) < withFiles - attachment.length * 2, 'the raw file and the attachment went with the last copy');
  });

  test('the same attachment in two deliveries is stored once; deleting one inbox leaves the other able to download it', async () => {
    const bytes = randomBytes(300_000);
    const transport = smtpTransport(t.server.smtpPort);
    let first: string;
    let second: string;
    try {
      const before = await blobBytes();
      first = /stored as (\S+)/.exec(
        (await transport.sendMail({ from: 'a@example.org', to: addresses[0], subject: 'one', text: 'one', attachments: [{ filename: 'same.bin', content: bytes }] })).response,
      )![1];
      const afterFirst = await blobBytes();
      second = /stored as (\S+)/.exec(
        (await transport.sendMail({ from: 'b@example.org', to: addresses[1], subject: 'two', text: 'two', attachments: [{ filename: 'other-name.bin', content: bytes }] })).response,
      )![1];
      const secondAdded = (await blobBytes()) - afterFirst;
      assert.ok(afterFirst - before > bytes.length * 2, 'the first delivery stores raw and attachment');
      assert.ok(secondAdded < bytes.length * 1.5, `the second added ${secondAdded} bytes: its raw message only`);
    } finally {
      transport.close();
    }
    assert.equal((await t.api('DELETE', `/inboxes/${inboxIds[0]}`)).status, 204);
    assert.deepEqual(await download(second), bytes);
    assert.equal((await t.api('GET', `/messages/${first}`)).status, 404);
  });
});
