// Backup and restore as an operator runs them: `mailroom backup` (a child process) against the
// data directory of a running, busy server, `mailroom restore` into an empty directory, then a
// server on the restored directory must answer every read exactly as the original did.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupError, restoreBackup } from '../../src/store/backup.ts';
import { runCli } from '../support/cli.ts';
import { until } from '../support/wait.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { smtpTransport } from '../support/mail.ts';

let t: TestServer;
let work: string;
const keys: Record<string, string> = {};
const attachmentBytes = Buffer.from('%PDF-1.4 backup test ' + 'x'.repeat(5000));

function configFile(name: string, dataDir: string): string {
  const file = join(work, `${name}.toml`);
  writeFileSync(file, `data_dir = ${JSON.stringify(dataDir)}\nshared_domain = "agents.test"\n`);
  return file;
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'mailroom-backup-'));
  // A backup is of the embedded engine, whatever engine the suite runs on.
  t = await startTestServer({ database: { url: '' } });
  keys.main = t.key;
  keys.other = (await t.newAccount('other')).key;
  const ro = await t.api('POST', '/account/api-keys', { name: 'reader' });
  keys.extra = ro.body.key;

  for (const displayName of ['One', 'Two', 'Three']) assert.equal((await t.api('POST', '/inboxes', { displayName })).status, 201);
  const alice = await t.api('POST', '/inboxes', { address: 'alice', displayName: 'Alice' });
  assert.equal(alice.status, 201);
  assert.equal((await t.api('POST', '/inboxes', { displayName: 'Other' }, { key: keys.other })).status, 201);
  // Resources of features that may or may not be present: whatever status they answer is compared later.
  await t.api('POST', '/domains', { domain: 'backup.example' });
  await t.api('POST', '/webhooks', { url: 'http://127.0.0.1:9/hook', description: 'backup test' });
  const form = new FormData();
  form.append('file', new Blob([attachmentBytes], { type: 'application/pdf' }), 'report.pdf');
  const uploadRes = await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: form });
  const uploaded: string | undefined = uploadRes.status === 201 ? (await uploadRes.json()).id : undefined;

  // An inbound message with an attachment and a reply in the same thread, over real SMTP.
  const transport = smtpTransport(t.server.smtpPort);
  try {
    const first = await transport.sendMail({
      from: 'bob@example.org',
      to: 'alice@agents.test',
      subject: 'Quarterly report',
      text: 'See attached.',
      messageId: '<first@example.org>',
      attachments: [{ filename: 'q.pdf', content: attachmentBytes, contentType: 'application/pdf' }],
    });
    assert.match(first.response, /^250/);
    // The reply is spooled, as under load: its stored source is its spooled row, inside the
    // database (src/store/blobs/spooled.ts), which the backup carries in its snapshot.
    t.server.ctx.config.smtp.inline_processing = 0;
    const reply = await transport.sendMail({
      from: 'bob@example.org',
      to: 'alice@agents.test',
      subject: 'Re: Quarterly report',
      text: 'And again.',
      inReplyTo: '<first@example.org>',
      references: '<first@example.org>',
    });
    assert.match(reply.response, /queued as job_/);
    await until(
      'the spooled reply is stored',
      async () => (await t.api('GET', `/inboxes/${alice.body.id}/messages`)).body.data.some((m: { subject: string }) => m.subject === 'Re: Quarterly report') || undefined,
    );
  } finally {
    t.server.ctx.config.smtp.inline_processing = 8;
    transport.close();
  }
  // An outbound message (dry-run) with the uploaded attachment, finished before the backup.
  const sent = await t.api('POST', `/inboxes/${alice.body.id}/messages`, { to: ['carol@example.net'], subject: 'Outbound before backup', bodyText: 'sent', attachmentIds: uploaded ? [uploaded] : [] });
  assert.equal(sent.status, 202, sent.text);
  await until('the send is final', async () => {
    const m = (await t.api('GET', `/messages/${sent.body.id}`)).body;
    return m.status !== 'queued' && m.status !== 'sending' ? m : undefined;
  });
});

after(async () => {
  await t?.close();
  rmSync(work, { recursive: true, force: true });
});

/** Fields that change on their own: key use, the periodic domain re-check (it runs at start). */
const VOLATILE = new Set(['lastUsedAt', 'requestId', 'lastCheckedAt', 'lastCheckError', 'expiresAt']);

/** Attachment URLs carry the server's address and a fresh expiry and signature: compare their path. */
function normalise(value: any): any {
  if (Array.isArray(value)) return value.map(normalise);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k]) => !VOLATILE.has(k))
        .map(([k, v]) => [k, k === 'url' && typeof v === 'string' ? new URL(v).pathname : normalise(v)]),
    );
  }
  return value;
}

/** Every read the API offers for each account, as {path: [status, body]} (raw and downloads as text). */
async function snapshot(base: string): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const [who, key] of Object.entries(keys)) {
    const get = async (path: string) => {
      const res = await fetch(base + path, { headers: { authorization: `Bearer ${key}` } });
      const text = await res.text();
      let body: unknown = text;
      if ((res.headers.get('content-type') ?? '').includes('json')) body = JSON.parse(text);
      out[`${who} ${path}`] = [res.status, normalise(body)];
      return body as any;
    };
    const inboxes = await get('/inboxes?limit=100');
    await get('/account/api-keys');
    await get('/domains');
    const hooks = await get('/webhooks');
    for (const h of hooks?.data ?? []) await get(`/webhooks/${h.id}`);
    for (const inbox of inboxes.data) {
      await get(`/inboxes/${inbox.id}`);
      await get(`/inboxes/${inbox.id}/threads`);
      const messages = await get(`/inboxes/${inbox.id}/messages?limit=100`);
      for (const m of messages?.data ?? []) {
        await get(`/messages/${m.id}`);
        await get(`/messages/${m.id}/raw`);
        await get(`/threads/${m.threadId}`);
        for (const a of m.attachments ?? []) {
          const att = await get(`/attachments/${a.id}`);
          const dl = await fetch(att.url.replace(t.url, base));
          out[`${who} download ${a.id}`] = [dl.status, Buffer.from(await dl.arrayBuffer()).toString('base64')];
        }
      }
    }
  }
  return out;
}

test('on PostgreSQL, backup and restore refuse and name the tools that do it', async () => {
  const env = { MAILROOM_DATABASE_URL: 'postgres://mailroom@127.0.0.1:9/none' };
  const config = configFile('pg', join(work, 'pg-data'));
  for (const args of [
    ['backup', join(work, 'pg.tar.gz')],
    ['restore', join(work, 'pg.tar.gz')],
  ]) {
    const r = await runCli(['--config', config, ...args], { env });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /^mailroom: backup and restore work on the embedded SQLite database; on PostgreSQL use pg_dump \/ pg_restore .*mailroom export/);
  }
  assert.equal(existsSync(join(work, 'pg.tar.gz')), false);
});

test('backup while the server writes, restore into an empty directory, every read answers the same', async () => {
  const before = await snapshot(t.url);
  // The fixture really holds messages with attachments (the inbound feature is in place).
  const withAttachment = Object.entries(before).filter(([k]) => k.includes(' download '));
  assert.ok(withAttachment.length >= 1, 'no attachment download in the snapshot');
  for (const [, [status, body]] of withAttachment as Array<[string, [number, string]]>) {
    assert.equal(status, 200);
    assert.deepEqual(Buffer.from(body, 'base64'), attachmentBytes);
  }

  // What a backup killed part-way leaves behind: removed by the next backup once an hour old.
  const stale = join(t.dataDir, '.mailroom-staging-killed');
  mkdirSync(join(stale, 'raw'), { recursive: true });
  writeFileSync(join(stale, 'raw', 'x.eml'), 'left over');
  const hoursAgo = new Date(Date.now() - 2 * 3_600_000);
  utimesSync(stale, hoursAgo, hoursAgo);

  const archive = join(work, 'snap.tar.gz');
  const liveConfig = configFile('live', t.dataDir);
  // Writes keep arriving while the backup runs; the snapshot must still be consistent.
  let writing = true;
  let written = 0;
  const writer = (async () => {
    while (writing && written < 40) {
      const res = await t.api('POST', '/inboxes', { displayName: `during ${written}` }, { key: keys.other });
      assert.equal(res.status, 201);
      written++;
    }
  })();
  const backup = await runCli(['backup', archive, '--json', '--config', liveConfig]);
  writing = false;
  await writer;
  assert.equal(backup.code, 0, backup.stderr);
  const summary = JSON.parse(backup.stdout);
  assert.equal(summary.file, archive);
  assert.deepEqual(summary.missing, []);
  assert.ok(summary.files >= 4, `expected raw messages, attachments and the signing key, got ${summary.files} files`);
  assert.equal(statSync(archive).mode & 0o077, 0, 'the archive holds keys: it must not be readable by others');
  assert.ok(!readdirSync(t.dataDir).some((n) => n.startsWith('.mailroom-staging-')), 'staging directory left behind (or a stale one kept)');

  // Restore into a fresh directory, then a second restore into the now non-empty one is refused.
  const restoredDir = join(work, 'restored');
  const restoredConfig = configFile('restored', restoredDir);
  const restored = await runCli(['restore', archive, '--config', restoredConfig]);
  assert.equal(restored.code, 0, restored.stderr);
  assert.ok(existsSync(join(restoredDir, 'url-signing.key')));
  const again = await runCli(['restore', archive, '--config', restoredConfig]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /not empty.*--force/);
  // --force over the directory of a running server is refused: the database is in use.
  await assert.rejects(restoreBackup(archive, t.dataDir, { force: true }), (e: Error) => e instanceof BackupError && /in use/.test(e.message));
  // A file that is not a backup is refused without touching anything.
  const junk = join(work, 'junk.tar.gz');
  writeFileSync(junk, 'not a tar file');
  const junkDir = join(work, 'junk-dir');
  await assert.rejects(restoreBackup(junk, junkDir), (e: Error) => e instanceof BackupError && /not a readable mailroom backup/.test(e.message));
  assert.ok(!existsSync(junkDir));

  // A server on the restored directory answers exactly what the original answered before the backup.
  const r = await startTestServer({ database: { url: '' } }, { dataDir: restoredDir });
  try {
    const after = await snapshot(r.url);
    const otherInboxes = (k: string) => k.startsWith('other /inboxes?');
    for (const key of Object.keys(before)) {
      if (otherInboxes(key)) continue; // grew while the backup ran: checked below
      assert.deepEqual(after[key], before[key], key);
    }
    // The concurrent writes: the snapshot holds a prefix of them, each inbox whole.
    const [, list] = after['other /inboxes?limit=100'] as [number, any];
    const during = list.data.filter((i: any) => i.displayName.startsWith('during '));
    assert.ok(during.length <= written);
    assert.equal(list.total, 1 + during.length);
    // Restored keys authenticate; the restored instance accepts new writes.
    assert.equal((await r.api('POST', '/inboxes', {}, { key: keys.main })).status, 201);
  } finally {
    await r.close();
  }

  // --force replaces a stopped instance's directory.
  const forced = await restoreBackup(archive, restoredDir, { force: true });
  assert.equal(forced.manifest.tables.inboxes, summary.tables.inboxes);
  assert.ok(existsSync(join(restoredDir, 'mailroom.db')));
  assert.deepEqual(
    readdirSync(work).filter((n) => n.startsWith('.mailroom-staging-')),
    [],
    'restore left its staging or the previous contents behind',
  );
});
