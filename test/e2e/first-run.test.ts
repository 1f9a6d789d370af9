// What a new user meets in the first minutes (issue 21): `GET /` leads to the dashboard,
// `mailroom --version`, the start-up block, a busy port, the first-start hint.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
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
