// The CLI as an operator uses it: serve's first-start key, keys/accounts/inboxes commands on
// the same data directory as a running server, clean shutdown, config errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, startServe, writeTestConfig } from '../support/cli.ts';

const tmp = () => mkdtempSync(join(tmpdir(), 'mailroom-cli-'));

async function get(url: string, key: string, init: RequestInit = {}) {
  const res = await fetch(url, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(init.headers as Record<string, string>) } });
  return { status: res.status, body: res.status === 204 ? undefined : await res.json() };
}

test('serve: first start prints one working key; CLI commands work beside the running server; SIGTERM stops cleanly', async () => {
  const dir = tmp();
  const config = writeTestConfig(dir);
  const serve = await startServe(['--config', config]);
  try {
    const printed = /(mr_live_[0-9A-Za-z]{40})/.exec(serve.stderr());
    assert.ok(printed, `no key on stderr: ${serve.stderr()}`);
    assert.match(serve.stderr(), /npm run -s mailroom -- keys create .*--config /);
    const bootKey = printed[1];
    assert.equal((await get(`${serve.url}/inboxes`, bootKey)).status, 200);

    // keys create --json prints the Created API key object; the key works against the API.
    const created = await runCli(['keys', 'create', '--name', 'agent', '--json', '--config', config]);
    assert.equal(created.code, 0, created.stderr);
    const obj = JSON.parse(created.stdout);
    assert.deepEqual(Object.keys(obj).sort(), ['expiresAt', 'id', 'inboxIds', 'key', 'message', 'name', 'prefix', 'readOnly', 'scopes']);
    assert.equal(obj.name, 'agent');
    const inbox = await get(`${serve.url}/inboxes`, obj.key, { method: 'POST', body: '{}' });
    assert.equal(inbox.status, 201);

    // Read-only keys from the CLI.
    const ro = JSON.parse((await runCli(['keys', 'create', '--read-only', '--json', '--config', config])).stdout);
    assert.equal(ro.readOnly, true);
    assert.equal((await get(`${serve.url}/inboxes`, ro.key, { method: 'POST', body: '{}' })).status, 403);

    // keys list shows prefixes, never keys.
    const list = await runCli(['keys', 'list', '--json', '--config', config]);
    assert.equal(list.code, 0);
    assert.ok(!list.stdout.includes(obj.key));
    assert.ok(JSON.parse(list.stdout).data.some((k: any) => k.id === obj.id && k.keyPrefix === obj.prefix));

    // Revoking from the CLI takes effect on the server's next request.
    const revoked = await runCli(['keys', 'revoke', obj.id, '--config', config]);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal((await get(`${serve.url}/inboxes`, obj.key)).status, 401);
    const again = await runCli(['keys', 'revoke', obj.id, '--config', config]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /not found/);

    // Support actions on inboxes are visible through the API.
    const id = inbox.body.id;
    assert.equal((await runCli(['inboxes', 'suspend', id, '--config', config])).code, 0);
    assert.equal((await get(`${serve.url}/inboxes/${id}`, bootKey)).body.status, 'suspended');
    assert.equal((await runCli(['inboxes', 'unsuspend', id, '--config', config])).code, 0);
    const limited = await runCli(['inboxes', 'set-limit', id, '7', '--json', '--config', config]);
    assert.equal(JSON.parse(limited.stdout).dailySendLimit, 7);
    const fetched = (await get(`${serve.url}/inboxes/${id}`, bootKey)).body;
    assert.equal(fetched.status, 'active');
    assert.equal(fetched.dailySendLimit, 7);
    const badLimit = await runCli(['inboxes', 'set-limit', id, 'lots', '--config', config]);
    assert.equal(badLimit.code, 1);
    const listed = JSON.parse((await runCli(['inboxes', 'list', '--json', '--config', config])).stdout);
    assert.ok(listed.data.some((i: any) => i.id === id));
    const missing = await runCli(['inboxes', 'suspend', 'inb_missing', '--config', config]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /inbox inb_missing not found/);
  } finally {
    serve.child.kill('SIGTERM');
  }
  assert.equal(await serve.exited, 0);
  assert.match(serve.stdout(), /"msg":"stopped"/);

  // A second start on the same database prints no key.
  const second = await startServe(['--config', config]);
  second.child.kill('SIGTERM');
  assert.equal(await second.exited, 0);
  assert.doesNotMatch(second.stderr(), /mr_live_/);
});

test('accounts create and list; keys for another account', async () => {
  const dir = tmp();
  const config = writeTestConfig(dir);
  const acc = await runCli(['accounts', 'create', '--name', 'acme', '--json', '--config', config]);
  assert.equal(acc.code, 0, acc.stderr);
  const account = JSON.parse(acc.stdout);
  assert.match(account.id, /^acc_/);
  const list = JSON.parse((await runCli(['accounts', 'list', '--json', '--config', config])).stdout);
  assert.deepEqual(
    list.data.map((a: any) => a.name),
    ['acme'],
  );
  const key = await runCli(['keys', 'create', '--account', account.id, '--json', '--config', config]);
  assert.equal(key.code, 0);
  const bad = await runCli(['keys', 'create', '--account', 'acc_nope', '--config', config]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /account acc_nope not found/);
  // Plain output prints the key on its own first line.
  const plain = await runCli(['keys', 'create', '--config', config]);
  assert.match(plain.stdout.split('\n')[0], /^mr_live_[0-9A-Za-z]{40}$/);
});

test('a bad config file stops every command with a message naming the key', async () => {
  const dir = tmp();
  const config = join(dir, 'bad.toml');
  writeFileSync(config, '[smtp]\nidle_timeout = "forever"\n');
  for (const args of [['serve'], ['keys', 'list']]) {
    const res = await runCli([...args, '--config', config]);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /config key `smtp\.idle_timeout`: expected a duration/);
  }
  writeFileSync(config, 'unknown_thing = 1\n');
  const res = await runCli(['keys', 'list', '--config', config]);
  assert.equal(res.code, 2);
  assert.match(res.stderr, /`unknown_thing`: unknown key/);
});
