// What a new user meets in the first minutes (issue 21): `GET /` leads to the dashboard,
// `mailroom --version`, the start-up block, a busy port, the first-start hint.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { createAccount } from '../../src/domain/accounts.ts';
import { createInbox, getInbox } from '../../src/domain/inboxes.ts';
import { silentLogger } from '../../src/log.ts';
import { runCli, writeTestConfig } from '../support/cli.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const PKG_VERSION: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

describe('GET /', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t?.close();
  });

  test('redirects to the dashboard (302), without a key; the dashboard answers there', async () => {
    const res = await fetch(`${t.url}/`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/dashboard');
    const followed = await fetch(`${t.url}/`);
    assert.equal(followed.status, 200);
    assert.equal(new URL(followed.url).pathname, '/dashboard');
    assert.match(followed.headers.get('content-type') ?? '', /^text\/html/);
  });
});

describe('mailroom --version', () => {
  test('prints the version from package.json and exits 0', async () => {
    for (const flag of ['--version', '-V']) {
      const res = await runCli([flag]);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(res.stdout, `${PKG_VERSION}\n`);
    }
  });
});

describe('config validation at start', () => {
  test('serve refuses a bad hostname and a public_url without a scheme: one line each, exit 2, nothing started', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-first-'));
    const config = join(dir, 'mailroom.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(join(dir, 'data'))}\nhostname = "mail example"\n[http]\nlisten = "127.0.0.1:0"\npublic_url = "mail.example.com"\n`);
    const res = await runCli(['serve', '--config', config]);
    assert.equal(res.code, 2);
    assert.equal(res.stdout, '');
    const lines = res.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 2, res.stderr);
    assert.match(lines[0], /^mailroom: config key `hostname`: "mail example" is not a valid DNS host name/);
    assert.match(lines[1], /^mailroom: config key `http\.public_url`: expected an absolute http:\/\/ or https:\/\/ URL/);
  });
});

describe('mailroom inboxes by address', () => {
  test('suspend, unsuspend and set-limit take an address as well as an id; set-limit errors are worded like the API', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-first-'));
    const config = writeTestConfig(dir);
    const ctx = createContext(loadConfig(config), silentLogger);
    let accountId: string;
    let id: string;
    try {
      accountId = createAccount(ctx, 'support').id;
      id = createInbox(ctx, accountId, { address: 'helpdesk@agents.test' }).id;
    } finally {
      closeContext(ctx);
    }
    const status = () => {
      const c = createContext(loadConfig(config), silentLogger);
      try {
        const i = getInbox(c, accountId, id);
        return { status: i.status, limit: i.dailySendLimit };
      } finally {
        closeContext(c);
      }
    };

    const suspended = await runCli(['inboxes', 'suspend', 'HelpDesk@agents.test', '--json', '--config', config]);
    assert.equal(suspended.code, 0, suspended.stderr);
    assert.equal(JSON.parse(suspended.stdout).id, id);
    assert.equal(status().status, 'suspended');
    assert.equal((await runCli(['inboxes', 'unsuspend', 'helpdesk@agents.test', '--config', config])).code, 0);
    assert.equal(status().status, 'active');
    const limited = await runCli(['inboxes', 'set-limit', 'helpdesk@agents.test', '7', '--json', '--config', config]);
    assert.equal(limited.code, 0, limited.stderr);
    assert.equal(JSON.parse(limited.stdout).dailySendLimit, 7);
    assert.equal(status().limit, 7);

    for (const bad of ['lots', '-1', '1.5', '99999999999']) {
      const res = await runCli(['inboxes', 'set-limit', 'helpdesk@agents.test', bad, '--config', config]);
      assert.equal(res.code, 1, bad);
      assert.equal(res.stderr, `mailroom: VALIDATION_ERROR: \`dailySendLimit\`: must be a whole number from 0 to 1000000000, got ${JSON.stringify(bad === '99999999999' ? 99999999999 : bad)}\n`, bad);
    }
    assert.equal(status().limit, 7);
    const missing = await runCli(['inboxes', 'suspend', 'nobody@agents.test', '--config', config]);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, 'mailroom: INBOX_NOT_FOUND: inbox nobody@agents.test not found\n');
  });
});
