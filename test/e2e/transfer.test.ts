// `mailroom export` and `mailroom import` through the real CLI: an installation filled through
// the real server (mail in over SMTP with an attachment, a domain with its DKIM key, a webhook
// with its secret, keys), exported from SQLite, imported into a real PostgreSQL (same ids, key
// hashes, secrets, bytes; counters rebuilt) and into a fresh SQLite data dir, where a server
// started on it answers the old API key and serves the old attachment. A wrong passphrase, a
// missing one and a non-empty target are refused before anything is written, and so is an
// export while a server holds the data directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectPostgres } from '../../src/store/postgres.ts';
import { runCli } from '../support/cli.ts';
import { smtpTransport } from '../support/mail.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { openDatabase } from '../../src/store/client.ts';
import { peerSkip } from '../support/peers.ts';

const PASSPHRASE = 'correct horse battery staple';
let dir: string;
let t: TestServer;
let config: string;
let archive: string;
let passFile: string;
let inboxId: string;
const snapshot: Record<string, unknown[]> = {};

const sqliteRows = (dataDir: string, query: string) => {
  const db = openDatabase(join(dataDir, 'mailroom.db'));
  try {
    return db.$client.prepare(query).raw(true).all();
  } finally {
    db.$client.close();
  }
};

/** Too large to be spooled (SPOOL_MAX_MESSAGE_BYTES): its message is stored before its reply, its source a file. */
const INVENTORY = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251));

const QUERIES: Record<string, string> = {
  spooled: 'SELECT job_id, raw FROM spooled_messages ORDER BY job_id',
  // A small outbound source is kept in the database on either engine (Blobs.rowKey).
  rowBlobs: "SELECT key, seq, data FROM blob_chunks WHERE key LIKE 'raw/rows/%' ORDER BY key, seq",
  accounts: 'SELECT id, name FROM accounts ORDER BY id',
  keys: 'SELECT id, key_hash, read_only FROM api_keys ORDER BY id',
  messages: 'SELECT id, inbox_id, thread_id, subject, raw_path, unread FROM messages ORDER BY id',
  attachments: 'SELECT id, sha256, storage_path FROM attachments ORDER BY id',
  domains: 'SELECT id, domain, dkim_private_key FROM domains ORDER BY id',
  webhooks: 'SELECT id, url, secret, is_active FROM webhooks ORDER BY id',
  counts: 'SELECT inbox_id, status, sum(n) FROM inbox_message_counts GROUP BY inbox_id, status HAVING sum(n) > 0 ORDER BY inbox_id, status',
  suppressions: 'SELECT account_id, address, reason, created_at FROM suppressions ORDER BY account_id, address',
};

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mailroom-transfer-'));
  // The source is an embedded installation whatever engine the suite runs on: SQLite to PostgreSQL is the move tested.
  // Every message small enough is spooled, and its spooled row is its stored source (src/store/blobs/spooled.ts).
  t = await startTestServer({ database: { url: '' }, smtp: { inline_processing: 0 } }, { dataDir: join(dir, 'source') });
  const inbox = await t.api('POST', '/inboxes', { address: 'transfer' });
  inboxId = inbox.body.id;
  assert.equal((await t.api('POST', '/domains', { domain: 'moving.example' })).status, 201);
  assert.equal((await t.api('POST', '/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['message.received'] })).status, 201);
  await t.api('POST', '/api-keys', { name: 'reader', readOnly: true });
  assert.equal((await t.api('POST', '/suppressions', { address: 'gone@example.net' })).status, 201);
  const transport = smtpTransport(t.server.smtpPort);
  await transport.sendMail({
    from: 'sender@example.net',
    to: inbox.body.address,
    subject: 'Moving day',
    text: 'Everything must arrive.',
    attachments: [{ filename: 'inventory.bin', content: INVENTORY }],
  });
  // Small: spooled, and kept as its own source.
  await transport.sendMail({ from: 'sender@example.net', to: inbox.body.address, subject: 'Spooled', text: 'Kept where it was spooled.' });
  transport.close();
  await until('the messages are stored', async () => ((await t.api('GET', `/inboxes/${inboxId}/messages`)).body.data.length === 2 ? true : undefined));
  // Sent (dry-run): its source is kept as rows of blob_chunks, and travels as a blob.
  const sent = await t.api('POST', `/inboxes/${inboxId}/messages`, { to: ['carol@example.net'], subject: 'Sent before moving', bodyText: 'Kept in the database.' });
  assert.equal(sent.status, 202, sent.text);
  await until('the send is final', async () => ((await t.api('GET', `/messages/${sent.body.id}`)).body.status === 'sent' ? true : undefined));
  await t.close();
  for (const [name, q] of Object.entries(QUERIES)) snapshot[name] = sqliteRows(t.dataDir, q);
  assert.equal((snapshot.rowBlobs as unknown[]).length, 1);
  config = join(dir, 'source.toml');
  writeFileSync(config, `data_dir = ${JSON.stringify(t.dataDir)}\n`);
  passFile = join(dir, 'pass');
  writeFileSync(passFile, PASSPHRASE + '\n', { mode: 0o600 });
  archive = join(dir, 'install.tar.gz');
});
after(() => rmSync(dir, { recursive: true, force: true }));

test('export needs a passphrase and says how to give one', async () => {
  const r = await runCli(['--config', config, 'export', join(dir, 'nope.tar.gz')], { env: { MAILROOM_EXPORT_PASSPHRASE: '' } });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^mailroom: a passphrase seals the secret parts .* --passphrase-file FILE or set MAILROOM_EXPORT_PASSPHRASE\n$/);
});

test('export refuses while a server holds the data directory, and writes nothing', async () => {
  const live = await startTestServer({ database: { url: '' } }, { dataDir: join(dir, 'live') });
  try {
    const liveConfig = join(dir, 'live.toml');
    writeFileSync(liveConfig, `data_dir = ${JSON.stringify(live.dataDir)}\n`);
    const out = join(dir, 'live.tar.gz');
    const r = await runCli(['--config', liveConfig, 'export', out, '--passphrase-file', passFile]);
    assert.equal(r.code, 1);
    assert.equal(r.stderr, `mailroom: the database in ${live.dataDir} is in use: stop \`mailroom serve\` first\n`);
    assert.equal(existsSync(out), false);
  } finally {
    await live.close();
  }
});

test('export writes one private archive whose secrets are sealed', async () => {
  const r = await runCli(['--config', config, 'export', archive, '--passphrase-file', passFile, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.equal(summary.source, 'sqlite');
  assert.equal(summary.tables.messages, 3);
  assert.equal(summary.tables.accounts, 1);
  assert.equal(summary.tables.spooled_messages, 1);
  assert.equal(summary.blobs, 3); // the large message's raw file, the attachment and the sent source (rows); the spooled source is a row of its table
  assert.deepEqual(summary.missing, []);
  assert.equal(statSync(archive).mode & 0o777, 0o600);
  // Neither the DKIM key nor the webhook secret is readable in the archive.
  const extract = mkdtempSync(join(dir, 'peek-'));
  const tar = await import('tar');
  await tar.extract({ file: archive, cwd: extract });
  const domainsJsonl = readFileSync(join(extract, 'tables', 'domains.jsonl'), 'utf8');
  const dkim = String((snapshot.domains![0] as unknown[])[2]);
  assert.ok(dkim.includes('PRIVATE KEY'));
  assert.ok(!domainsJsonl.includes(dkim.split('\n')[1]!));
  const webhookSecret = String((snapshot.webhooks![0] as unknown[])[2]);
  assert.ok(!readFileSync(join(extract, 'tables', 'webhooks.jsonl'), 'utf8').includes(webhookSecret));
});

describe('into PostgreSQL', { skip: peerSkip(postgresMissing()) }, () => {
  let url: string;
  before(async () => {
    url = await (await pgCluster()).createDatabase();
  });

  test('a wrong passphrase is refused before anything is written', async () => {
    const wrong = join(dir, 'wrong');
    writeFileSync(wrong, 'not the passphrase at all');
    const r = await runCli(['--config', config, 'import', archive, '--passphrase-file', wrong], { env: { MAILROOM_DATABASE_URL: url } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^mailroom: wrong passphrase \(or a damaged archive\): nothing was imported\n$/);
    const pool = connectPostgres(url, { max: 1 });
    try {
      assert.equal((await pool.query('SELECT count(*) AS n FROM accounts')).rows[0].n, 0);
    } finally {
      await pool.end();
    }
  });

  test('import keeps every id, key hash, secret and byte; the counters are rebuilt', async () => {
    const r = await runCli(['--config', config, 'import', archive, '--passphrase-file', passFile], { env: { MAILROOM_DATABASE_URL: url } });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^imported .* \(exported from sqlite at .*\): \d+ rows, 3 blobs\n$/);
    const pool = connectPostgres(url, { max: 1 });
    try {
      for (const [name, q] of Object.entries(QUERIES)) {
        const { rows } = await pool.query({ text: q, rowMode: 'array' });
        assert.deepEqual(rows, snapshot[name], name);
      }
      const [message] = snapshot.messages as string[][];
      const [attachment] = snapshot.attachments as string[][];
      for (const key of [message![4]!, attachment![2]!]) {
        const chunks = await pool.query<{ data: Buffer }>('SELECT data FROM blob_chunks WHERE key = $1 ORDER BY seq', [key]);
        assert.ok(Buffer.concat(chunks.rows.map((c) => c.data)).equals(readFileSync(join(t.dataDir, key))), key);
      }
    } finally {
      await pool.end();
    }
  });

  test('a database that already holds an installation is refused', async () => {
    const r = await runCli(['--config', config, 'import', archive, '--passphrase-file', passFile], { env: { MAILROOM_DATABASE_URL: url } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^mailroom: the target database already holds 1 account\(s\): import needs an empty one/);
  });
});

test('into a fresh SQLite data dir: a server on it takes the old key and serves the old attachment', async () => {
  const target = join(dir, 'target');
  const targetConfig = join(dir, 'target.toml');
  writeFileSync(targetConfig, `data_dir = ${JSON.stringify(target)}\n`);
  const r = await runCli(['--config', targetConfig, 'import', archive], { env: { MAILROOM_EXPORT_PASSPHRASE: PASSPHRASE } });
  assert.equal(r.code, 0, r.stderr);
  for (const [name, q] of Object.entries(QUERIES)) assert.deepEqual(sqliteRows(target, q), snapshot[name], name);
  assert.equal(statSync(join(target, 'url-signing.key')).mode & 0o777, 0o600);
  assert.equal(readFileSync(join(target, 'url-signing.key'), 'utf8'), readFileSync(join(t.dataDir, 'url-signing.key'), 'utf8'));
  const moved = await startTestServer({ database: { url: '' } }, { dataDir: target });
  try {
    const list = await moved.api('GET', `/inboxes/${inboxId}/messages`, undefined, { key: t.key });
    assert.equal(list.status, 200);
    const moving = list.body.data.find((m: { subject: string }) => m.subject === 'Moving day');
    const att = moving.attachments[0];
    const got = await fetch(att.url.replace(/^http:\/\/[^/]+/, moved.url));
    assert.equal(got.status, 200);
    assert.ok(Buffer.from(await got.arrayBuffer()).equals(INVENTORY));
    const spooled = list.body.data.find((m: { subject: string }) => m.subject === 'Spooled');
    const raw = await fetch(`${moved.url}/messages/${spooled.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(raw.status, 200);
    assert.ok(Buffer.from(await raw.arrayBuffer()).equals((snapshot.spooled as Buffer[][])[0]![1]!), 'the spooled source came with its table');
    const sent = list.body.data.find((m: { subject: string }) => m.subject === 'Sent before moving');
    const source = await fetch(`${moved.url}/messages/${sent.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(source.status, 200);
    assert.ok(Buffer.from(await source.arrayBuffer()).equals((snapshot.rowBlobs as Buffer[][])[0]![2]!), 'the sent source came as rows');
  } finally {
    await moved.close();
  }
});

test('an archive naming a blob path outside the blob directories is refused and nothing is imported', async () => {
  const tar = await import('tar');
  const work = mkdtempSync(join(dir, 'crafted-'));
  await tar.extract({ file: archive, cwd: work });
  const jsonl = join(work, 'tables', 'messages.jsonl');
  const rows = readFileSync(jsonl, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  rows[0]!.raw_path = '../../../../tmp/mailroom-evil.eml';
  writeFileSync(jsonl, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const crafted = join(dir, 'crafted.tar.gz');
  await tar.create({ gzip: true, file: crafted, cwd: work }, ['manifest.json', 'secrets.enc', 'tables', 'blobs']);
  const target = join(dir, 'crafted-target');
  const targetConfig = join(dir, 'crafted.toml');
  writeFileSync(targetConfig, `data_dir = ${JSON.stringify(target)}\n`);
  const r = await runCli(['--config', targetConfig, 'import', crafted], { env: { MAILROOM_EXPORT_PASSPHRASE: PASSPHRASE } });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^mailroom: refusing messages\.raw_path "\.\.\/\.\.\/\.\.\/\.\.\/tmp\/mailroom-evil\.eml": not a blob key mailroom writes; nothing was imported\n$/);
  assert.deepEqual(sqliteRows(target, 'SELECT count(*) FROM accounts'), [[0]]);
});
