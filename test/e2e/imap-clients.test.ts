// IMAP with the clients people and scripts use, on loopback: Python's imaplib (a script reading
// INBOX and the label folders, marking and searching) and mbsync (isync: a whole mailbox pulled
// into a Maildir, then a flag changed locally and pushed back). Each sees the same mail, flags
// and labels as the API. Dovecot's imaptest is not packaged by Debian (docs/imap.md).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { imapPort } from '../support/imap.ts';
import { deliverMail } from '../support/mail.ts';
import { peerSkip, toolMissing } from '../support/peers.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const run = promisify(execFile);
const NO_PYTHON = peerSkip(toolMissing('python3', ['--version'], 'python3'));
const NO_MBSYNC = peerSkip(toolMissing('mbsync', ['--version'], 'isync'));

let t: TestServer;
const ids: string[] = [];

/** The inbox's messages as the API lists them, oldest first. */
async function apiMessages(inboxId: string): Promise<Array<{ id: string; subject: string; unread: boolean; labels: string[]; size: number }>> {
  return (await t.api('GET', `/inboxes/${inboxId}/messages?limit=100`)).body.data.reverse();
}

async function seed(local: string): Promise<{ id: string; address: string }> {
  const inbox = (await t.api('POST', '/inboxes', { address: local })).body;
  for (const subject of ['from python one', 'plain two', 'labelled three']) {
    ids.push(await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: inbox.address, subject, text: `text of ${subject}` }));
  }
  await t.api('PATCH', `/messages/${ids.at(-1)}`, { addLabels: ['work'], unread: false });
  return inbox;
}

before(async () => {
  t = await startTestServer({ imap: { listen: '127.0.0.1:0' } });
});
after(() => t?.close());

describe('Python imaplib', { skip: NO_PYTHON }, () => {
  test('reads INBOX and the label folders as the API has them, marks and searches', async () => {
    const inbox = await seed('python');
    const api = await apiMessages(inbox.id);
    const { stdout } = await run('python3', [join(import.meta.dirname, '../support/imap_client.py'), '127.0.0.1', String(imapPort(t)), inbox.address, t.key]);
    const seen = JSON.parse(stdout);
    assert.deepEqual(seen.folders, ['INBOX', 'Sent', 'Drafts', 'Trash', 'work']);
    assert.equal(seen.exists, 3);
    assert.deepEqual(
      seen.messages.map((m: { subject: string; flags: string[]; size: number }) => [m.subject, m.flags, m.size]),
      api.map((m) => [m.subject, m.unread ? [] : ['\\Seen', ...m.labels].sort(), m.size]),
    );
    for (const m of seen.messages) assert.equal(m.sourceBytes, m.size);
    assert.deepEqual(seen.searchSubjectPython, [seen.messages[0].uid]);
    assert.deepEqual(seen.searchUnseen, [seen.messages[1].uid]);
    assert.deepEqual(seen.labelFolders, { work: [1] });
    // What the script changed, the API shows.
    const after = await apiMessages(inbox.id);
    assert.equal(after[0].unread, false);
    assert.deepEqual(after[0].labels, ['from-python']);
  });
});

describe('mbsync (isync)', { skip: NO_MBSYNC }, () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'mailroom-mbsync-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const sync = async (address: string) => {
    const config = join(dir, 'mbsyncrc');
    writeFileSync(
      config,
      [
        'IMAPAccount mailroom',
        'Host 127.0.0.1',
        `Port ${imapPort(t)}`,
        `User ${address}`,
        `Pass ${t.key}`,
        'SSLType None',
        'AuthMechs LOGIN',
        '',
        'IMAPStore remote',
        'Account mailroom',
        '',
        'MaildirStore local',
        `Path ${join(dir, 'mail')}/`,
        `Inbox ${join(dir, 'mail', 'INBOX')}`,
        'SubFolders Verbatim',
        '',
        'Channel mailroom',
        'Far :remote:',
        'Near :local:',
        'Patterns *',
        'Create Near',
        'Sync All',
        `SyncState ${join(dir, 'state')}/`,
        '',
      ].join('\n'),
    );
    mkdirSync(join(dir, 'mail'), { recursive: true });
    mkdirSync(join(dir, 'state'), { recursive: true });
    return run('mbsync', ['-c', config, '-a']);
  };

  /** Maildir files of a folder: name and flags (the letters after ":2,"). */
  const maildir = (folder: string) =>
    ['cur', 'new'].flatMap((sub) => {
      try {
        return readdirSync(join(dir, 'mail', folder, sub)).map((name) => ({ path: join(dir, 'mail', folder, sub, name), flags: /:2,([A-Z]*)$/.exec(name)?.[1] ?? '' }));
      } catch {
        return [];
      }
    });

  test('pulls every folder with its flags, and pushes a flag changed locally', async () => {
    const inbox = await seed('mbsync');
    await sync(inbox.address);
    const api = await apiMessages(inbox.id);
    const local = maildir('INBOX');
    assert.equal(local.length, api.length);
    assert.equal(local.filter((f) => f.flags.includes('S')).length, api.filter((m) => !m.unread).length);
    assert.equal(maildir('work').length, 1);
    assert.equal(maildir('Sent').length, 0);
    // Read one unread message locally: the next sync marks it read on the server.
    const unread = local.find((f) => !f.flags.includes('S'))!;
    renameSync(unread.path, unread.path.replace(/:2,([A-Z]*)$/, (_m, f: string) => `:2,${[...f, 'S'].sort().join('')}`).replace('/new/', '/cur/'));
    await sync(inbox.address);
    const after = await apiMessages(inbox.id);
    assert.equal(after.filter((m) => m.unread).length, api.filter((m) => m.unread).length - 1);
  });
});
