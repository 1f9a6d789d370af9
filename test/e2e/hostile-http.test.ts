// Hostile HTTP input against every route of the registry: wrong types, missing and unknown
// fields, huge strings, CR/LF/NUL in header-bound fields, non-JSON bodies, wrong content types,
// deep nesting, bad pagination and ids. Each must get its exact 4xx code, never a 500, and leave
// the database byte-for-byte as it was. A route added without an entry here fails the suite.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { createHttpApp } from '../../src/http/app.ts';
import type { RegisteredRoute } from '../../src/http/routes.ts';
import { dbDigest as digestOf, settleJobs } from '../support/db-digest.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { deliverMail } from '../support/mail.ts';

let t: TestServer;
/** Ids of real resources of the test account, so a route gets past its lookup to the input checks. */
const ids: Record<string, string> = {};

before(async () => {
  t = await startTestServer({ limits: { requests_per_minute: 100_000 }, domains: { recheck_interval: '24h' } });
  ids.inbox = (await t.api('POST', '/inboxes', { address: 'hostile' })).body.id;
  ids.message = await deliverMail(t.server.smtpPort, { from: 'x@example.org', to: 'hostile@agents.test', subject: 'fixture', text: 'hi', attachments: [{ filename: 'a.txt', content: 'abc' }] });
  const msg = (await t.api('GET', `/messages/${ids.message}`)).body;
  ids.thread = msg.threadId;
  ids.attachment = msg.attachments[0].id;
  ids.domain = (await t.api('POST', '/domains', { domain: 'hostile.example' })).body.id;
  // Inactive: no delivery jobs run in the background while the database is being compared.
  ids.webhook = (await t.api('POST', '/webhooks', { url: 'http://127.0.0.1:9/hook', isActive: false })).body.id;
  ids.key = (await t.api('POST', '/account/api-keys', { name: 'spare' })).body.id;
  ids.delivery = 'dlv_00000000000000000000000000';
  ids.draft = (await t.api('POST', `/inboxes/${ids.inbox}/drafts`, { subject: 'fixture draft' })).body.id;
  ids.list = (await t.api('POST', '/lists', { direction: 'receive', kind: 'block', entry: 'blocked.example' })).body.id;
  ids.suppression = (await t.api('POST', '/suppressions', { address: 'kept@example.org' })).body.address;
  ids.token = '0000000000000000000000000a.0000000000000000';
  await settleJobs(t.server.ctx);
});

after(async () => {
  await t?.close();
});

const dbDigest = () => digestOf(t.server.ctx);

interface Sent {
  status: number;
  code?: string;
  text: string;
}

async function send(method: string, path: string, init: { body?: string | Blob | FormData; headers?: Record<string, string>; key?: string | null } = {}): Promise<Sent> {
  const headers: Record<string, string> = { ...init.headers };
  const key = init.key === undefined ? t.key : init.key;
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(t.url + path, { method, headers, body: init.body });
  const text = await res.text();
  let code: string | undefined;
  try {
    code = JSON.parse(text)?.error?.code;
  } catch {
    /* not JSON */
  }
  return { status: res.status, code, text };
}

/** Sends a request that must be refused with `status`/`code` and must not change the database. */
async function refused(label: string, status: number, code: string, method: string, path: string, init: Parameters<typeof send>[2] = {}): Promise<void> {
  const before = await dbDigest();
  const res = await send(method, path, init);
  assert.equal(res.status, status, `${label}: ${method} ${path} → ${res.status} ${res.text.slice(0, 200)}`);
  assert.equal(res.code, code, `${label}: ${method} ${path} → ${res.text.slice(0, 200)}`);
  assert.ok(!/\bat \S+:\d+:\d+|SQLITE|stack/i.test(res.text), `${label}: internals leaked: ${res.text.slice(0, 300)}`);
  assert.equal(await dbDigest(), before, `${label}: ${method} ${path} changed the database`);
}

type FieldKind = 'string' | 'header' | 'strings' | 'headers' | 'bool' | 'events' | 'id';

interface RouteSpec {
  /** Path with :params filled from `ids`. */
  path: string;
  /** JSON body routes: a minimal valid body (never sent as is) and each field's kind. */
  json?: { valid: Record<string, unknown>; fields: Record<string, FieldKind>; required: string[]; crlfCode?: Record<string, string> };
  /** Code for an unknown or malformed id in the path (404 unless `idStatus`). */
  notFound?: string;
  idStatus?: number;
  /** Query parameters that must be refused: name → bad values. */
  query?: Record<string, string[]>;
  /** Public static page: only generic hostile ids/queries apply. */
  static?: true;
  /** Another protocol over HTTP (MCP's JSON-RPC): its own hostile test below. */
  protocol?: true;
  multipart?: true;
}

const PAGE = { limit: ['-1', '0', '101', 'abc', '1e3', '1.5', '0x10', ' 5', '99999999999999999999'], offset: ['-1', 'abc', '1.5', '-0x1'] };
const FILTERS = {
  status: ['bogus', 'RECEIVED', "received' OR 1=1"],
  label: ['Urgent', '-lead', 'has space', 'x'.repeat(65), "a' OR 1=1", 'tab\there'],
  unread: ['yes', '1', 'TRUE', 'null'],
  direction: ['in', 'INBOUND', 'both'],
};
const EVENT_QUERY = {
  limit: ['-1', '0', '1001', 'abc', '1.5', '1e3'],
  after: ['nope', 'msg_00000000000000000000000000', "evt_' OR 1=1", 'evt_' + 'x'.repeat(5000)],
  types: ['', ',', 'message.bogus', 'message.received,bogus', "message.received' OR 1=1"],
  inboxId: ['', 'x'.repeat(5000)],
};
const HEADER_ATTACKS = ['evil\r\nBcc: victim@example.com', 'a\nb', 'a\rb', 'nul\u0000byte'];

/** The body of a send, and of a check of one. */
const SEND_BODY = {
  valid: { to: ['bob@example.org'], subject: 'hi', bodyText: 'x' },
  fields: {
    to: 'headers',
    cc: 'headers',
    bcc: 'headers',
    subject: 'header',
    bodyText: 'string',
    bodyHtml: 'string',
    threadId: 'id',
    attachmentIds: 'strings',
    sendAt: 'string',
    listUnsubscribe: 'bool',
  },
  required: ['to', 'subject'],
} satisfies RouteSpec['json'];

const SPEC: Record<string, RouteSpec> = {
  'GET /health': { path: '/health', static: true },
  'GET /openapi.json': { path: '/openapi.json', static: true },
  'POST /inboxes': {
    path: '/inboxes',
    json: { valid: {}, fields: { address: 'string', displayName: 'header', domainId: 'id' }, required: [], crlfCode: { address: 'INVALID_ADDRESS' } },
  },
  'GET /inboxes': { path: '/inboxes', query: PAGE },
  'GET /inboxes/:id': { path: '/inboxes/:inbox', notFound: 'INBOX_NOT_FOUND' },
  'DELETE /inboxes/:id': { path: '/inboxes/:inbox', notFound: 'INBOX_NOT_FOUND' },
  'PATCH /inboxes/:id': { path: '/inboxes/:inbox', notFound: 'INBOX_NOT_FOUND', json: { valid: {}, fields: { displayName: 'header' }, required: [] } },
  'POST /account/api-keys': { path: '/account/api-keys', json: { valid: {}, fields: { name: 'header' }, required: [] } },
  'GET /account/api-keys': { path: '/account/api-keys' },
  'DELETE /account/api-keys/:id': { path: '/account/api-keys/:key', notFound: 'API_KEY_NOT_FOUND' },
  'POST /domains': { path: '/domains', json: { valid: { domain: 'ok.example' }, fields: { domain: 'string' }, required: ['domain'] } },
  'GET /domains': { path: '/domains' },
  'GET /domains/:id': { path: '/domains/:domain', notFound: 'DOMAIN_NOT_FOUND' },
  'DELETE /domains/:id': { path: '/domains/:domain', notFound: 'DOMAIN_NOT_FOUND' },
  'POST /domains/:id/verify': { path: '/domains/:domain/verify', notFound: 'DOMAIN_NOT_FOUND' },
  'GET /domains/:id/dmarc': { path: '/domains/:domain/dmarc', notFound: 'DOMAIN_NOT_FOUND', query: { days: ['0', '-1', '367', 'abc', '1.5', '1e3', 'x'.repeat(5000)] } },
  // Public; answers only for Host mta-sts.<verified domain> (404 NOT_FOUND here).
  'GET /.well-known/mta-sts.txt': { path: '/.well-known/mta-sts.txt', static: true },
  'GET /domains/:id/tls-reports': { path: '/domains/:domain/tls-reports', notFound: 'DOMAIN_NOT_FOUND', query: { days: ['0', '-1', '367', 'abc', '1.5', '1e3', 'x'.repeat(5000)] } },
  'GET /inboxes/:inboxId/messages': {
    path: '/inboxes/:inbox/messages',
    notFound: 'INBOX_NOT_FOUND',
    query: { ...PAGE, ...FILTERS, after: ['nope', "msg_' OR 1=1", 'evt_00000000000000000000000000', 'msg_' + 'x'.repeat(5000)], wait: ['-1', '61', 'abc', '1.5', '1e1', '99999999999999999999'] },
  },
  'GET /messages': { path: '/messages', query: { ...PAGE, ...FILTERS } },
  'GET /messages/:id': { path: '/messages/:message', notFound: 'MESSAGE_NOT_FOUND' },
  'PATCH /messages/:id': { path: '/messages/:message', notFound: 'MESSAGE_NOT_FOUND', json: { valid: {}, fields: { unread: 'bool', addLabels: 'strings', removeLabels: 'strings' }, required: [] } },
  'GET /messages/:id/raw': { path: '/messages/:message/raw', notFound: 'MESSAGE_NOT_FOUND' },
  'DELETE /messages/:id': { path: '/messages/:message', notFound: 'MESSAGE_NOT_FOUND' },
  'POST /inboxes/:inboxId/messages': {
    path: '/inboxes/:inbox/messages',
    notFound: 'INBOX_NOT_FOUND',
    json: SEND_BODY,
  },
  'POST /messages/:id/cancel': { path: '/messages/:message/cancel', notFound: 'MESSAGE_NOT_FOUND' },
  'POST /messages/:id/release': { path: '/messages/:message/release', notFound: 'MESSAGE_NOT_FOUND' },
  'POST /inboxes/:inboxId/messages/check': {
    path: '/inboxes/:inbox/messages/check',
    notFound: 'INBOX_NOT_FOUND',
    json: SEND_BODY,
  },
  'POST /inboxes/:inboxId/drafts': {
    path: '/inboxes/:inbox/drafts',
    notFound: 'INBOX_NOT_FOUND',
    json: {
      valid: {},
      fields: { to: 'headers', cc: 'headers', bcc: 'headers', subject: 'header', bodyText: 'string', bodyHtml: 'string', threadId: 'id', inReplyTo: 'id', attachmentIds: 'strings', sendAt: 'string' },
      required: [],
    },
  },
  'GET /inboxes/:inboxId/drafts': { path: '/inboxes/:inbox/drafts', notFound: 'INBOX_NOT_FOUND', query: PAGE },
  'GET /drafts/:id': { path: '/drafts/:draft', notFound: 'DRAFT_NOT_FOUND' },
  'PATCH /drafts/:id': {
    path: '/drafts/:draft',
    notFound: 'DRAFT_NOT_FOUND',
    json: {
      valid: {},
      fields: { to: 'headers', cc: 'headers', bcc: 'headers', subject: 'header', bodyText: 'string', bodyHtml: 'string', threadId: 'id', inReplyTo: 'id', attachmentIds: 'strings', sendAt: 'string' },
      required: [],
    },
  },
  'DELETE /drafts/:id': { path: '/drafts/:draft', notFound: 'DRAFT_NOT_FOUND' },
  // The fixture draft has no recipient: even a body that passed would be refused (400 `to`).
  'POST /drafts/:id/send': { path: '/drafts/:draft/send', notFound: 'DRAFT_NOT_FOUND', json: { valid: {}, fields: { sendAt: 'string', listUnsubscribe: 'bool' }, required: [] } },
  'GET /lists': { path: '/lists', query: { ...PAGE, direction: ['inbound', 'RECEIVE', "send' OR 1=1"], kind: ['deny', 'Block'], inboxId: ['x'.repeat(5000)] } },
  'POST /lists': {
    path: '/lists',
    json: {
      valid: { direction: 'send', kind: 'block', entry: 'x.example' },
      fields: { direction: 'string', kind: 'string', entry: 'header', inboxId: 'id' },
      required: ['direction', 'kind', 'entry'],
    },
  },
  'DELETE /lists/:id': { path: '/lists/:list', notFound: 'LIST_ENTRY_NOT_FOUND' },
  'GET /suppressions': { path: '/suppressions', query: PAGE },
  'POST /suppressions': { path: '/suppressions', json: { valid: { address: 'suppressed@example.org' }, fields: { address: 'string' }, required: ['address'] } },
  'DELETE /suppressions/:address': { path: '/suppressions/:suppression', notFound: 'SUPPRESSION_NOT_FOUND' },
  // Public: the token is the credential; a forged, malformed or unknown one is a plain 404.
  'POST /unsubscribe/:token': { path: '/unsubscribe/:token', notFound: 'NOT_FOUND' },
  'GET /audit': { path: '/audit', query: { action: ['x'.repeat(5000), "key.created' OR 1=1", ''], after: ['aud_', 'x'.repeat(5000)], limit: ['0', '-1', '1e9', 'x'] } },
  'POST /messages/:id/reply': {
    path: '/messages/:message/reply',
    notFound: 'MESSAGE_NOT_FOUND',
    json: { valid: { bodyText: 'x' }, fields: { bodyText: 'string', bodyHtml: 'string', attachmentIds: 'strings', replyAll: 'bool', sendAt: 'string', listUnsubscribe: 'bool' }, required: [] },
  },
  'POST /messages/:id/forward': {
    path: '/messages/:message/forward',
    notFound: 'MESSAGE_NOT_FOUND',
    json: { valid: { to: ['bob@example.org'] }, fields: { to: 'headers', cc: 'headers', bodyText: 'string', bodyHtml: 'string', sendAt: 'string', listUnsubscribe: 'bool' }, required: ['to'] },
  },
  'GET /inboxes/:inboxId/threads': { path: '/inboxes/:inbox/threads', notFound: 'INBOX_NOT_FOUND', query: { ...PAGE, ...FILTERS } },
  'GET /threads': { path: '/threads', query: { ...PAGE, ...FILTERS } },
  'GET /threads/:id': { path: '/threads/:thread', notFound: 'THREAD_NOT_FOUND' },
  'PATCH /threads/:id': { path: '/threads/:thread', notFound: 'THREAD_NOT_FOUND', json: { valid: {}, fields: { unread: 'bool', addLabels: 'strings', removeLabels: 'strings' }, required: [] } },
  'POST /attachments': { path: '/attachments', multipart: true },
  'GET /attachments/:id': { path: '/attachments/:attachment', notFound: 'ATTACHMENT_NOT_FOUND' },
  'GET /attachments/:id/text': { path: '/attachments/:attachment/text', notFound: 'ATTACHMENT_NOT_FOUND' },
  // Public: without a valid signature every id is refused alike, so ids cannot be probed.
  'GET /attachments/:id/download': {
    path: '/attachments/:attachment/download',
    notFound: 'INVALID_SIGNATURE',
    idStatus: 403,
    query: { expires: ['abc', '-1', '1e99', ''], signature: ['', 'zz', '0'.repeat(64), 'A'.repeat(5000)] },
  },
  'POST /webhooks': {
    path: '/webhooks',
    json: {
      valid: { url: 'https://hooks.example/x' },
      fields: { url: 'string', description: 'header', events: 'events', isActive: 'bool' },
      required: ['url'],
      crlfCode: { url: 'INVALID_WEBHOOK_URL' },
    },
  },
  'GET /webhooks': { path: '/webhooks' },
  'GET /webhooks/catalog': { path: '/webhooks/catalog' },
  'GET /webhooks/logs': { path: '/webhooks/logs', query: { limit: ['-1', '0', '201', 'abc', '1.5'], hours: ['-1', '0', 'abc', '99999999'], status: ['bogus'], event: ['message.bogus'] } },
  'GET /webhooks/activity': { path: '/webhooks/activity', query: { hours: ['-1', '0', 'abc', '1.5', '99999999'] } },
  'GET /webhooks/:id': { path: '/webhooks/:webhook', notFound: 'WEBHOOK_NOT_FOUND' },
  'GET /events': { path: '/events', query: EVENT_QUERY },
  'GET /events/stream': { path: '/events/stream', query: { ...EVENT_QUERY, limit: ['abc', '0', '1001'] } },
  'PUT /webhooks/:id': {
    path: '/webhooks/:webhook',
    notFound: 'WEBHOOK_NOT_FOUND',
    json: {
      valid: {},
      fields: { url: 'string', description: 'header', events: 'events', isActive: 'bool', rotateSecret: 'bool' },
      required: [],
      crlfCode: { url: 'INVALID_WEBHOOK_URL' },
    },
  },
  'DELETE /webhooks/:id': { path: '/webhooks/:webhook', notFound: 'WEBHOOK_NOT_FOUND' },
  'GET /': { path: '/', static: true },
  'GET /dashboard': { path: '/dashboard', static: true },
  'GET /dashboard/': { path: '/dashboard/', static: true },
  'GET /dashboard/app.js': { path: '/dashboard/app.js', static: true },
  'GET /dashboard/app.css': { path: '/dashboard/app.css', static: true },
  'GET /dashboard/favicon.svg': { path: '/dashboard/favicon.svg', static: true },
  'POST /dashboard/api/deliveries/:id/replay': { path: '/dashboard/api/deliveries/:delivery/replay', notFound: 'NOT_FOUND' },
  'POST /mcp': { path: '/mcp', protocol: true },
  'GET /mcp': { path: '/mcp', protocol: true },
  'DELETE /mcp': { path: '/mcp', protocol: true },
};

const fill = (path: string, id?: string) => path.replace(/:(\w+)/g, (_m, name: string) => (id === undefined ? ids[name] : id));

/** Ids that must be a plain not-found: oversized, traversal, injection, NUL, non-ASCII, another type's prefix. */
const BAD_IDS = ['inb_doesnotexist', 'x'.repeat(4000), '..%2F..%2Fetc%2Fpasswd', "1'%20OR%20'1'%3D'1", '%00', 'a%0D%0Ab', '%F0%9F%92%A9', 'msg_%25s%25s%25n', '%E0%A4%A'];

const WRONG_TYPES: Record<FieldKind, unknown[]> = {
  string: [42, true, {}, ['a']],
  header: [42, false, { a: 1 }, ['a']],
  id: [42, true, {}, ['inb_x']],
  strings: ['a@b.c', 42, {}, [42], [null], [['nested']]],
  headers: ['a@b.c', 42, {}, [42], [null], [['nested']]],
  events: ['message.received', 42, [42], ['message.bogus'], [{}]],
  bool: ['true', 1, 0, 'false', [], {}],
};

describe('hostile HTTP', () => {
  test('every registered route has a hostile-input entry (add one when you add a route)', () => {
    const routes = createHttpApp(t.server.ctx).locals.routes as RegisteredRoute[];
    const registered = routes.map((r) => `${r.method} ${r.path}`);
    const missing = registered.filter((k) => !(k in SPEC));
    assert.deepEqual(missing, [], `routes without hostile coverage: ${missing.join(', ')}`);
    const stale = Object.keys(SPEC).filter((k) => !registered.includes(k));
    assert.deepEqual(stale, [], `entries for routes that no longer exist: ${stale.join(', ')}`);
  });

  test('malformed and unknown ids in the path: the resource not-found code, never a 500', async () => {
    for (const [route, spec] of Object.entries(SPEC)) {
      if (!spec.notFound) continue;
      const method = route.split(' ')[0];
      for (const bad of BAD_IDS) {
        const path = spec.path.replace(/:(\w+)/, bad).replace(/:(\w+)/g, (_m, n: string) => ids[n]);
        const init = spec.json ? { body: JSON.stringify(spec.json.valid), headers: { 'content-type': 'application/json' } } : {};
        // A malformed %-escape is refused before routing, whatever the route.
        if (bad === '%E0%A4%A') await refused(`${route} malformed escape`, 400, 'VALIDATION_ERROR', method, path, init);
        else await refused(`${route} bad id`, spec.idStatus ?? 404, spec.notFound, method, path, init);
      }
    }
  });

  test('bad query parameters are 400 VALIDATION_ERROR (never capped, never a 500)', async () => {
    for (const [route, spec] of Object.entries(SPEC)) {
      if (!spec.query || spec.notFound === 'INVALID_SIGNATURE') continue;
      for (const [name, values] of Object.entries(spec.query)) {
        for (const v of values) {
          await refused(`${route} ?${name}`, 400, 'VALIDATION_ERROR', route.split(' ')[0], `${fill(spec.path)}?${name}=${encodeURIComponent(v)}`);
        }
      }
    }
  });

  test('signed download: forged, malformed or missing signature and expiry are refused alike', async () => {
    const spec = SPEC['GET /attachments/:id/download'];
    for (const [name, values] of Object.entries(spec.query!)) {
      for (const v of values) {
        const other = name === 'expires' ? `signature=${'0'.repeat(64)}` : `expires=${Math.floor(Date.now() / 1000) + 600}`;
        await refused(`download ?${name}`, 403, 'INVALID_SIGNATURE', 'GET', `${fill(spec.path)}?${other}&${name}=${encodeURIComponent(v)}`, { key: null });
      }
    }
    await refused('download without query', 403, 'INVALID_SIGNATURE', 'GET', fill(spec.path), { key: null });
  });

  for (const [route, spec] of Object.entries(SPEC)) {
    if (!spec.json) continue;
    const [method] = route.split(' ');
    const { valid, fields, required, crlfCode = {} } = spec.json;
    test(`${route}: hostile JSON bodies`, async () => {
      const path = fill(spec.path);
      const json = (body: unknown) => ({ body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } });

      // Not JSON, or not the JSON we take.
      for (const raw of ['{"a":', '{', 'nope', "{'single': 1}", '{"a":1,}', '\u0000', '{"a": NaN}', '\xff\xfe{']) {
        await refused('malformed JSON', 400, 'INVALID_JSON', method, path, json(raw));
      }
      for (const raw of ['[]', '"text"', '42', 'null', 'true', JSON.stringify([valid])]) {
        await refused('non-object JSON', 400, 'VALIDATION_ERROR', method, path, json(raw));
      }
      // Wrong or missing content type with an otherwise valid body.
      for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', 'application/xml']) {
        await refused(`content-type ${ct}`, 415, 'UNSUPPORTED_MEDIA_TYPE', method, path, { body: JSON.stringify(valid), headers: { 'content-type': ct } });
      }
      await refused('no content-type', 415, 'UNSUPPORTED_MEDIA_TYPE', method, path, { body: new Blob([JSON.stringify(valid)]) });
      // Deep nesting: 100k levels of objects and of arrays (JSON.parse must not blow the stack into a 500).
      await refused('deep objects', 400, 'VALIDATION_ERROR', method, path, json('{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000)));
      const deepField = `"${Object.keys(fields)[0]}":${'['.repeat(100_000)}${']'.repeat(100_000)}`;
      await refused('deep arrays', 400, 'VALIDATION_ERROR', method, path, json('{' + [JSON.stringify(valid).slice(1, -1), deepField].filter(Boolean).join(',') + '}'));
      // Over max_body_bytes: 413 before anything is parsed.
      await refused('huge body', 413, 'PAYLOAD_TOO_LARGE', method, path, json({ ...valid, pad: 'x'.repeat(t.config.http.max_body_bytes + 10) }));
      // Unknown fields, including prototype pollution attempts.
      for (const extra of ['"extra":1', '"id":"inb_x"', '"accountId":"acc_x"', '"status":"active"', '"__proto__":{"admin":true}', '"constructor":{"prototype":{"x":1}}']) {
        const raw = '{' + [JSON.stringify(valid).slice(1, -1), extra].filter(Boolean).join(',') + '}';
        await refused(`unknown field ${extra}`, 400, 'VALIDATION_ERROR', method, path, json(raw));
      }
      // Missing required fields, one at a time.
      for (const name of required) {
        const body = { ...valid };
        delete body[name];
        await refused(`missing ${name}`, 400, 'VALIDATION_ERROR', method, path, json(body));
      }
      for (const [name, kind] of Object.entries(fields)) {
        for (const wrong of WRONG_TYPES[kind]) {
          await refused(`${name}=${JSON.stringify(wrong)}`, 400, 'VALIDATION_ERROR', method, path, json({ ...valid, [name]: wrong }));
        }
        // Huge strings (under the body limit): a field limit refuses them, or for free text the
        // message is refused for another field, so use a body that is otherwise invalid.
        if (kind === 'header' || kind === 'id' || kind === 'headers' || kind === 'strings') {
          const huge = 'x'.repeat(200_000);
          await refused(`${name} huge`, 400, 'VALIDATION_ERROR', method, path, json({ ...valid, [name]: kind === 'headers' || kind === 'strings' ? [huge] : huge }));
        }
        // CR, LF and NUL in anything that can reach a header or a log line.
        if (kind === 'header' || kind === 'headers' || name in crlfCode) {
          for (const attack of HEADER_ATTACKS) {
            const value = kind === 'headers' ? [attack] : attack;
            await refused(`${name} with control characters`, 400, crlfCode[name] ?? 'VALIDATION_ERROR', method, path, json({ ...valid, [name]: value }));
          }
        }
      }
    });
  }

  test('POST /attachments: wrong content type, malformed multipart, no file part, JSON instead', async () => {
    const path = '/attachments';
    await refused('json body', 415, 'UNSUPPORTED_MEDIA_TYPE', 'POST', path, { body: '{}', headers: { 'content-type': 'application/json' } });
    await refused('text body', 415, 'UNSUPPORTED_MEDIA_TYPE', 'POST', path, { body: 'x', headers: { 'content-type': 'text/plain' } });
    await refused('no boundary', 400, 'VALIDATION_ERROR', 'POST', path, { body: 'x', headers: { 'content-type': 'multipart/form-data; charset=utf-8' } });
    await refused('garbage multipart', 400, 'VALIDATION_ERROR', 'POST', path, { body: 'not multipart at all', headers: { 'content-type': 'multipart/form-data; boundary=XYZ' } });
    const b = 'BOUNDARY';
    const part = (headers: string, body: string) => `--${b}\r\n${headers}\r\n\r\n${body}\r\n`;
    const bodies = [
      part('Content-Disposition: form-data; name="other"', 'value') + `--${b}--\r\n`, // no `file` part
      part('Content-Disposition: form-data; name="file"', 'no filename') + `--${b}--\r\n`, // a field, not a file
      `--${b}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\ntruncated, no closing boundary`,
      // Past busboy's limits: 500 fields before the file, 5,000 part headers, a 200 KB header line, NUL in the name.
      Array.from({ length: 500 }, (_v, i) => part(`Content-Disposition: form-data; name="f${i}"`, 'v')).join('') +
        part('Content-Disposition: form-data; name="file"; filename="a.txt"', 'data') +
        `--${b}--\r\n`,
      `--${b}\r\n` + Array.from({ length: 5000 }, (_v, i) => `X-H${i}: v`).join('\r\n') + `\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\ndata\r\n--${b}--\r\n`,
      part(`Content-Disposition: form-data; name="file"; filename="${'a'.repeat(200_000)}.txt"`, 'x') + `--${b}--\r\n`,
      part('Content-Disposition: form-data; name="file"; filename="a\u0000.txt"', 'x') + `--${b}--\r\n`,
    ];
    for (const body of bodies) {
      const res = await (async () => {
        const before = await dbDigest();
        const r = await send('POST', path, { body, headers: { 'content-type': `multipart/form-data; boundary=${b}` } });
        assert.equal(await dbDigest(), before, `multipart ${JSON.stringify(body.slice(0, 60))} changed the database`);
        return r;
      })();
      assert.equal(res.status, 400, res.text);
      assert.equal(res.code, 'VALIDATION_ERROR');
    }
  });

  test('POST /mcp: the HTTP layer refuses with the envelope, the protocol with JSON-RPC errors; nothing changes', async () => {
    const json = (raw: string, headers: Record<string, string> = {}) => ({ body: raw, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } });
    for (const raw of ['{"jsonrpc":', 'nope', '{"a":1,}', '\u0000']) await refused('malformed JSON', 400, 'INVALID_JSON', 'POST', '/mcp', json(raw));
    for (const raw of ['"text"', '42', 'null', 'true', '', '[]']) await refused('not a message or batch', 400, 'VALIDATION_ERROR', 'POST', '/mcp', json(raw));
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx']) {
      await refused(`content-type ${ct}`, 415, 'UNSUPPORTED_MEDIA_TYPE', 'POST', '/mcp', json('{}', { 'content-type': ct }));
    }
    await refused('huge body', 413, 'PAYLOAD_TOO_LARGE', 'POST', '/mcp', json(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', pad: 'x'.repeat(t.config.http.max_body_bytes) })));
    await refused('foreign Origin', 403, 'FORBIDDEN', 'POST', '/mcp', json('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', { origin: 'https://evil.example' }));
    await refused('no key', 401, 'UNAUTHORIZED', 'POST', '/mcp', { ...json('{"jsonrpc":"2.0","id":1,"method":"tools/list"}'), key: null });
    for (const method of ['GET', 'DELETE']) await refused(`${method} /mcp`, 405, 'METHOD_NOT_ALLOWED', method, '/mcp');
    // Valid JSON the protocol does not take: JSON-RPC errors, 4xx, no internals, nothing changed.
    for (const raw of [
      '{}',
      '[1]',
      '{"jsonrpc":"1.0","id":1,"method":"tools/list"}',
      '{"jsonrpc":"2.0","id":{},"method":"tools/call"}',
      JSON.stringify(Array.from({ length: 1000 }, (_v, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }))),
      '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000),
      '['.repeat(100_000) + ']'.repeat(100_000),
    ]) {
      const before = await dbDigest();
      const res = await send('POST', '/mcp', json(raw));
      assert.ok(res.status >= 400 && res.status < 500, `${raw.slice(0, 60)} → ${res.status} ${res.text.slice(0, 200)}`);
      assert.equal(JSON.parse(res.text).jsonrpc, '2.0', res.text.slice(0, 200));
      assert.ok(!/\bat \S+:\d+:\d+|SQLITE|stack/i.test(res.text), res.text.slice(0, 300));
      assert.equal(await dbDigest(), before);
    }
    const noSse = await send('POST', '/mcp', json('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', { accept: 'application/json' }));
    assert.equal(noSse.status, 406);
  });

  test('headers: bad keys, bad Idempotency-Key, oversized URL and headers, raw protocol garbage', async () => {
    for (const key of ['', 'mr_live_' + 'A'.repeat(40), 'x'.repeat(10_000), 'mr_live_\u00e9', "mr_live_' OR 1=1 --"]) {
      await refused('bad key', 401, 'UNAUTHORIZED', 'GET', '/inboxes', { key: null, headers: { 'x-api-key': key } });
    }
    await refused('bearer without key', 401, 'UNAUTHORIZED', 'GET', '/inboxes', { key: null, headers: { authorization: 'Bearer' } });
    await refused('basic auth', 401, 'UNAUTHORIZED', 'GET', '/inboxes', { key: null, headers: { authorization: 'Basic YTpi' } });
    for (const idem of ['x'.repeat(256), 'has space', 'caf\u00e9']) {
      await refused('bad Idempotency-Key', 400, 'VALIDATION_ERROR', 'POST', '/inboxes', { body: '{}', headers: { 'content-type': 'application/json', 'idempotency-key': idem } });
    }
    await refused('unknown method on a known path', 404, 'NOT_FOUND', 'PUT', `/inboxes/${ids.inbox}`, { body: '{}', headers: { 'content-type': 'application/json' } });
    await refused('unknown route', 404, 'NOT_FOUND', 'GET', '/inboxes/../../etc/passwd');

    // What fetch will not send: raw bytes on a socket. The server answers 4xx (or closes) and keeps serving.
    const raw = async (payload: string): Promise<string> =>
      new Promise((resolve) => {
        const s = connect(Number(new URL(t.url).port), '127.0.0.1');
        let out = '';
        s.on('data', (d) => (out += d));
        s.on('error', () => resolve(out));
        s.on('close', () => resolve(out));
        s.setTimeout(3000, () => s.destroy());
        s.write(payload);
      });
    const before = await dbDigest();
    const auth = `Authorization: Bearer ${t.key}\r\n`;
    const cases = [
      `GET /${'a'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      `GET /inboxes HTTP/1.1\r\nHost: x\r\n${auth}X-Big: ${'b'.repeat(70_000)}\r\n\r\n`,
      `POST /inboxes HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{}`,
      `POST /inboxes HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n0\r\n\r\n`,
      `POST /inboxes HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n`,
      `GET /inboxes HTTP/1.1\r\nHost: x\r\nX-Evil: a\u0000b\r\n\r\n`,
      `GET /inboxes HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n`,
      `\u0016\u0003\u0001\u0002\u0000\u0001\u0000\u01fc\u0003\u0003`, // a TLS ClientHello on the plain port
      `GET / HTTP/9.9\r\n\r\n`,
    ];
    for (const c of cases) {
      const answer = await raw(c);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1] ?? 0);
      assert.ok(status === 0 || (status >= 400 && status < 500), `raw request ${JSON.stringify(c.slice(0, 80))} answered ${answer.slice(0, 120)}`);
    }
    assert.equal(await dbDigest(), before, 'raw protocol garbage changed the database');
    assert.equal((await send('GET', '/health')).status, 200, 'the listener stopped serving');
  });

  test('after all of it the fixture still reads back', async () => {
    assert.equal((await t.api('GET', `/messages/${ids.message}`)).status, 200);
    assert.equal((await t.api('GET', `/inboxes/${ids.inbox}`)).body.address, 'hostile@agents.test');
  });
});
