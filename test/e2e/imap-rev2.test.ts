// IMAP4rev2 (RFC 9051) over a raw connection, answer by answer: ENABLE IMAP4rev2, no RECENT,
// ESEARCH with RETURN (MIN MAX COUNT ALL SAVE) and `$`, STATUS SIZE and DELETED, LIST-EXTENDED
// with LIST-STATUS, BINARY[] with the transfer encoding undone (literal8 for NUL bytes), and
// UIDPLUS's COPYUID and APPENDUID.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { imapPort, RawImap, taggedLine } from '../support/imap.ts';
import { deliverMail } from '../support/mail.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let address: string;
let inboxId: string;
/** Bytes with NULs: BINARY[] must answer them as literal8. */
const BLOB = Buffer.from([0, 1, 2, 3, 0, 255, 254, 10, 13, 0]);

before(async () => {
  t = await startTestServer({ imap: { listen: '127.0.0.1:0' } });
  const inbox = (await t.api('POST', '/inboxes', { address: 'rev2' })).body;
  address = inbox.address;
  inboxId = inbox.id;
  await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: address, subject: 'one', text: 'x' });
  await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: address, subject: 'two', text: 'x' });
  await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: address, subject: 'three', text: 'x', attachments: [{ filename: 'blob.bin', content: BLOB }] });
});
after(() => t?.close());

test('IMAP4rev2: ENABLE, ESEARCH and SEARCHRES, STATUS SIZE, LIST-STATUS, BINARY, UIDPLUS', async () => {
  const c = await RawImap.open(imapPort(t));
  try {
    assert.match(c.greeting, /IMAP4rev2/);
    await c.command('l', `LOGIN ${address} ${t.key}`);
    assert.match(await c.command('e', 'ENABLE IMAP4rev2'), /^\* ENABLED IMAP4rev2\r$/m);
    const selected = await c.command('s', 'SELECT INBOX');
    assert.doesNotMatch(selected, /RECENT/);
    assert.match(selected, /^\* 3 EXISTS/m);

    assert.match(await c.command('a', 'SEARCH ALL'), /^\* ESEARCH \(TAG "a"\) ALL 1:3\r$/m);
    assert.match(await c.command('b', 'UID SEARCH RETURN (MIN MAX COUNT) ALL'), /^\* ESEARCH \(TAG "b"\) UID MIN 1 MAX 3 COUNT 3\r$/m);
    assert.match(await c.command('b2', 'SEARCH RETURN (COUNT) SUBJECT nothing'), /^\* ESEARCH \(TAG "b2"\) COUNT 0\r$/m);
    const saved = await c.command('c', 'SEARCH RETURN (SAVE) SUBJECT two');
    assert.doesNotMatch(saved, /ESEARCH/, 'SAVE alone answers nothing');
    assert.match(await c.command('d', 'FETCH $ (UID)'), /^\* 2 FETCH \(UID 2\)\r$/m);
    assert.match(await c.command('d2', 'UID SEARCH $ SUBJECT two'), /^\* ESEARCH \(TAG "d2"\) UID ALL 2\r$/m);

    const api = (await t.api('GET', `/inboxes/${inboxId}/messages`)).body.data as Array<{ size: number }>;
    const size = api.reduce((n, m) => n + m.size, 0);
    await c.command('f', 'STORE 1 +FLAGS.SILENT (\\Deleted)');
    assert.match(await c.command('g', 'STATUS INBOX (MESSAGES SIZE DELETED)'), new RegExp(`^\\* STATUS "INBOX" \\(MESSAGES 3 SIZE ${size} DELETED 1\\)\\r$`, 'm'));

    const listed = await c.command('h', 'LIST "" "*" RETURN (SPECIAL-USE STATUS (MESSAGES))');
    assert.match(listed, /^\* LIST \(\\HasNoChildren\) "\/" "INBOX"\r\n\* STATUS "INBOX" \(MESSAGES 3\)\r$/m);
    assert.match(listed, /^\* LIST \(\\HasNoChildren \\Sent\) "\/" "Sent"\r\n\* STATUS "Sent" \(MESSAGES 0\)\r$/m);
    const special = await c.command('i', 'LIST (SPECIAL-USE) "" "*"');
    assert.deepEqual(
      [...special.matchAll(/^\* LIST .* "(\w+)"\r$/gm)].map((m) => m[1]),
      ['Sent', 'Drafts', 'Trash'],
    );

    const binary = await c.command('j', 'FETCH 3 (BINARY.SIZE[2] BINARY.PEEK[2])');
    assert.match(binary, new RegExp(`BINARY\\.SIZE\\[2\\] ${BLOB.length} BINARY\\[2\\] ~\\{${BLOB.length}\\}\\r\\n`));
    const body = Buffer.from(binary.slice(binary.indexOf(`~{${BLOB.length}}\r\n`) + `~{${BLOB.length}}\r\n`.length), 'latin1').subarray(0, BLOB.length);
    assert.deepEqual(body, BLOB);

    assert.match(taggedLine(await c.command('k', 'UID COPY 1:2 kept'), 'k'), /^k OK \[COPYUID \d+ 1,2 1,2\] UID COPY completed/);
    assert.match(taggedLine(await c.command('k2', 'UID COPY 2:3 kept'), 'k2'), /^k2 OK \[COPYUID \d+ 2,3 2,3\]/);
  } finally {
    c.close();
  }
});
