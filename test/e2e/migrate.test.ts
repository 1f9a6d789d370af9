// `mailroom migrate` against both engines, through the real CLI: the embedded SQLite file and a
// real PostgreSQL named by MAILROOM_DATABASE_URL (the harness's private cluster). A second run
// applies nothing; the password never reaches the output; a URL that is not PostgreSQL's is
// refused with one line naming the setting (exit 2, as every config error); the CLI runs on PostgreSQL.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectPostgres } from '../../src/store/postgres.ts';
import { readMigrations } from '../../src/store/migrate-sqlite.ts';
import { readPgMigrations } from '../../src/store/migrate.ts';
import { runCli } from '../support/cli.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { writeFileSync } from 'node:fs';
import { peerSkip } from '../support/peers.ts';

let dir: string;
let config: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'mailroom-migrate-'));
  config = join(dir, 'mailroom.toml');
  writeFileSync(config, `data_dir = ${JSON.stringify(join(dir, 'data'))}\n`);
});
after(() => rmSync(dir, { recursive: true, force: true }));

test('migrate on SQLite applies every migration once', async () => {
  const total = readMigrations().length;
  const first = await runCli(['--config', config, 'migrate']);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, new RegExp(`^SQLite .*mailroom\\.db: ${total} migration\\(s\\) applied; schema at ${total} \\(${total} in all\\)\\n$`));
  const again = await runCli(['--config', config, 'migrate', '--json']);
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual({ ...JSON.parse(again.stdout), location: undefined }, { database: 'sqlite', applied: 0, current: total, total, location: undefined });
});

test('a database URL that is not PostgreSQL is refused with one line', async () => {
  const r = await runCli(['--config', config, 'migrate'], { env: { MAILROOM_DATABASE_URL: 'mysql://root:hunter2@db/mail' } });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^mailroom: environment variable MAILROOM_DATABASE_URL \(overrides database\.url\): expected "" or a PostgreSQL URL .* got a mysql:\/\/ URL/);
  assert.doesNotMatch(r.stderr + r.stdout, /hunter2/);
});

describe('on PostgreSQL', { skip: peerSkip(postgresMissing()) }, () => {
  let url: string;
  before(async () => {
    url = (await (await pgCluster()).createDatabase()).replace('mailroom@', 'mailroom:s3cret-pw@');
  });

  test('migrate applies the PostgreSQL schema once; the password is not printed', async () => {
    const total = readPgMigrations().length;
    const first = await runCli(['--config', config, 'migrate'], { env: { MAILROOM_DATABASE_URL: url } });
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, new RegExp(`^PostgreSQL postgres://mailroom:\\*\\*\\*@127\\.0\\.0\\.1:\\d+/\\w+: ${total} migration\\(s\\) applied; schema at ${total} \\(${total} in all\\)\\n$`));
    assert.doesNotMatch(first.stdout + first.stderr, /s3cret-pw/);
    const again = await runCli(['--config', config, 'migrate'], { env: { MAILROOM_DATABASE_URL: url } });
    assert.match(again.stdout, / 0 migration\(s\) applied/);
    const pool = connectPostgres(url, { max: 1 });
    try {
      const { rows } = await pool.query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
      const tables = rows.map((r) => r.table_name);
      for (const t of ['accounts', 'messages', 'jobs', 'inbox_message_counts', 'blob_chunks', 'drafts']) assert.ok(tables.includes(t), t);
    } finally {
      await pool.end();
    }
  });

  test('two migrators at once: one applies, the other waits and finds nothing to do', async () => {
    const fresh = await (await pgCluster()).createDatabase();
    const [a, b] = await Promise.all([0, 1].map(() => runCli(['--config', config, 'migrate', '--json'], { env: { MAILROOM_DATABASE_URL: fresh } })));
    assert.equal(a!.code, 0, a!.stderr);
    assert.equal(b!.code, 0, b!.stderr);
    const applied = [a!, b!].map((r) => JSON.parse(r.stdout).applied as number).sort();
    assert.deepEqual(applied, [0, readPgMigrations().length]);
  });

  test('the CLI works on PostgreSQL: what it writes is in the database, and no SQLite file is made', async () => {
    const own = mkdtempSync(join(tmpdir(), 'mailroom-migrate-pg-'));
    try {
      const ownConfig = join(own, 'mailroom.toml');
      writeFileSync(ownConfig, `data_dir = ${JSON.stringify(join(own, 'data'))}\n`);
      const created = await runCli(['--config', ownConfig, 'keys', 'create', '--name', 'on-pg', '--json'], { env: { MAILROOM_DATABASE_URL: url } });
      assert.equal(created.code, 0, created.stderr);
      const id = JSON.parse(created.stdout).id as string;
      const pool = connectPostgres(url, { max: 1 });
      try {
        const { rows } = await pool.query<{ name: string }>('SELECT name FROM api_keys WHERE id = $1', [id]);
        assert.deepEqual(rows, [{ name: 'on-pg' }]);
      } finally {
        await pool.end();
      }
      assert.ok(!existsSync(join(own, 'data', 'mailroom.db')), 'no SQLite file');
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
});
