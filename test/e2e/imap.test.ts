// IMAP end to end (docs/imap.md) with real clients on loopback: the imapflow library logs in with
// an inbox address and an API key, lists the folders, reads mail (envelope, structure, source),
// sets flags and labels, expunges, and sees what the API sees; the API's changes show over IMAP;
// UIDs and UIDVALIDITY survive a restart. Every refusal is checked with its response code.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ImapFlow } from 'imapflow';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { imapClient, imapPort, RawImap } from '../support/imap.ts';
import { deliverMail } from '../support/mail.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const IMAP = { imap: { listen: '127.0.0.1:0' } };

/** What a refused login answered: imapflow's error carries the server's response code. */
async function loginRefusal(t: TestServer, user: string, pass: string): Promise<string | undefined> {
  try {
    const c = await imapClient(t, user, pass);
    await c.logout();
    return undefined;
  } catch (err) {
    return (err as { serverResponseCode?: string }).serverResponseCode ?? String((err as Error).message);
  }
}

describe('IMAP with imapflow', () => {
  let t: TestServer;
  let dataDir: string;
  let inbox: { id: string; address: string };
  const ids: string[] = [];

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-imap-'));
    t = await startTestServer(IMAP, { dataDir });
    inbox = (await t.api('POST', '/inboxes', { address: 'reader' })).body;
    for (let i = 1; i <= 3; i++) {
      ids.push(
        await deliverMail(t.server.smtpPort, {
          from: 'Ann Example <ann@example.org>',
          to: inbox.address,
          subject: `hello ${i}`,
          text: `body number ${i}`,
          ...(i === 1 ? { headers: { 'X-Ticket': 'T-42' } } : {}),
          ...(i === 3 ? { attachments: [{ filename: 'notes.txt', content: 'attached text' }] } : {}),
        }),
      );
    }
  });
  after(async () => {
    await t?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('login, folders, and the mail of INBOX as the API has it: envelope, structure, source, size, flags', async () => {
    const c = await imapClient(t, inbox.address, t.key);
    try {
      const folders = await c.list();
      assert.deepEqual(
        folders.map((f) => f.path),
        ['INBOX', 'Sent', 'Drafts', 'Trash'],
      );
      assert.equal(folders.find((f) => f.path === 'Trash')?.specialUse, '\\Trash');
      assert.equal(folders.find((f) => f.path === 'Sent')?.specialUse, '\\Sent');
      const box = await c.mailboxOpen('INBOX');
      assert.equal(box.exists, 3);
      const messages = [];
      for await (const m of c.fetch('1:*', { uid: true, envelope: true, bodyStructure: true, source: true, flags: true, size: true, internalDate: true })) messages.push(m);
      assert.deepEqual(
        messages.map((m) => m.envelope?.subject),
        ['hello 1', 'hello 2', 'hello 3'],
      );
      assert.deepEqual(
        messages.map((m) => m.uid),
        [1, 2, 3],
      );
      for (const [i, m] of messages.entries()) {
        const raw = await t.api('GET', `/messages/${ids[i]}/raw`);
        assert.equal(m.source?.toString('utf8'), raw.text, 'BODY[] is the stored source');
        assert.equal(m.size, Buffer.byteLength(raw.text));
        assert.deepEqual(m.envelope?.from, [{ name: 'Ann Example', address: 'ann@example.org' }]);
        assert.deepEqual(
          m.envelope?.to?.map((a) => a.address),
          [inbox.address],
        );
        assert.deepEqual([...(m.flags ?? [])], [], 'inbound mail arrives unread');
      }
      const third = messages[2];
      assert.equal(third.bodyStructure?.type, 'multipart/mixed');
      assert.equal(third.bodyStructure?.childNodes?.[1].dispositionParameters?.filename, 'notes.txt');
      const part = await c.download('3', '2');
      const chunks: Buffer[] = [];
      for await (const chunk of part.content!) chunks.push(chunk as Buffer);
      assert.equal(Buffer.concat(chunks).toString(), 'attached text');
    } finally {
      await c.logout();
    }
  });

  test('\\Seen is unread, keywords are labels, both ways; a label is a folder whose UIDs only grow', async () => {
    const c = await imapClient(t, inbox.address, t.key);
    try {
      await c.mailboxOpen('INBOX');
      await c.messageFlagsAdd('1', ['\\Seen', 'project-x']);
      const m1 = (await t.api('GET', `/messages/${ids[0]}`)).body;
      assert.equal(m1.unread, false);
      assert.deepEqual(m1.labels, ['project-x']);
      await c.messageFlagsAdd('2', ['\\Flagged']);
      assert.deepEqual((await t.api('GET', `/messages/${ids[1]}`)).body.labels, ['flagged']);
      // The API marks, IMAP sees.
      await t.api('PATCH', `/messages/${ids[2]}`, { unread: false, addLabels: ['project-x'] });
      const flags = new Map<number, string[]>();
      for await (const m of c.fetch('1:*', { uid: true, flags: true })) flags.set(m.uid, [...(m.flags ?? [])].sort());
      assert.deepEqual(flags.get(1), ['\\Seen', 'project-x']);
      assert.deepEqual(flags.get(2), ['\\Flagged']);
      assert.deepEqual(flags.get(3), ['\\Seen', 'project-x']);
      assert.ok((await c.list()).some((f) => f.path === 'project-x'));
      const inFolder = async () => {
        const out = [];
        for await (const m of c.fetch('1:*', { uid: true, envelope: true })) out.push([m.uid, m.envelope?.subject]);
        return out;
      };
      let box = await c.mailboxOpen('project-x');
      assert.equal(box.exists, 2);
      assert.deepEqual(await inFolder(), [
        [1, 'hello 1'],
        [2, 'hello 3'],
      ]);
      await c.mailboxOpen('INBOX');
      await c.messageFlagsRemove('3', ['\\Seen', 'project-x']);
      const m3 = (await t.api('GET', `/messages/${ids[2]}`)).body;
      assert.equal(m3.unread, true);
      assert.deepEqual(m3.labels, []);
      await c.mailboxOpen('project-x');
      assert.deepEqual(await inFolder(), [[1, 'hello 1']]);
      // Message 3 enters the folder again: it gets a new UID, above every earlier one.
      await t.api('PATCH', `/messages/${ids[2]}`, { addLabels: ['project-x'] });
      box = await c.mailboxOpen('project-x');
      assert.deepEqual(await inFolder(), [
        [1, 'hello 1'],
        [3, 'hello 3'],
      ]);
      assert.equal(box.uidNext, 4);
    } finally {
      await c.logout();
    }
  });

  test('SEARCH: text through the full-text index (as the q of the API finds), flags, keywords, sets, headers, OR and NOT', async () => {
    const c = await imapClient(t, inbox.address, t.key);
    try {
      await c.mailboxOpen('INBOX');
      const uids = async (query: Parameters<ImapFlow['search']>[0]) => (await c.search(query, { uid: true })) || [];
      assert.deepEqual(await uids({ subject: 'hello' }), [1, 2, 3]);
      const api = (await t.api('GET', `/inboxes/${inbox.id}/messages?q=${encodeURIComponent('subject:hello')}`)).body;
      assert.equal(api.total, 3, 'the API finds the same three');
      assert.deepEqual(await uids({ body: 'number' }), [1, 2, 3]);
      assert.deepEqual(await uids({ text: 'body number 2' }), [2]);
      assert.deepEqual(await uids({ from: 'ann@example.org' }), [1, 2, 3]);
      assert.deepEqual(await uids({ body: 'nowhere' }), []);
      assert.deepEqual(await uids({ seen: false }), [2, 3]);
      assert.deepEqual(await uids({ flagged: true }), [2]);
      assert.deepEqual(await uids({ keyword: 'project-x' }), [1, 3]);
      assert.deepEqual(await uids({ or: [{ flagged: true }, { keyword: 'project-x' }] }), [1, 2, 3]);
      assert.deepEqual(await uids({ not: { seen: true } }), [2, 3]);
      assert.deepEqual(await uids({ uid: '2:*' }), [2, 3]);
      assert.deepEqual(await uids({ header: { 'x-ticket': 'T-42' } }), [1]);
      assert.deepEqual(await uids({ larger: 100000 }), []);
      assert.deepEqual(await c.search({ all: true }), [1, 2, 3], 'sequence numbers without UID');
    } finally {
      await c.logout();
    }
  });

  test('EXPUNGE in a label folder takes the label off; in INBOX it deletes the message', async () => {
    const c = await imapClient(t, inbox.address, t.key);
    try {
      await c.mailboxOpen('project-x');
      await c.messageDelete('3', { uid: true });
      const m3 = (await t.api('GET', `/messages/${ids[2]}`)).body;
      assert.deepEqual(m3.labels, [], 'still there, without the label');
      await c.mailboxOpen('INBOX');
      await c.messageDelete('2', { uid: true });
      assert.equal((await t.api('GET', `/messages/${ids[1]}`)).status, 404);
      const uids = [];
      for await (const m of c.fetch('1:*', { uid: true })) uids.push(m.uid);
      assert.deepEqual(uids, [1, 3]);
    } finally {
      await c.logout();
    }
  });

  test('EXPUNGE of several messages: each EXPUNGE numbered after the ones before it; UID EXPUNGE only those named', async () => {
    const other = (await t.api('POST', '/inboxes', { address: 'expunger' })).body;
    for (let i = 1; i <= 6; i++) await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: other.address, subject: `x ${i}`, text: 'x' });
    const c = await RawImap.open(imapPort(t));
    try {
      await c.command('l', `LOGIN ${other.address} ${t.key}`);
      await c.command('s', 'SELECT INBOX');
      await c.command('d', 'STORE 1,2,4,6 +FLAGS.SILENT (\\Deleted)');
      // UID EXPUNGE of 2 and 4 (5 is not \Deleted): messages 2 then 4 go, from the last back.
      assert.equal(await c.command('u', 'UID EXPUNGE 2,4:5'), '* 4 EXPUNGE\r\n* 2 EXPUNGE\r\nu OK UID EXPUNGE completed\r\n');
      // Left: UIDs 1 3 5 6, of which 1 and 6 are \Deleted.
      assert.equal(await c.command('e', 'EXPUNGE'), '* 4 EXPUNGE\r\n* 1 EXPUNGE\r\ne OK EXPUNGE completed\r\n');
      assert.equal(await c.command('f', 'FETCH 1:* (UID)'), '* 1 FETCH (UID 3)\r\n* 2 FETCH (UID 5)\r\nf OK FETCH completed\r\n');
    } finally {
      c.close();
    }
  });

  test('IDLE: new mail is told as EXISTS, woken by the event feed', async () => {
    const c = await imapClient(t, inbox.address, t.key);
    try {
      const box = await c.mailboxOpen('INBOX');
      const before = box.exists;
      const told = new Promise<number>((resolve) => c.on('exists', (d: { count: number }) => resolve(d.count)));
      void c.idle();
      await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: inbox.address, subject: 'while idling', text: 'x' });
      assert.equal(await told, before + 1);
      const last = await c.fetchOne('*', { envelope: true });
      assert.equal(last && last.envelope?.subject, 'while idling');
    } finally {
      await c.logout();
    }
  });

  test('held mail is in no folder until released', async () => {
    const id = await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: inbox.address, subject: 'screened', text: 'x' });
    await t.api('PATCH', `/messages/${id}`, { addLabels: ['project-x'] });
    const setStatus = (status: string) => t.server.ctx.store.run(t.server.ctx.db, 'UPDATE messages SET status = ? WHERE id = ?', [status, id]);
    await setStatus('held');
    const c = await imapClient(t, inbox.address, t.key);
    try {
      const subjects = async (folder: string) => {
        await c.mailboxOpen(folder);
        const out = [];
        for await (const m of c.fetch('1:*', { envelope: true })) out.push(m.envelope?.subject);
        return out;
      };
      assert.ok(!(await subjects('INBOX')).includes('screened'));
      assert.ok(!(await subjects('project-x')).includes('screened'));
      await setStatus('received');
      assert.ok((await subjects('INBOX')).includes('screened'));
      assert.ok((await subjects('project-x')).includes('screened'));
    } finally {
      await c.logout();
    }
    await t.api('DELETE', `/messages/${id}`);
  });

  test('APPEND to Drafts makes a draft; to Sent only what was sent; elsewhere refused', async () => {
    const c = await imapClient(t, inbox.address, t.key);
    try {
      const draft = ['From: ' + inbox.address, 'To: bob@example.net', 'Subject: draft from a phone', 'Message-ID: <draft1@example.net>', '', 'half written', ''].join('\r\n');
      await c.append('Drafts', draft, ['\\Draft']);
      const drafts = (await t.api('GET', `/inboxes/${inbox.id}/drafts`)).body.data;
      assert.deepEqual(
        drafts.map((d: { subject: string; to: string[]; bodyText: string }) => [d.subject, d.to, d.bodyText]),
        [['draft from a phone', ['bob@example.net'], 'half written']],
      );
      const sent = (await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['bob@example.net'], subject: 'sent by the API', bodyText: 'x' })).body;
      assert.match(sent.messageIdHeader, /^<.+>$/, JSON.stringify(sent));
      const copy = ['From: ' + inbox.address, 'To: bob@example.net', 'Subject: sent by the API', `Message-ID: ${sent.messageIdHeader}`, '', 'x', ''].join('\r\n');
      assert.ok(await c.append('Sent', copy));
      await c.mailboxOpen('Sent');
      const inSent = [];
      for await (const m of c.fetch('1:*', { envelope: true })) inSent.push(m.envelope?.subject);
      assert.deepEqual(inSent, ['sent by the API'], 'the copy is the sent message, not a second one');
      const refusal = async (folder: string, raw: string) => {
        try {
          await c.append(folder, raw);
          return 'appended';
        } catch (err) {
          return (err as { serverResponseCode?: string }).serverResponseCode;
        }
      };
      assert.equal(await refusal('Sent', draft), 'NOPERM');
      assert.equal(await refusal('INBOX', draft), 'NOPERM');
    } finally {
      await c.logout();
    }
  });

  test('MOVE: into Trash deletes, between label folders swaps the label, out of INBOX into a label is refused', async () => {
    const [a, b] = [
      await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: inbox.address, subject: 'to move', text: 'x' }),
      await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: inbox.address, subject: 'to trash', text: 'x' }),
    ];
    await t.api('PATCH', `/messages/${a}`, { addLabels: ['todo'] });
    const c = await imapClient(t, inbox.address, t.key);
    try {
      await c.mailboxOpen('todo');
      assert.ok(await c.messageMove('1:*', 'done'));
      assert.deepEqual((await t.api('GET', `/messages/${a}`)).body.labels, ['done']);
      assert.equal(c.mailbox && c.mailbox.exists, 0, 'told as EXPUNGE');
      await c.mailboxOpen('INBOX');
      const uidOf = async (subject: string) => ((await c.search({ subject }, { uid: true })) || [])[0];
      // imapflow answers false for a refused MOVE (the NO [CANNOT] itself: imap-bounds.test.ts).
      assert.equal(await c.messageMove(String(await uidOf('to move')), 'done', { uid: true }), false);
      assert.deepEqual((await t.api('GET', `/messages/${a}`)).body.labels, ['done']);
      assert.ok(await c.messageMove(String(await uidOf('to trash')), 'Trash', { uid: true }));
      assert.equal((await t.api('GET', `/messages/${b}`)).status, 404);
      await c.mailboxOpen('Trash');
      assert.equal(c.mailbox && c.mailbox.exists, 0);
    } finally {
      await c.logout();
    }
    await t.api('DELETE', `/messages/${a}`);
  });

  test('UIDs and UIDVALIDITY survive a restart; new mail gets the next UID', async () => {
    let c = await imapClient(t, inbox.address, t.key);
    const before = await c.mailboxOpen('INBOX');
    const uidsBefore = [];
    for await (const m of c.fetch('1:*', { uid: true })) uidsBefore.push(m.uid);
    await c.logout();
    await t.close();
    t = await startTestServer(IMAP, { dataDir });
    await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: inbox.address, subject: 'after restart', text: 'x' });
    c = await imapClient(t, inbox.address, await keyOf(t));
    try {
      const box = await c.mailboxOpen('INBOX');
      assert.equal(box.uidValidity, before.uidValidity);
      const seen = [];
      for await (const m of c.fetch('1:*', { uid: true, envelope: true })) seen.push(m.uid);
      assert.deepEqual(seen.slice(0, -1), uidsBefore);
      assert.equal(seen.at(-1), before.uidNext, 'the next UID after the restart');
      const last = await c.fetchOne('*', { envelope: true });
      assert.equal(last && last.envelope?.subject, 'after restart');
    } finally {
      await c.logout();
    }
  });

  /** The restarted server made a new main account: a new key of the inbox's account. */
  async function keyOf(server: TestServer): Promise<string> {
    const row = (await server.server.ctx.store.rows<[string]>(server.server.ctx.db, 'SELECT account_id FROM inboxes WHERE id = ?', [inbox.id]))[0];
    return (await createApiKey(server.server.ctx, row[0], { name: 'imap' })).key;
  }

  test("refusals: a wrong key, another account's key, a key without read, an unknown inbox", async () => {
    const other = await t.newAccount('other');
    const accountId = (await t.server.ctx.store.rows<[string]>(t.server.ctx.db, 'SELECT account_id FROM inboxes WHERE id = ?', [inbox.id]))[0][0];
    const sendOnly = await createApiKey(t.server.ctx, accountId, { name: 'send only', scopes: ['send'] });
    assert.equal(await loginRefusal(t, inbox.address, 'mr_live_nonsense'), 'AUTHENTICATIONFAILED');
    assert.equal(await loginRefusal(t, inbox.address, other.key), 'AUTHENTICATIONFAILED');
    assert.equal(await loginRefusal(t, inbox.address, sendOnly.key), 'AUTHENTICATIONFAILED');
    assert.equal(await loginRefusal(t, 'nobody@agents.test', other.key), 'AUTHENTICATIONFAILED');
  });
});
