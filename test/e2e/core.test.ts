// The HTTP core over a real socket: health, auth, read-only keys, account scoping, rate
// limits, idempotency, body parsing, pagination, inboxes and API keys.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { eq } from 'drizzle-orm';
import { startTestServer, expectError, type TestServer } from '../support/server.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { apiKeys, inboxes } from '../../src/store/schema.ts';
import { sqlDb } from '../support/db.ts';

let s: TestServer;
before(async () => {
  s = await startTestServer();
});
after(() => s.close());

const inboxCount = async (): Promise<number> => (await sqlDb(s.server.ctx).select().from(inboxes).all()).length;

describe('health and routing', () => {
  test('GET /health needs no key and answers ok', async () => {
    const res = await s.api('GET', '/health', undefined, { key: null });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok' });
    assert.ok(res.headers.get('x-ratelimit-limit'));
  });

  test('unknown routes are 404 NOT_FOUND with or without a key', async () => {
    expectError(await s.api('GET', '/nope'), 404, 'NOT_FOUND');
    expectError(await s.api('GET', '/nope', undefined, { key: null }), 404, 'NOT_FOUND');
    expectError(await s.api('PATCH', '/inboxes'), 404, 'NOT_FOUND');
  });

  test('errors carry a request id that matches the X-Request-Id header', async () => {
    const res = await s.api('GET', '/inboxes', undefined, { key: null });
    expectError(res, 401, 'UNAUTHORIZED');
    assert.match(res.body.error.requestId, /^[0-9a-f]{16}$/);
    assert.equal(res.headers.get('x-request-id'), res.body.error.requestId);
  });
});

describe('authentication', () => {
  test('missing, malformed and unknown keys are 401 UNAUTHORIZED', async () => {
    expectError(await s.api('GET', '/inboxes', undefined, { key: null }), 401, 'UNAUTHORIZED');
    expectError(await s.api('GET', '/inboxes', undefined, { key: 'mr_live_nottherealkeyatall0000000000000000' }), 401, 'UNAUTHORIZED');
    expectError(await s.api('GET', '/inboxes', undefined, { key: null, headers: { authorization: 'Basic abc' } }), 401, 'UNAUTHORIZED');
    // Right prefix, wrong rest: the constant-time comparison must still refuse it.
    expectError(await s.api('GET', '/inboxes', undefined, { key: s.key.slice(0, 20) + 'x'.repeat(28) }), 401, 'UNAUTHORIZED');
  });

  test('both header forms authenticate, and lastUsedAt is recorded', async () => {
    const k = await createApiKey(s.server.ctx, s.accountId, { name: 'fresh' });
    let res = await s.api('GET', '/inboxes', undefined, { key: null, headers: { 'x-api-key': k.key } });
    assert.equal(res.status, 200);
    res = await s.api('GET', '/inboxes', undefined, { key: k.key });
    assert.equal(res.status, 200);
    const row = (await sqlDb(s.server.ctx).select().from(apiKeys).where(eq(apiKeys.id, k.id)).get())!;
    assert.ok(row.lastUsedAt && Date.now() - Date.parse(row.lastUsedAt) < 60_000);
    assert.notEqual(row.keyHash, k.key, 'keys are stored hashed');
    assert.equal(row.keyHash.length, 64);
  });

  test('expired keys are refused', async () => {
    const k = await createApiKey(s.server.ctx, s.accountId, { expiresAt: new Date(Date.now() - 1000).toISOString() });
    expectError(await s.api('GET', '/inboxes', undefined, { key: k.key }), 401, 'UNAUTHORIZED');
  });

  test('read-only keys read but get 403 FORBIDDEN on POST, PUT and DELETE', async () => {
    const ro = await createApiKey(s.server.ctx, s.accountId, { readOnly: true });
    assert.equal((await s.api('GET', '/inboxes', undefined, { key: ro.key })).status, 200);
    const before = await inboxCount();
    expectError(await s.api('POST', '/inboxes', {}, { key: ro.key }), 403, 'FORBIDDEN');
    expectError(await s.api('DELETE', '/account/api-keys/key_x', undefined, { key: ro.key }), 403, 'FORBIDDEN');
    expectError(await s.api('DELETE', '/inboxes/inb_x', undefined, { key: ro.key }), 403, 'FORBIDDEN');
    assert.equal(await inboxCount(), before);
  });
});

describe('API keys', () => {
  test('create shows the key once; list never shows it', async () => {
    const res = await s.api('POST', '/account/api-keys', { name: 'agent-7' });
    assert.equal(res.status, 201);
    assert.match(res.body.key, /^mr_live_[0-9A-Za-z]{40}$/);
    assert.equal(res.body.prefix, res.body.key.slice(0, 12));
    assert.equal(res.body.name, 'agent-7');
    assert.match(res.body.id, /^key_/);
    assert.equal(typeof res.body.message, 'string');
    const list = await s.api('GET', '/account/api-keys');
    assert.equal(list.status, 200);
    const entry = list.body.data.find((k: any) => k.id === res.body.id);
    assert.deepEqual(Object.keys(entry).sort(), ['createdAt', 'expiresAt', 'id', 'inboxIds', 'keyPrefix', 'lastUsedAt', 'name', 'readOnly', 'scopes']);
    assert.equal(entry.keyPrefix, res.body.prefix);
    assert.ok(!list.text.includes(res.body.key));
    // The new key works.
    assert.equal((await s.api('GET', '/inboxes', undefined, { key: res.body.key })).status, 200);
  });

  test('create without a body, and validation of the name', async () => {
    const res = await s.api('POST', '/account/api-keys');
    assert.equal(res.status, 201);
    assert.equal(res.body.name, null);
    expectError(await s.api('POST', '/account/api-keys', { name: 5 }), 400, 'VALIDATION_ERROR');
    expectError(await s.api('POST', '/account/api-keys', { name: 'a\r\nb' }), 400, 'VALIDATION_ERROR');
  });

  test('revoking: rejected at once; the current key cannot revoke itself; others are 404', async () => {
    const victim = (await s.api('POST', '/account/api-keys', { name: 'victim' })).body;
    assert.equal((await s.api('GET', '/inboxes', undefined, { key: victim.key })).status, 200);
    const res = await s.api('DELETE', `/account/api-keys/${victim.id}`);
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    expectError(await s.api('GET', '/inboxes', undefined, { key: victim.key }), 401, 'UNAUTHORIZED');
    const list = await s.api('GET', '/account/api-keys');
    assert.ok(!list.body.data.some((k: any) => k.id === victim.id), 'revoked keys are not listed');
    expectError(await s.api('DELETE', `/account/api-keys/${victim.id}`), 404, 'API_KEY_NOT_FOUND');

    const current = await s.api('DELETE', `/account/api-keys/${s.keyId}`);
    expectError(current, 409, 'CANNOT_REVOKE_CURRENT_KEY');
    assert.equal((await s.api('GET', '/inboxes')).status, 200);

    const other = await s.newAccount('other');
    expectError(await s.api('DELETE', `/account/api-keys/${other.keyId}`), 404, 'API_KEY_NOT_FOUND');
    assert.equal((await s.api('GET', '/inboxes', undefined, { key: other.key })).status, 200);
  });
});

describe('inboxes', () => {
  test('create with a random address on the shared domain', async () => {
    const res = await s.api('POST', '/inboxes', { displayName: 'Support agent' });
    assert.equal(res.status, 201);
    const inbox = res.body;
    assert.match(inbox.id, /^inb_/);
    assert.match(inbox.address, /^[a-z]+-[a-z]+-[a-z]+-\d{1,3}@agents\.test$/);
    assert.deepEqual(
      { ...inbox, id: 0, address: 0, createdAt: 0 },
      {
        id: 0,
        address: 0,
        createdAt: 0,
        displayName: 'Support agent',
        domainId: null,
        status: 'active',
        dailySendLimit: 100,
        sendsToday: 0,
        totalSent: 0,
        bounceCount: 0,
        complaintCount: 0,
        sendPolicy: { approval: 'none', hourlySendLimit: null },
        screening: 'monitor',
      },
    );
    assert.ok(!Number.isNaN(Date.parse(inbox.createdAt)));
  });

  test('create with a chosen local part or full address; taken addresses are 409 case-insensitively', async () => {
    const a = await s.api('POST', '/inboxes', { address: 'Sales.Bot' });
    assert.equal(a.status, 201);
    assert.equal(a.body.address, 'sales.bot@agents.test');
    const b = await s.api('POST', '/inboxes', { address: 'help@AGENTS.test' });
    assert.equal(b.status, 201);
    assert.equal(b.body.address, 'help@agents.test');
    expectError(await s.api('POST', '/inboxes', { address: 'SALES.BOT@agents.test' }), 409, 'ADDRESS_TAKEN');
    // Unique across accounts too.
    const other = await s.newAccount();
    expectError(await s.api('POST', '/inboxes', { address: 'help' }, { key: other.key }), 409, 'ADDRESS_TAKEN');
  });

  test('invalid addresses and fields', async () => {
    const before = await inboxCount();
    expectError(await s.api('POST', '/inboxes', { address: 'bot@gmail.com' }), 400, 'INVALID_ADDRESS');
    expectError(await s.api('POST', '/inboxes', { address: 'bad local' }), 400, 'INVALID_ADDRESS');
    expectError(await s.api('POST', '/inboxes', { address: 'a%b' }), 400, 'INVALID_ADDRESS');
    expectError(await s.api('POST', '/inboxes', { address: '"quoted"' }), 400, 'INVALID_ADDRESS');
    expectError(await s.api('POST', '/inboxes', { address: 'x'.repeat(65) }), 400, 'INVALID_ADDRESS');
    expectError(await s.api('POST', '/inboxes', { address: '@agents.test' }), 400, 'INVALID_ADDRESS');
    expectError(await s.api('POST', '/inboxes', { address: 42 }), 400, 'VALIDATION_ERROR');
    expectError(await s.api('POST', '/inboxes', { displayName: 'Evil\r\nBcc: x@y.z' }), 400, 'VALIDATION_ERROR');
    expectError(await s.api('POST', '/inboxes', { displayName: 'nul\u0000' }), 400, 'VALIDATION_ERROR');
    expectError(await s.api('POST', '/inboxes', { domainId: 'dom_missing' }), 404, 'DOMAIN_NOT_FOUND');
    const extra = await s.api('POST', '/inboxes', { adress: 'typo' });
    expectError(extra, 400, 'VALIDATION_ERROR');
    assert.match(extra.body.error.message, /adress/);
    const wrongType = await s.api('POST', '/inboxes', { displayName: ['x'] });
    assert.match(wrongType.body.error.message, /displayName/);
    assert.equal(await inboxCount(), before, 'a rejected request writes nothing');
  });

  test('list newest first with pagination; get; delete', async () => {
    const acc = await s.newAccount('lister');
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await s.api('POST', '/inboxes', {}, { key: acc.key })).body.id);
    const page1 = await s.api('GET', '/inboxes?limit=2', undefined, { key: acc.key });
    assert.equal(page1.status, 200);
    assert.equal(page1.body.total, 5);
    assert.equal(page1.body.limit, 2);
    assert.equal(page1.body.offset, 0);
    assert.deepEqual(
      page1.body.data.map((i: any) => i.id),
      [made[4], made[3]],
    );
    const page3 = await s.api('GET', '/inboxes?limit=2&offset=4', undefined, { key: acc.key });
    assert.deepEqual(
      page3.body.data.map((i: any) => i.id),
      [made[0]],
    );
    const all = await s.api('GET', '/inboxes', undefined, { key: acc.key });
    assert.equal(all.body.limit, 20);
    assert.equal(all.body.data.length, 5);

    const got = await s.api('GET', `/inboxes/${made[2]}`, undefined, { key: acc.key });
    assert.equal(got.status, 200);
    assert.equal(got.body.id, made[2]);

    const del = await s.api('DELETE', `/inboxes/${made[2]}`, undefined, { key: acc.key });
    assert.equal(del.status, 204);
    expectError(await s.api('GET', `/inboxes/${made[2]}`, undefined, { key: acc.key }), 404, 'INBOX_NOT_FOUND');
    expectError(await s.api('DELETE', `/inboxes/${made[2]}`, undefined, { key: acc.key }), 404, 'INBOX_NOT_FOUND');
    assert.equal((await s.api('GET', '/inboxes', undefined, { key: acc.key })).body.total, 4);
  });

  test("another account's inbox is 404 for reads and deletes", async () => {
    const mine = (await s.api('POST', '/inboxes', {})).body;
    const other = await s.newAccount();
    expectError(await s.api('GET', `/inboxes/${mine.id}`, undefined, { key: other.key }), 404, 'INBOX_NOT_FOUND');
    expectError(await s.api('DELETE', `/inboxes/${mine.id}`, undefined, { key: other.key }), 404, 'INBOX_NOT_FOUND');
    assert.ok(!(await s.api('GET', '/inboxes?limit=100', undefined, { key: other.key })).body.data.some((i: any) => i.id === mine.id));
    assert.equal((await s.api('GET', `/inboxes/${mine.id}`)).status, 200);
  });

  test('pagination parameters are validated', async () => {
    for (const q of ['limit=101', 'limit=0', 'limit=abc', 'limit=-1', 'offset=-1', 'offset=1.5', 'limit=1e2']) {
      const res = await s.api('GET', `/inboxes?${q}`);
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, /limit|offset/);
    }
    assert.equal((await s.api('GET', '/inboxes?limit=100&offset=0')).status, 200);
  });
});

describe('request bodies', () => {
  test('malformed JSON, wrong content type, non-object bodies, deep nesting', async () => {
    const before = await inboxCount();
    expectError(await s.api('POST', '/inboxes', '{"address": '), 400, 'INVALID_JSON');
    expectError(await s.api('POST', '/inboxes', 'address=x', { headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    expectError(await s.api('POST', '/inboxes', '{"address":"x"}', { headers: { 'content-type': 'text/plain' } }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    expectError(await s.api('POST', '/inboxes', '[1,2]'), 400, 'VALIDATION_ERROR');
    expectError(await s.api('POST', '/inboxes', 'null'), 400, 'VALIDATION_ERROR');
    const deep = '{"a":'.repeat(50_000) + '1' + '}'.repeat(50_000);
    const res = await s.api('POST', '/inboxes', deep);
    assert.ok(res.status === 400 && ['INVALID_JSON', 'VALIDATION_ERROR'].includes(res.body.error.code), res.text.slice(0, 200));
    assert.equal(await inboxCount(), before);
  });

  test('bodies over the limit are 413', async () => {
    const small = await startTestServer({ http: { max_body_bytes: 1024 } });
    try {
      const res = await small.api('POST', '/inboxes', { displayName: 'x'.repeat(2000) });
      expectError(res, 413, 'PAYLOAD_TOO_LARGE');
      // Chunked (no Content-Length) bodies are counted as they arrive.
      const big = new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode(JSON.stringify({ displayName: 'y'.repeat(5000) })));
          c.close();
        },
      });
      const chunked = await fetch(`${small.url}/inboxes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${small.key}`, 'content-type': 'application/json' },
        body: big,
        duplex: 'half',
      } as RequestInit);
      assert.equal(chunked.status, 413);
      assert.equal((await chunked.json()).error.code, 'PAYLOAD_TOO_LARGE');
    } finally {
      await small.close();
    }
  });
});

describe('rate limits', () => {
  test('every response carries the headers; over the limit is 429 with Retry-After; limits are per account, whatever its number of keys', async () => {
    const rl = await startTestServer({ limits: { requests_per_minute: 3 } });
    try {
      const secondKey = (await createApiKey(rl.server.ctx, rl.accountId, { name: 'second' })).key;
      const r1 = await rl.api('GET', '/inboxes');
      assert.equal(r1.headers.get('x-ratelimit-limit'), '3');
      assert.equal(r1.headers.get('x-ratelimit-remaining'), '2');
      const reset = Number(r1.headers.get('x-ratelimit-reset'));
      assert.ok(reset > Date.now() / 1000 && reset <= Date.now() / 1000 + 61);
      const r2 = await rl.api('GET', '/nope');
      assert.equal(r2.headers.get('x-ratelimit-remaining'), '1', 'errors count and carry the headers');
      await rl.api('GET', '/inboxes');
      const r4 = await rl.api('GET', '/inboxes');
      expectError(r4, 429, 'RATE_LIMITED');
      assert.equal(r4.headers.get('x-ratelimit-remaining'), '0');
      const retry = Number(r4.headers.get('retry-after'));
      assert.ok(retry >= 1 && retry <= 60);
      // Another key of the same account shares the budget (a new key does not reset it).
      expectError(await rl.api('GET', '/inboxes', undefined, { key: secondKey }), 429, 'RATE_LIMITED');
      const other = await rl.newAccount();
      assert.equal((await rl.api('GET', '/inboxes', undefined, { key: other.key })).status, 200);
    } finally {
      await rl.close();
    }
  });
});

describe('idempotency', () => {
  test('a replay returns the stored response and creates nothing', async () => {
    const before = await inboxCount();
    const headers = { 'idempotency-key': 'create-inbox-1' };
    const first = await s.api('POST', '/inboxes', { displayName: 'Once' }, { headers });
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const again = await s.api('POST', '/inboxes', { displayName: 'Once' }, { headers });
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.body, first.body);
    assert.equal(await inboxCount(), before + 1);
  });

  test('the same key with another body is 409; keys are per account; errors replay too', async () => {
    const headers = { 'idempotency-key': 'k-2' };
    assert.equal((await s.api('POST', '/inboxes', { displayName: 'A' }, { headers })).status, 201);
    expectError(await s.api('POST', '/inboxes', { displayName: 'B' }, { headers }), 409, 'IDEMPOTENCY_KEY_REUSED');
    expectError(await s.api('POST', '/account/api-keys', { displayName: 'A' }, { headers }), 409, 'IDEMPOTENCY_KEY_REUSED');
    const other = await s.newAccount();
    assert.equal((await s.api('POST', '/inboxes', { displayName: 'B' }, { key: other.key, headers })).status, 201);

    const bad = { 'idempotency-key': 'k-bad-body' };
    expectError(await s.api('POST', '/inboxes', { address: 'no@gmail.com' }, { headers: bad }), 400, 'INVALID_ADDRESS');
    const replay = await s.api('POST', '/inboxes', { address: 'no@gmail.com' }, { headers: bad });
    expectError(replay, 400, 'INVALID_ADDRESS');
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.body.error.requestId, replay.headers.get('x-request-id'));
  });

  test('an invalid Idempotency-Key header is 400', async () => {
    expectError(await s.api('POST', '/inboxes', {}, { headers: { 'idempotency-key': 'x'.repeat(300) } }), 400, 'VALIDATION_ERROR');
  });
});
