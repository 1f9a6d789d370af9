// API keys remembered in memory (src/domain/accounts/auth-cache.ts): a key that worked is not
// read again on every request, yet a revocation, made by this process, by the CLI or by another
// node on the same PostgreSQL database, is refused from then on, and an entry is trusted for at
// most its TTL.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { TTL_MS } from '../../src/domain/accounts/auth-cache.ts';
import { rawRun } from '../../src/store/store.ts';
import { runCli } from '../support/cli.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { expectError, onEngine, startTestServer, TEST_ENGINE, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { peerSkip } from '../support/peers.ts';

describe('one server', () => {
  let t: TestServer;
  let clockOffset = 0;
  before(async () => {
    t = await startTestServer({}, { clock: { now: () => new Date(Date.now() + clockOffset) } });
  });
  after(() => t?.close());

  test('a key that worked is not read again until its entry is TTL old; then it is', async () => {
    const { key } = await createApiKey(t.server.ctx, t.accountId, { name: 'remembered' });
    assert.equal((await t.api('GET', '/inboxes', undefined, { key })).status, 200);
    // The keys table moves away: only a key the server remembers can still be accepted.
    await rawRun(t.server.ctx.db, 'ALTER TABLE api_keys RENAME TO api_keys_away');
    try {
      assert.equal((await t.api('GET', '/inboxes', undefined, { key })).status, 200, 'answered from memory');
      // A key never seen must be read, and that read fails: 503, not a guess.
      expectError(await t.api('GET', '/inboxes', undefined, { key: `mr_live_${'0'.repeat(40)}` }), 503, 'SERVICE_UNAVAILABLE');
      clockOffset = TTL_MS;
      expectError(await t.api('GET', '/inboxes', undefined, { key }), 503, 'SERVICE_UNAVAILABLE');
    } finally {
      clockOffset = 0;
      await rawRun(t.server.ctx.db, 'ALTER TABLE api_keys_away RENAME TO api_keys');
    }
    assert.equal((await t.api('GET', '/inboxes', undefined, { key })).status, 200);
  });

  test('a remembered key revoked through the API is refused at the next request; unknown keys stay refused', async () => {
    const spare = (await t.api('POST', '/account/api-keys', { name: 'spare' })).body;
    assert.equal((await t.api('GET', '/inboxes', undefined, { key: spare.key })).status, 200);
    assert.equal((await t.api('DELETE', `/account/api-keys/${spare.id}`)).status, 204);
    expectError(await t.api('GET', '/inboxes', undefined, { key: spare.key }), 401, 'UNAUTHORIZED');
    expectError(await t.api('GET', '/inboxes', undefined, { key: spare.key.slice(0, -1) + 'x' }), 401, 'UNAUTHORIZED');
  });

  test('a remembered key that expires is refused once it has', async () => {
    const { key } = await createApiKey(t.server.ctx, t.accountId, { expiresAt: new Date(Date.now() + 60_000).toISOString() });
    assert.equal((await t.api('GET', '/inboxes', undefined, { key })).status, 200);
    clockOffset = 60_000;
    try {
      expectError(await t.api('GET', '/inboxes', undefined, { key }), 401, 'UNAUTHORIZED');
    } finally {
      clockOffset = 0;
    }
  });

  test('a remembered key revoked by the CLI, another process, is refused at the next request', async () => {
    const made = await createApiKey(t.server.ctx, t.accountId, { name: 'cli victim' });
    assert.equal((await t.api('GET', '/inboxes', undefined, { key: made.key })).status, 200);
    const config = join(t.config.data_dir, 'cli.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(t.config.data_dir)}\nshared_domain = "agents.test"\n`);
    const r = await runCli(['keys', 'revoke', made.id, '--config', config]);
    assert.equal(r.code, 0, r.stderr);
    // SQLite: the CLI's commit changes data_version, read at that request. PostgreSQL: its
    // NOTIFY reaches the server a moment after the CLI exits (the TTL is far off).
    if (TEST_ENGINE === 'postgres') {
      await until('the server to refuse the key', async () => ((await t.api('GET', '/inboxes', undefined, { key: made.key })).status === 401 ? true : undefined), TTL_MS / 2);
    }
    expectError(await t.api('GET', '/inboxes', undefined, { key: made.key }), 401, 'UNAUTHORIZED');
  });
});

// Nodes share a database only on PostgreSQL: declared in the PostgreSQL pass alone (onEngine).
const skip = peerSkip(postgresMissing());

onEngine('postgres').describe('two nodes on one PostgreSQL', { skip }, () => {
  let a: TestServer;
  let b: TestServer;
  let work: string;
  // Node B's clock stands still, so its entries never reach their TTL: only A's announcement
  // can make it forget a key.
  const frozen = new Date();

  before(async () => {
    const url = await (await pgCluster()).createDatabase();
    work = mkdtempSync(join(tmpdir(), 'mailroom-auth-'));
    a = await startTestServer({ database: { url } });
    b = await startTestServer({ database: { url } }, { clock: { now: () => new Date(frozen) } });
  });

  after(async () => {
    await a?.close();
    await b?.close();
    rmSync(work, { recursive: true, force: true });
  });

  test('a key revoked on node A is refused by node B, which had it remembered', async () => {
    const spare = (await a.api('POST', '/account/api-keys', { name: 'spare' })).body;
    assert.equal((await b.api('GET', '/inboxes', undefined, { key: spare.key })).status, 200);
    assert.equal((await b.api('GET', '/inboxes', undefined, { key: spare.key })).status, 200);
    assert.equal((await a.api('DELETE', `/account/api-keys/${spare.id}`)).status, 204);
    expectError(await a.api('GET', '/inboxes', undefined, { key: spare.key }), 401, 'UNAUTHORIZED');
    await until('node B to refuse the revoked key', async () => ((await b.api('GET', '/inboxes', undefined, { key: spare.key })).status === 401 ? true : undefined));
    expectError(await b.api('GET', '/inboxes', undefined, { key: spare.key }), 401, 'UNAUTHORIZED');
    // B still serves the keys that were not revoked (it read them again).
    assert.equal((await b.api('GET', '/inboxes', undefined, { key: a.key })).status, 200);
  });
});
