// What a new user meets in the first minutes (issue 21): `GET /` leads to the dashboard,
// `mailroom --version`, the start-up block, a busy port, the first-start hint.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../support/cli.ts';
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
