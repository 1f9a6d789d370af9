// Key permissions (PRODUCT.md): every route needs its scope (403 INSUFFICIENT_SCOPE naming it; a
// read-only key keeps the seed's 403 FORBIDDEN on writes), a key limited to some inboxes finds
// every other inbox, message, thread and draft missing (404) and sees only its own in the
// account-wide lists, keys make keys with at most their own scopes and inboxes (API and CLI), MCP
// lists and runs only the tools of the key's scopes, and SMTP submission needs `send` and the
// inbox. On both engines (MAILROOM_TEST_ENGINE).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createHttpApp } from '../../src/http/app.ts';
import { scopeOf, type RegisteredRoute } from '../../src/http/routes.ts';
import { TOOLS } from '../../src/mcp/tools.ts';
import { rawRun } from '../../src/store/store.ts';
import { runCli } from '../support/cli.ts';
import { deliverMail } from '../support/mail.ts';
import { expectError, startTestServer, TEST_ENGINE, type ApiResponse, type TestServer } from '../support/server.ts';
import { SmtpClient } from '../support/smtp-client.ts';

const SCOPES = ['read', 'send', 'manage', 'review'];

let t: TestServer;
/** Two inboxes, each with a received message (its thread) and a draft. */
const a: Record<string, string> = {};
const b: Record<string, string> = {};
const clients: Client[] = [];

/** A new key of the main account, made over the API by the main key (all four scopes). */
async function keyWith(scopes: string[], inboxIds?: string[]): Promise<string> {
  const res = await t.api('POST', '/account/api-keys', { name: scopes.join('+'), scopes, ...(inboxIds ? { inboxIds } : {}) });
  assert.equal(res.status, 201, res.text);
  return res.body.key;
}

async function inboxWithMail(box: Record<string, string>, local: string): Promise<void> {
  const inbox = (await t.api('POST', '/inboxes', { address: local })).body;
  box.inbox = inbox.id;
  box.address = inbox.address;
  box.message = await deliverMail(t.server.smtpPort, { from: 'someone@example.org', to: inbox.address, subject: `for ${local}`, text: `hello ${local}` });
  box.thread = (await t.api('GET', `/messages/${box.message}`)).body.threadId;
  box.draft = (await t.api('POST', `/inboxes/${box.inbox}/drafts`, { to: ['someone@example.org'], subject: 'draft', bodyText: 'a draft' })).body.id;
}

before(async () => {
  t = await startTestServer({ limits: { requests_per_minute: 100_000 }, submission: { listen: '127.0.0.1:0' } });
  await inboxWithMail(a, 'alpha');
  await inboxWithMail(b, 'beta');
});

after(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await t?.close();
});

/** Every route a key reaches (not public, not the MCP endpoint); ids in its path name nothing but `:inboxId`. */
function keyedRoutes(): Array<{ method: string; path: string; url: string }> {
  return (createHttpApp(t.server.ctx).locals.routes as RegisteredRoute[])
    .filter((r) => !r.options.public && !r.options.protocol)
    .map((r) => ({ method: r.method, path: r.path, url: r.path.replace(':inboxId', a.inbox!).replace(/:\w+/g, 'x_missing') }));
}

describe('scopes', () => {
  test('every route refuses a key without its scope: 403 INSUFFICIENT_SCOPE naming the scope', async () => {
    const keys = Object.fromEntries(await Promise.all(SCOPES.map(async (s) => [s, await keyWith(SCOPES.filter((x) => x !== s))])));
    const routes = keyedRoutes();
    assert.ok(routes.length > 40, `only ${routes.length} routes`);
    for (const r of routes) {
      const scope = scopeOf(r.method, r.path);
      const res = await t.api(r.method, r.url, r.method === 'GET' ? undefined : {}, { key: keys[scope] });
      expectError(res, 403, 'INSUFFICIENT_SCOPE');
      assert.ok(res.body.error.message.includes(`\`${scope}\``), `${r.method} ${r.path}: ${res.body.error.message}`);
    }
  });

  test('a key with only a route’s scope passes the scope check on it', async () => {
    const keys = Object.fromEntries(await Promise.all(SCOPES.map(async (s) => [s, await keyWith([s])])));
    // The stream stays open: it is checked below on its own.
    for (const r of keyedRoutes().filter((x) => x.path !== '/events/stream')) {
      const res = await t.api(r.method, r.url, r.method === 'GET' ? undefined : {}, { key: keys[scopeOf(r.method, r.path)] });
      assert.ok(res.status !== 403 && res.status < 500, `${r.method} ${r.path} with ${scopeOf(r.method, r.path)}: ${res.status} ${res.text.slice(0, 200)}`);
    }
  });

  test('the table: sending and marks need send, setup and deleting mail need manage', async () => {
    const sender = await keyWith(['read', 'send']);
    const admin = await keyWith(['read', 'manage']);
    assert.equal((await t.api('POST', `/inboxes/${a.inbox}/messages`, { to: ['x@example.org'], subject: 's', bodyText: 'hi' }, { key: sender })).status, 202);
    assert.equal((await t.api('PATCH', `/messages/${a.message}`, { unread: false }, { key: sender })).status, 200);
    expectError(await t.api('POST', '/inboxes', {}, { key: sender }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await t.api('POST', '/lists', { direction: 'send', kind: 'allow', entry: 'example.org' }, { key: sender }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await t.api('DELETE', `/messages/${a.message}`, undefined, { key: sender }), 403, 'INSUFFICIENT_SCOPE');
    const list = await t.api('POST', '/lists', { direction: 'send', kind: 'allow', entry: 'example.org' }, { key: admin });
    assert.equal(list.status, 201, list.text);
    assert.equal((await t.api('DELETE', `/lists/${list.body.id}`, undefined, { key: admin })).status, 204);
    expectError(await t.api('POST', `/inboxes/${a.inbox}/messages`, { to: ['x@example.org'], subject: 's', bodyText: 'hi' }, { key: admin }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await t.api('PATCH', `/threads/${a.thread}`, { unread: true }, { key: admin }), 403, 'INSUFFICIENT_SCOPE');
  });

  test('a read-only key keeps the seed’s 403 FORBIDDEN on writes; a key without read gets INSUFFICIENT_SCOPE on reads', async () => {
    const ro = await keyWith(['read']);
    assert.equal((await t.api('GET', '/inboxes', undefined, { key: ro })).status, 200);
    expectError(await t.api('POST', '/inboxes', {}, { key: ro }), 403, 'FORBIDDEN');
    expectError(await t.api('POST', `/inboxes/${a.inbox}/messages`, { to: ['x@example.org'], subject: 's', bodyText: 'hi' }, { key: ro }), 403, 'FORBIDDEN');
    const blind = await keyWith(['send']);
    expectError(await t.api('GET', '/inboxes', undefined, { key: blind }), 403, 'INSUFFICIENT_SCOPE');
  });

  test('key objects show scopes and inboxIds', async () => {
    const made = await t.api('POST', '/account/api-keys', { scopes: ['send', 'read', 'send'], inboxIds: [a.inbox] });
    assert.equal(made.status, 201, made.text);
    assert.deepEqual([made.body.scopes, made.body.inboxIds, made.body.readOnly], [['read', 'send'], [a.inbox], false]);
    const listed = (await t.api('GET', '/account/api-keys')).body.data;
    assert.deepEqual(listed.find((k: { id: string }) => k.id === made.body.id).scopes, ['read', 'send']);
    assert.deepEqual(listed.find((k: { id: string }) => k.id === t.keyId).scopes, SCOPES);
    assert.deepEqual(listed.find((k: { id: string }) => k.id === t.keyId).inboxIds, []);
  });
});

describe('keys made before scopes', () => {
  test('the migration gives read-only keys only read, and the others all four', async () => {
    const file = TEST_ENGINE === 'postgres' ? 'migrations/pg/0009_key_scopes.sql' : 'migrations/0014_key_scopes.sql';
    const statements = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8').split('--> statement-breakpoint');
    const dataMigration = statements
      .at(-1)!
      .replace(/^--.*$/gm, '')
      .trim();
    const ro = await t.api('POST', '/account/api-keys', { scopes: ['read'] });
    const rw = await t.api('POST', '/account/api-keys', { scopes: ['read', 'send'] });
    // As the columns' defaults left them: every key with all four scopes, read_only as it was.
    await rawRun(t.server.ctx.db, `UPDATE api_keys SET scopes = '["read","send","manage","review"]' WHERE id IN ('${ro.body.id}', '${rw.body.id}')`);
    await rawRun(t.server.ctx.db, `UPDATE api_keys SET read_only = 0 WHERE id = '${rw.body.id}'`);
    await rawRun(t.server.ctx.db, dataMigration);
    const listed = (await t.api('GET', '/account/api-keys')).body.data as Array<{ id: string; scopes: string[] }>;
    assert.deepEqual(listed.find((k) => k.id === ro.body.id)!.scopes, ['read']);
    assert.deepEqual(listed.find((k) => k.id === rw.body.id)!.scopes, SCOPES);
  });
});

describe('key creation', () => {
  test('a key makes keys with at most its own scopes and inboxes', async () => {
    const limited = await keyWith(['read', 'send', 'manage'], [a.inbox!]);
    const inherit = await t.api('POST', '/account/api-keys', {}, { key: limited });
    assert.equal(inherit.status, 201, inherit.text);
    assert.deepEqual([inherit.body.scopes, inherit.body.inboxIds], [['read', 'send', 'manage'], [a.inbox]]);
    const narrower = await t.api('POST', '/account/api-keys', { scopes: ['read'] }, { key: limited });
    assert.deepEqual([narrower.status, narrower.body.scopes, narrower.body.inboxIds], [201, ['read'], [a.inbox]]);
    const review = await t.api('POST', '/account/api-keys', { scopes: ['read', 'review'] }, { key: limited });
    expectError(review, 403, 'INSUFFICIENT_SCOPE');
    assert.match(review.body.error.message, /`review`/);
    expectError(await t.api('POST', '/account/api-keys', { inboxIds: [b.inbox] }, { key: limited }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await t.api('POST', '/account/api-keys', { inboxIds: [] }, { key: limited }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await t.api('POST', '/account/api-keys', { inboxIds: ['inb_nope'] }, { key: limited }), 403, 'INSUFFICIENT_SCOPE');
    // It sees and revokes only keys within its inbox: not the account's own.
    const visible = (await t.api('GET', '/account/api-keys', undefined, { key: limited })).body.data.map((k: { id: string }) => k.id);
    assert.ok(visible.includes(inherit.body.id) && !visible.includes(t.keyId));
    expectError(await t.api('DELETE', `/account/api-keys/${t.keyId}`, undefined, { key: limited }), 404, 'API_KEY_NOT_FOUND');
    assert.equal((await t.api('DELETE', `/account/api-keys/${inherit.body.id}`, undefined, { key: limited })).status, 204);
  });

  test('bad scopes and unknown inboxes are refused', async () => {
    expectError(await t.api('POST', '/account/api-keys', { scopes: [] }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', '/account/api-keys', { scopes: ['root'] }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', '/account/api-keys', { scopes: 'read' }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('POST', '/account/api-keys', { inboxIds: ['inb_nope'] }), 404, 'INBOX_NOT_FOUND');
    const other = await t.newAccount('other');
    const theirs = (await t.api('POST', '/inboxes', { address: 'theirs' }, { key: other.key })).body.id;
    expectError(await t.api('POST', '/account/api-keys', { inboxIds: [theirs] }), 404, 'INBOX_NOT_FOUND');
  });

  test('CLI keys create --scopes --inbox, --read-only, and all four without --scopes', async () => {
    const config = join(t.dataDir, 'cli.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(t.dataDir)}\nhostname = "mx.test.localhost"\nshared_domain = "agents.test"\n`);
    const create = async (...args: string[]) => {
      const res = await runCli(['--config', config, 'keys', 'create', '--account', t.accountId, '--json', ...args]);
      assert.equal(res.code, 0, res.stderr);
      return JSON.parse(res.stdout);
    };
    const agent = await create('--scopes', 'read,send', '--inbox', a.address!, '--inbox', b.address!);
    assert.deepEqual([agent.scopes, agent.inboxIds.sort()], [['read', 'send'], [a.inbox, b.inbox].sort()]);
    expectError(await t.api('POST', '/inboxes', {}, { key: agent.key }), 403, 'INSUFFICIENT_SCOPE');
    assert.equal((await t.api('GET', '/inboxes', undefined, { key: agent.key })).body.total, 2);
    assert.deepEqual((await create()).scopes, SCOPES);
    const ro = await create('--read-only');
    assert.deepEqual([ro.scopes, ro.readOnly], [['read'], true]);
    const bad = await runCli(['--config', config, 'keys', 'create', '--account', t.accountId, '--scopes', 'read,root']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--scopes/);
    const nobody = await runCli(['--config', config, 'keys', 'create', '--account', t.accountId, '--inbox', 'nobody@agents.test']);
    assert.equal(nobody.code, 1);
    assert.match(nobody.stderr, /no inbox nobody@agents.test/);
  });
});

describe('a key limited to some inboxes', () => {
  let key: string;
  before(async () => {
    key = await keyWith(SCOPES, [a.inbox!]);
  });

  test('finds the other inboxes, messages, threads and drafts missing, reading and writing', async () => {
    const get = (path: string) => t.api('GET', path, undefined, { key });
    expectError(await get(`/inboxes/${b.inbox}`), 404, 'INBOX_NOT_FOUND');
    expectError(await get(`/inboxes/${b.inbox}/messages`), 404, 'INBOX_NOT_FOUND');
    expectError(await get(`/messages/${b.message}`), 404, 'MESSAGE_NOT_FOUND');
    expectError(await get(`/messages/${b.message}/raw`), 404, 'MESSAGE_NOT_FOUND');
    expectError(await get(`/threads/${b.thread}`), 404, 'THREAD_NOT_FOUND');
    expectError(await get(`/drafts/${b.draft}`), 404, 'DRAFT_NOT_FOUND');
    expectError(await t.api('POST', `/inboxes/${b.inbox}/messages`, { to: ['x@example.org'], subject: 's', bodyText: 'hi' }, { key }), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('POST', `/messages/${b.message}/reply`, { bodyText: 'hi' }, { key }), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('PATCH', `/messages/${b.message}`, { unread: true }, { key }), 404, 'MESSAGE_NOT_FOUND');
    expectError(await t.api('DELETE', `/inboxes/${b.inbox}`, undefined, { key }), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('POST', `/drafts/${b.draft}/send`, {}, { key }), 404, 'DRAFT_NOT_FOUND');
    // Its own inbox as usual.
    assert.equal((await get(`/messages/${a.message}`)).status, 200);
    assert.equal((await get(`/threads/${a.thread}`)).status, 200);
    assert.equal((await get(`/drafts/${a.draft}`)).status, 200);
    // Nothing of the other inbox changed.
    assert.equal((await t.api('GET', `/inboxes/${b.inbox}`)).status, 200);
  });

  test('sees only its inbox in the account-wide lists', async () => {
    const get = async (path: string): Promise<ApiResponse> => {
      const res = await t.api('GET', path, undefined, { key });
      assert.equal(res.status, 200, `${path}: ${res.text}`);
      return res;
    };
    const inboxes = (await get('/inboxes')).body;
    assert.deepEqual([inboxes.total, inboxes.data.map((i: { id: string }) => i.id)], [1, [a.inbox]]);
    const messages = (await get('/messages')).body.data;
    assert.ok(messages.length > 0 && messages.every((m: { inboxId: string }) => m.inboxId === a.inbox), JSON.stringify(messages.map((m: { inboxId: string }) => m.inboxId)));
    const threads = (await get('/threads')).body.data;
    assert.ok(threads.length > 0 && threads.every((x: { inboxId: string }) => x.inboxId === a.inbox));
    const events = (await get('/events')).body.data;
    assert.ok(events.length > 0 && events.every((e: { data: { inboxId: string } }) => e.data.inboxId === a.inbox));
    // The whole account has the other inbox's too.
    assert.ok((await t.api('GET', '/events')).body.data.some((e: { data: { inboxId: string } }) => e.data.inboxId === b.inbox));
    expectError(await t.api('GET', `/events?inboxId=${b.inbox}`, undefined, { key }), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('GET', `/events/stream?inboxId=${b.inbox}`, undefined, { key }), 404, 'INBOX_NOT_FOUND');
  });

  test('cannot change the whole account, nor name other inboxes in a body or query', async () => {
    const post = (path: string, body: unknown) => t.api('POST', path, body, { key });
    const inboxesBefore = (await t.api('GET', '/inboxes')).body.total;
    expectError(await post('/inboxes', {}), 403, 'INSUFFICIENT_SCOPE');
    expectError(await post('/domains', { domain: 'limited.example' }), 403, 'INSUFFICIENT_SCOPE');
    const entry = { direction: 'send', kind: 'allow', entry: 'example.org' };
    expectError(await post('/lists', entry), 403, 'INSUFFICIENT_SCOPE');
    expectError(await post('/lists', { ...entry, inboxId: b.inbox }), 404, 'INBOX_NOT_FOUND');
    assert.equal((await post('/lists', { ...entry, inboxId: a.inbox })).status, 201);
    expectError(await t.api('GET', `/lists?inboxId=${b.inbox}`, undefined, { key }), 404, 'INBOX_NOT_FOUND');
    // The whole account's entries and the other inbox's are not its own.
    const accountWide = (await t.api('POST', '/lists', entry)).body.id;
    const otherEntry = (await t.api('POST', '/lists', { ...entry, inboxId: b.inbox })).body.id;
    const lists = (await t.api('GET', '/lists', undefined, { key })).body;
    assert.deepEqual([lists.total, lists.data.every((e: { inboxId: string }) => e.inboxId === a.inbox)], [1, true]);
    for (const id of [accountWide, otherEntry]) expectError(await t.api('DELETE', `/lists/${id}`, undefined, { key }), 404, 'LIST_ENTRY_NOT_FOUND');
    const hook = { url: 'http://127.0.0.1:9/hook' };
    expectError(await post('/webhooks', hook), 403, 'INSUFFICIENT_SCOPE');
    expectError(await post('/webhooks', { ...hook, inboxIds: [a.inbox, b.inbox] }), 404, 'INBOX_NOT_FOUND');
    const made = await post('/webhooks', { ...hook, inboxIds: [a.inbox] });
    assert.equal(made.status, 201, made.text);
    expectError(await t.api('PUT', `/webhooks/${made.body.id}`, { inboxIds: null }, { key }), 403, 'INSUFFICIENT_SCOPE');
    assert.equal((await t.api('PUT', `/webhooks/${made.body.id}`, { isActive: false }, { key })).status, 200);
    // The account's other webhooks (of every inbox, of the other inbox) look missing to it.
    const everyInbox = (await t.api('POST', '/webhooks', hook)).body.id;
    const otherInbox = (await t.api('POST', '/webhooks', { ...hook, inboxIds: [b.inbox] })).body.id;
    assert.deepEqual(
      (await t.api('GET', '/webhooks', undefined, { key })).body.data.map((w: { id: string }) => w.id),
      [made.body.id],
    );
    for (const path of ['/webhooks/logs', '/webhooks/activity']) {
      expectError(await t.api('GET', path, undefined, { key }), 403, 'INSUFFICIENT_SCOPE');
      expectError(await t.api('GET', `${path}?webhookId=${everyInbox}`, undefined, { key }), 404, 'WEBHOOK_NOT_FOUND');
      assert.equal((await t.api('GET', `${path}?webhookId=${made.body.id}`, undefined, { key })).status, 200);
    }
    for (const id of [everyInbox, otherInbox]) {
      expectError(await t.api('GET', `/webhooks/${id}`, undefined, { key }), 404, 'WEBHOOK_NOT_FOUND');
      expectError(await t.api('PUT', `/webhooks/${id}`, { isActive: false }, { key }), 404, 'WEBHOOK_NOT_FOUND');
      expectError(await t.api('DELETE', `/webhooks/${id}`, undefined, { key }), 404, 'WEBHOOK_NOT_FOUND');
    }
    // Nothing of this reached the account.
    assert.equal((await t.api('GET', '/inboxes')).body.total, inboxesBefore);
    assert.equal((await t.api('GET', '/domains')).body.data.length, 0);
  });

  test("a key limited to one inbox finds another inbox's attachments missing, and cannot send them", async () => {
    const mail = async (box: Record<string, string>) => {
      const id = await deliverMail(t.server.smtpPort, {
        from: 'someone@example.org',
        to: box.address,
        subject: 'with a file',
        text: 'see file',
        attachments: [{ filename: 'note.txt', content: `for ${box.address}` }],
      });
      return (await t.api('GET', `/messages/${id}`)).body.attachments[0].id as string;
    };
    const own = await mail(a);
    const other = await mail(b);
    const fd = new FormData();
    fd.append('file', new Blob(['an upload']), 'upload.txt');
    const upload = await fetch(`${t.url}/attachments`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: fd });
    assert.equal(upload.status, 201);
    const unsent = ((await upload.json()) as { id: string }).id;
    const key = await keyWith(['read', 'send'], [a.inbox!]);
    assert.equal((await t.api('GET', `/attachments/${own}`, undefined, { key })).status, 200);
    assert.equal((await t.api('GET', `/attachments/${unsent}`, undefined, { key })).status, 200);
    expectError(await t.api('GET', `/attachments/${other}`, undefined, { key }), 404, 'ATTACHMENT_NOT_FOUND');
    expectError(await t.api('GET', `/attachments/${other}/text`, undefined, { key }), 404, 'ATTACHMENT_NOT_FOUND');
    expectError(await t.api('POST', `/inboxes/${a.inbox}/messages`, { to: ['x@example.org'], subject: 's', bodyText: 'hi', attachmentIds: [other] }, { key }), 404, 'ATTACHMENT_NOT_FOUND');
    // Once a message of another inbox sent the upload, it is that inbox's.
    const sent = await t.api('POST', `/inboxes/${b.inbox}/messages`, { to: ['x@example.org'], subject: 's', bodyText: 'hi', attachmentIds: [unsent] });
    assert.equal(sent.status, 202, sent.text);
    expectError(await t.api('GET', `/attachments/${unsent}`, undefined, { key }), 404, 'ATTACHMENT_NOT_FOUND');
  });

  test('a key limited to several inboxes sees all of them, and only them, in the account-wide lists', async () => {
    const c: Record<string, string> = {};
    await inboxWithMail(c, 'gamma');
    await t.api('POST', '/lists', { direction: 'receive', kind: 'block', entry: 'spam.example', inboxId: c.inbox });
    await t.api('POST', '/lists', { direction: 'receive', kind: 'block', entry: 'spam.example', inboxId: a.inbox });
    const both = await keyWith(['read'], [a.inbox!, b.inbox!]);
    const ids = (res: ApiResponse, field: string) => new Set((res.body.data as Array<Record<string, unknown>>).map((x) => x[field]));
    assert.equal((await t.api('GET', '/inboxes', undefined, { key: both })).body.total, 2);
    for (const path of ['/messages', '/threads', '/messages?q=hello', '/threads?q=hello', '/messages?unread=true']) {
      const res = await t.api('GET', path, undefined, { key: both });
      assert.equal(res.status, 200, `${path}: ${res.text}`);
      const seen = ids(res, 'inboxId');
      assert.ok(seen.size > 0 && [...seen].every((id) => id === a.inbox || id === b.inbox), `${path}: ${[...seen]}`);
      if (!path.includes('?')) {
        assert.deepEqual(seen, new Set([a.inbox, b.inbox]), path);
        // As many as the two inboxes' own lists hold, and no more.
        const own = await Promise.all([a.inbox, b.inbox].map((id) => t.api('GET', `/inboxes/${id}${path}`)));
        assert.equal(res.body.total, own[0]!.body.total + own[1]!.body.total, path);
      }
    }
    const events = await t.api('GET', '/events', undefined, { key: both });
    assert.equal(events.status, 200);
    const named = new Set((events.body.data as Array<{ data: { inboxId?: string } }>).map((e) => e.data.inboxId));
    assert.ok(named.has(a.inbox) && named.has(b.inbox) && !named.has(c.inbox), JSON.stringify([...named]));
    assert.deepEqual(ids(await t.api('GET', `/events?inboxId=${b.inbox}`, undefined, { key: both }), 'type').size > 0, true);
    expectError(await t.api('GET', `/events?inboxId=${c.inbox}`, undefined, { key: both }), 404, 'INBOX_NOT_FOUND');
    const lists = await t.api('GET', '/lists', undefined, { key: both });
    assert.equal(lists.status, 200);
    const listed = ids(lists, 'inboxId');
    assert.ok(listed.has(a.inbox) && !listed.has(c.inbox) && !listed.has(null), JSON.stringify([...listed]));
    // The whole account still sees the third inbox.
    assert.ok(ids(await t.api('GET', '/messages?limit=100'), 'inboxId').has(c.inbox));
  });
});

describe('MCP', () => {
  async function toolsOf(key: string): Promise<{ client: Client; names: string[] }> {
    const client = new Client({ name: 'scopes-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    clients.push(client);
    return { client, names: (await client.listTools()).tools.map((x) => x.name).sort() };
  }
  // check_message changes nothing but needs `send` (outbound holds).
  const reads = TOOLS.filter((x) => !x.write && x.name !== 'check_message').map((x) => x.name);

  test('tools/list shows the tools of the key’s scopes; a call outside them is refused', async () => {
    assert.deepEqual((await toolsOf(await keyWith(['read']))).names, [...reads].sort());
    const agent = await toolsOf(await keyWith(['read', 'send']));
    assert.ok(agent.names.includes('send_message') && agent.names.includes('update_message') && agent.names.includes('create_draft') && agent.names.includes('check_message'));
    assert.ok(!agent.names.includes('create_inbox') && !agent.names.includes('delete_inbox'));
    assert.deepEqual((await toolsOf(await keyWith(['manage']))).names, ['create_inbox', 'delete_inbox']);
    const refused = await agent.client.callTool({ name: 'create_inbox', arguments: {} });
    assert.equal(refused.isError, true);
    assert.equal((refused.structuredContent as { error: { code: string } }).error.code, 'INSUFFICIENT_SCOPE');
  });

  test('a key limited to one inbox finds the others missing', async () => {
    const { client } = await toolsOf(await keyWith(['read', 'send', 'manage'], [a.inbox!]));
    const missing = await client.callTool({ name: 'get_message', arguments: { messageId: b.message } });
    assert.equal((missing.structuredContent as { error: { code: string } }).error.code, 'MESSAGE_NOT_FOUND');
    const create = await client.callTool({ name: 'create_inbox', arguments: {} });
    assert.equal((create.structuredContent as { error: { code: string } }).error.code, 'INSUFFICIENT_SCOPE');
    const inboxes = await client.callTool({ name: 'list_inboxes', arguments: {} });
    assert.deepEqual(
      (inboxes.structuredContent as { data: Array<{ id: string }> }).data.map((i) => i.id),
      [a.inbox],
    );
    const list = await client.callTool({ name: 'list_messages', arguments: {} });
    const data = (list.structuredContent as { data: Array<{ inboxId: string }> }).data;
    assert.ok(data.length > 0 && data.every((m) => m.inboxId === a.inbox));
  });

  test('a key limited to several inboxes lists all of them, and only them', async () => {
    const { client } = await toolsOf(await keyWith(['read'], [a.inbox!, b.inbox!]));
    for (const name of ['list_messages', 'search_messages', 'list_threads']) {
      const res = await client.callTool({ name, arguments: name === 'search_messages' ? { q: 'hello' } : {} });
      assert.notEqual(res.isError, true, JSON.stringify(res.structuredContent));
      const inboxes = new Set((res.structuredContent as { data: Array<{ inboxId: string }> }).data.map((m) => m.inboxId));
      assert.deepEqual(inboxes, new Set([a.inbox, b.inbox]), name);
    }
  });
});

describe('SMTP submission', () => {
  const authPlain = (user: string, pass: string) => `AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString('base64')}`;
  async function auth(user: string, key: string) {
    const { client } = await SmtpClient.open(t.server.submissionPort);
    try {
      assert.equal((await client.cmd('EHLO client.test')).code, 250);
      return await client.cmd(authPlain(user, key));
    } finally {
      await client.quit();
    }
  }

  test('needs send, and the inbox when the key is limited', async () => {
    const refused = { code: 535, text: '5.7.8 authentication credentials invalid' };
    assert.deepEqual(await auth(a.address!, await keyWith(['read', 'manage', 'review'])), refused);
    const limited = await keyWith(['send'], [a.inbox!]);
    assert.deepEqual(await auth(b.address!, limited), refused);
    assert.equal((await auth(a.address!, limited)).code, 235);
  });
});
