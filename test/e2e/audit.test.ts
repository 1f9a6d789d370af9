// The audit log (PRODUCT.md "Audit"): keys made and revoked, list entries added and removed
// (through the API, by a key) and inboxes suspended (the CLI) each leave one entry with their
// actor, written with the change (a refused change leaves none); GET /audit needs `review`,
// lists newest first with `action`, `after` and `limit`, shows one account only; `mailroom
// audit` prints the same; entries go after `retention.audit`. On both engines.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sweepAudit } from '../../src/domain/audit/audit.ts';
import { runCli } from '../support/cli.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let reviewer: string;
/** Added to the server's clock (retention). */
let skew = 0;

before(async () => {
  t = await startTestServer({}, { clock: { now: () => new Date(Date.now() + skew) } });
  reviewer = (await t.api('POST', '/account/api-keys', { name: 'person', scopes: ['read', 'review'] })).body.key;
});

after(async () => {
  await t?.close();
});

const audit = async (query = '', key = reviewer) => {
  const res = await t.api('GET', `/audit${query}`, undefined, { key });
  assert.equal(res.status, 200, res.text);
  return res.body.data as Array<{ id: string; createdAt: string; actor: { type: string; id?: string }; action: string; target: string; detail: Record<string, unknown> }>;
};

describe('audit log', () => {
  test('keys made and revoked through the API name the key that acted', async () => {
    const made = await t.api('POST', '/account/api-keys', { name: 'agent', scopes: ['read', 'send'] });
    assert.equal(made.status, 201);
    assert.equal((await t.api('DELETE', `/account/api-keys/${made.body.id}`)).status, 204);
    const [revoked, created] = await audit('?limit=2');
    assert.deepEqual(
      { id: created!.id.slice(0, 4), actor: created!.actor, action: created!.action, target: created!.target, detail: created!.detail },
      { id: 'aud_', actor: { type: 'key', id: t.keyId }, action: 'key.created', target: made.body.id, detail: { name: 'agent', scopes: ['read', 'send'], inboxIds: [] } },
    );
    assert.deepEqual([revoked!.action, revoked!.target, revoked!.actor], ['key.revoked', made.body.id, { type: 'key', id: t.keyId }]);
    assert.ok(!Number.isNaN(Date.parse(created!.createdAt)));
  });

  test('list entries added and removed; a refused change leaves no entry', async () => {
    const entry = await t.api('POST', '/lists', { direction: 'send', kind: 'allow', entry: 'example.org' });
    assert.equal(entry.status, 201, entry.text);
    // The same entry again changes nothing: no second entry.
    assert.equal((await t.api('POST', '/lists', { direction: 'send', kind: 'allow', entry: 'example.org' })).status, 200);
    assert.equal((await t.api('DELETE', `/lists/${entry.body.id}`)).status, 204);
    expectError(await t.api('DELETE', `/lists/${entry.body.id}`), 404, 'LIST_ENTRY_NOT_FOUND');
    expectError(await t.api('DELETE', '/account/api-keys/key_nope'), 404, 'API_KEY_NOT_FOUND');
    const [removed, added, ...rest] = await audit();
    assert.deepEqual([removed!.action, removed!.target], ['list.removed', entry.body.id]);
    assert.deepEqual([added!.action, added!.target, added!.detail], ['list.added', entry.body.id, { direction: 'send', kind: 'allow', entry: 'example.org', inboxId: null }]);
    assert.equal(rest[0]!.action, 'key.revoked');
    assert.equal((await audit('?action=list.added')).length, 1);
  });

  test('GET /audit needs review, pages with after and limit, and shows one account', async () => {
    for (const scopes of [['read', 'send', 'manage'], ['read']]) {
      const key = (await t.api('POST', '/account/api-keys', { scopes })).body.key;
      const res = await t.api('GET', '/audit', undefined, { key });
      expectError(res, 403, 'INSUFFICIENT_SCOPE');
      assert.match(res.body.error.message, /`review`/);
    }
    const all = await audit();
    assert.ok(all.length >= 6);
    const ids = all.map((e) => e.id);
    assert.deepEqual(ids, [...ids].sort().reverse(), 'newest first');
    const first = await audit('?limit=2');
    assert.deepEqual(
      first.map((e) => e.id),
      ids.slice(0, 2),
    );
    assert.deepEqual(
      (await audit(`?limit=3&after=${ids[1]}`)).map((e) => e.id),
      ids.slice(2, 5),
    );
    expectError(await t.api('GET', '/audit?after=nope', undefined, { key: reviewer }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/audit?limit=0', undefined, { key: reviewer }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/audit?action=DROP%20TABLE', undefined, { key: reviewer }), 400, 'VALIDATION_ERROR');
    const other = await t.newAccount('other');
    // Its own key's making only (by mailroom: test harness), none of this account's.
    assert.deepEqual(
      (await audit('', other.key)).map((e) => [e.action, e.target, e.actor.type]),
      [['key.created', other.keyId, 'system']],
    );
    assert.ok(!(await audit()).some((e) => e.target === other.keyId));
  });

  test('the CLI: keys create, inboxes suspend and mailroom audit', async () => {
    const config = join(t.dataDir, 'cli.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(t.dataDir)}\nhostname = "mx.test.localhost"\nshared_domain = "agents.test"\n`);
    const cli = async (...args: string[]) => {
      const res = await runCli(['--config', config, ...args]);
      assert.equal(res.code, 0, res.stderr);
      return res.stdout;
    };
    const inbox = (await t.api('POST', '/inboxes', { address: 'watched' })).body;
    const key = JSON.parse(await cli('keys', 'create', '--account', t.accountId, '--json'));
    await cli('inboxes', 'suspend', inbox.address);
    const [suspended, created] = await audit('?limit=2');
    assert.deepEqual([suspended!.action, suspended!.target, suspended!.actor, suspended!.detail], ['inbox.suspended', inbox.id, { type: 'cli' }, { address: inbox.address }]);
    assert.deepEqual([created!.action, created!.target, created!.actor], ['key.created', key.id, { type: 'cli' }]);
    const printed = JSON.parse(await cli('audit', '--account', t.accountId, '--action', 'inbox.suspended', '--json'));
    assert.deepEqual(
      printed.data.map((e: { target: string }) => e.target),
      [inbox.id],
    );
    assert.match(await cli('audit', '--account', t.accountId), /inbox\.suspended\s+inb_/);
    const bad = await runCli(['--config', config, 'audit', '--action', 'nope']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /VALIDATION_ERROR/);
  });

  test('entries older than retention.audit are swept', async () => {
    assert.ok((await audit()).length > 0);
    skew = t.config.retention.audit + 60_000;
    try {
      assert.ok((await sweepAudit(t.server.ctx)) > 0);
      assert.deepEqual(await audit(), []);
    } finally {
      skew = 0;
    }
  });
});
