// The OpenAPI 3.1 document: valid against the OpenAPI schema, served at GET /openapi.json
// without a key, covering every registered route and every route of the spec, equal to the
// committed openapi.json, with request schemas that are the ones enforced and response
// schemas that match what the server answers. Every JSON answer of every e2e test is checked
// against the document as well (test/support/openapi-check.ts); the last tests check that check.
import { before, after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { generateOpenApi } from '../../build/openapi.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { API_VERSION, isDocumented, OPERATIONS } from '../../src/http/openapi.ts';
import type { RegisteredRoute } from '../../src/http/routes.ts';
import { checkAnswer, checkAnswersOf, documentedOperations, operationOf, validated } from '../support/openapi-check.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';

const ROOT = join(import.meta.dirname, '..', '..');
/**
 * Every endpoint the API contract lists in its Endpoints tables, in OpenAPI path form. The
 * contract (api-spec.md) is not part of this repository, so its table is transcribed here:
 * the tests stand on the project's own files, and this list is the record of what it promises.
 */
const SPEC_ROUTES = [
  'POST /inboxes',
  'GET /inboxes',
  'GET /inboxes/{id}',
  'DELETE /inboxes/{id}',
  'POST /inboxes/{inboxId}/messages',
  'GET /inboxes/{inboxId}/messages',
  'GET /messages/{id}',
  'DELETE /messages/{id}',
  'POST /domains',
  'GET /domains',
  'GET /domains/{id}',
  'DELETE /domains/{id}',
  'POST /domains/{id}/verify',
  'POST /attachments',
  'GET /attachments/{id}',
  'POST /account/api-keys',
  'GET /account/api-keys',
  'DELETE /account/api-keys/{id}',
  'POST /webhooks',
  'GET /webhooks',
  'GET /webhooks/catalog',
  'GET /webhooks/logs',
  'GET /webhooks/activity',
  'GET /webhooks/{id}',
  'PUT /webhooks/{id}',
  'DELETE /webhooks/{id}',
];

let t: TestServer;
let doc: any;

before(async () => {
  t = await startTestServer({ http: { public_url: 'https://mail.example.net' } });
  const res = await fetch(`${t.url}/openapi.json`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  doc = await res.json();
});

after(async () => {
  await t?.close();
});

const operations = (d: any): string[] => Object.entries(d.paths as Record<string, Record<string, unknown>>).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
const toOpenApi = (r: { method: string; path: string }) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`;

/** Checks an answer against a component schema: required fields present, no undocumented ones. */
function conforms(name: string, value: any, where = name): void {
  const schema = doc.components.schemas[name];
  assert.ok(schema, `no schema ${name}`);
  assert.equal(typeof value, 'object', where);
  for (const k of schema.required ?? []) assert.ok(k in value, `${where}: required field ${k} missing`);
  for (const [k, v] of Object.entries(value)) {
    const prop = schema.properties[k];
    assert.ok(prop, `${where}: field ${k} is not documented in ${name}`);
    const item = prop.items?.$ref ?? prop.$ref;
    if (item && v !== null) for (const [i, x] of (Array.isArray(v) ? v : [v]).entries()) conforms(item.split('/').pop(), x, `${where}.${k}[${i}]`);
  }
}

describe('the document', () => {
  test('is a valid OpenAPI 3.1 document, served without a key, for the configured public_url', async () => {
    const result = await new Validator().validate(doc);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 1));
    assert.equal(doc.openapi, '3.1.0');
    assert.deepEqual(doc.servers, [{ url: 'https://mail.example.net' }]);
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    assert.equal(doc.info.version, pkg.version);
    assert.equal(API_VERSION, pkg.version);
  });

  test('documents every registered route, and only those (the dashboard is left out on purpose)', () => {
    const documented = new Set(operations(doc));
    const reg = registeredRoutes();
    for (const r of reg.filter(isDocumented)) assert.ok(documented.has(toOpenApi(r)), `${toOpenApi(r)} is missing`);
    assert.equal(documented.size, reg.filter(isDocumented).length);
    assert.ok(
      reg.some((r) => r.path.startsWith('/dashboard')),
      'the dashboard routes exist',
    );
    assert.ok(![...documented].some((o) => o.includes('/dashboard')));
  });

  test('covers every route of the API specification', () => {
    const documented = new Set(operations(doc));
    for (const r of SPEC_ROUTES) assert.ok(documented.has(r), `spec route ${r} is missing`);
  });

  test('the contract routes are in the committed openapi.json too, and the list names each once', () => {
    const committed = JSON.parse(readFileSync(join(ROOT, 'openapi.json'), 'utf8'));
    const documented = new Set(operations(committed));
    assert.equal(new Set(SPEC_ROUTES).size, SPEC_ROUTES.length);
    for (const r of SPEC_ROUTES) assert.ok(documented.has(r), `contract route ${r} is missing from openapi.json`);
  });

  test('the committed openapi.json is fresh (npm run openapi regenerates it)', async () => {
    const committed = readFileSync(join(ROOT, 'openapi.json'), 'utf8');
    assert.ok(committed === (await generateOpenApi()), 'openapi.json is stale: run `npm run openapi`');
  });

  test('operationIds are readable, stable and unique', () => {
    const ops = Object.values(doc.paths as Record<string, Record<string, any>>).flatMap((byMethod) => Object.values(byMethod));
    const ids = ops.map((op) => op.operationId as string);
    assert.equal(new Set(ids).size, ids.length, `duplicate operationIds: ${ids.filter((id, i) => ids.indexOf(id) !== i).join(', ')}`);
    for (const id of ids) assert.match(id, /^[a-z][a-zA-Z]+$/, `operationId ${id} is not a plain camelCase name (no '_', '{', digits or punctuation)`);
    const idOf = (method: string, path: string) => doc.paths[path][method].operationId;
    assert.deepEqual(
      [idOf('get', '/inboxes/{id}'), idOf('get', '/inboxes'), idOf('post', '/inboxes'), idOf('delete', '/inboxes/{id}'), idOf('post', '/inboxes/{inboxId}/messages'), idOf('put', '/webhooks/{id}')],
      ['getInbox', 'listInboxes', 'createInbox', 'deleteInbox', 'sendMessage', 'updateWebhook'],
    );
  });

  test('the main request bodies carry an example the enforced schema accepts', () => {
    for (const [method, path] of [
      ['post', '/inboxes'],
      ['post', '/inboxes/{inboxId}/messages'],
      ['post', '/domains'],
      ['post', '/webhooks'],
      ['put', '/webhooks/{id}'],
      ['post', '/account/api-keys'],
    ]) {
      assert.ok(doc.paths[path][method].requestBody.content['application/json'].example, `${method} ${path} has no example`);
    }
    for (const [route, op] of Object.entries(OPERATIONS)) {
      if (!op.example) continue;
      assert.ok(op.body, `${route}: an example without a body schema`);
      const parsed = op.body.safeParse(op.example);
      assert.ok(parsed.success, `${route}: its example is refused: ${JSON.stringify(parsed.error?.issues)}`);
    }
  });

  test('public routes need no key; others name both key schemes', () => {
    assert.deepEqual(doc.paths['/health'].get.security, []);
    assert.deepEqual(doc.paths['/attachments/{id}/download'].get.security, []);
    assert.equal(doc.paths['/inboxes'].get.security, undefined);
    assert.deepEqual(doc.security, [{ bearerAuth: [] }, { apiKeyHeader: [] }]);
    assert.ok(doc.paths['/inboxes'].get.responses['401']);
    assert.equal(doc.paths['/health'].get.responses['401'], undefined);
  });
});

/** The route registry (app.locals.routes) of an app built like the server's, on its context. */
const registeredRoutes = (): RegisteredRoute[] => createHttpApp(t.server.ctx).locals.routes as RegisteredRoute[];

/** A value the JSON Schema accepts (enough for the required fields of the request bodies). */
function sampleOf(schema: any): unknown {
  const type = Array.isArray(schema.type) ? schema.type[0] : (schema.type ?? schema.anyOf?.[0]?.type);
  if (schema.enum) return schema.enum[0];
  if (type === 'array') return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () => sampleOf(schema.items ?? { type: 'string' }));
  if (type === 'boolean') return true;
  if (type === 'integer' || type === 'number') return schema.minimum ?? 1;
  return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
}

describe('request schemas are the enforced ones', () => {
  test('every JSON body refuses unknown fields, in the document and on the wire', async () => {
    const withBody = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, ops]) =>
      Object.entries(ops)
        // POST /mcp carries JSON-RPC, validated by the MCP SDK (test/e2e/mcp.test.ts), not a zod body.
        .filter(([, op]) => op.requestBody?.content?.['application/json'] && !op.tags.includes('MCP'))
        .map(([m, op]) => ({ method: m.toUpperCase(), path: p, schema: op.requestBody.content['application/json'].schema })),
    );
    assert.ok(withBody.length >= 6, `only ${withBody.length} JSON bodies documented`);
    for (const { method, path, schema } of withBody) {
      assert.equal(schema.additionalProperties, false, `${method} ${path}`);
      // The required fields filled in from the documented schema, plus one field it does not list.
      const body: Record<string, unknown> = { zzUndocumented: 1 };
      for (const k of schema.required ?? []) body[k] = sampleOf(schema.properties[k]);
      const res = await t.api(method, path.replace(/\{\w+\}/g, 'x_unknown'), body);
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, /zzUndocumented/, `${method} ${path}`);
    }
  });

  test('field rules come from the zod schemas (lengths, enums, required)', () => {
    const send = doc.paths['/inboxes/{inboxId}/messages'].post.requestBody.content['application/json'].schema;
    assert.deepEqual([...send.required].sort(), ['subject', 'to']);
    assert.equal(send.properties.subject.maxLength, 998);
    assert.equal(send.properties.to.minItems, 1);
    const hook = doc.paths['/webhooks'].post.requestBody.content['application/json'].schema;
    assert.deepEqual(hook.required, ['url']);
    assert.ok(JSON.stringify(hook.properties.events).includes('message.received'));
  });
});

describe('response schemas match the answers', () => {
  test('inbox, message, domain, webhook, API keys, catalog, errors', async () => {
    const inbox = await t.api('POST', '/inboxes', { displayName: 'Docs' });
    conforms('Inbox', inbox.body);
    conforms('InboxPage', (await t.api('GET', '/inboxes')).body);
    const sent = await t.api('POST', `/inboxes/${inbox.body.id}/messages`, { to: ['someone@example.net'], subject: 'Hi', bodyText: 'x' });
    assert.equal(sent.status, 202);
    conforms('Message', sent.body);
    conforms('MessagePage', (await t.api('GET', `/inboxes/${inbox.body.id}/messages`)).body);
    conforms('ThreadWithMessages', (await t.api('GET', `/threads/${sent.body.threadId}`)).body);
    const domain = await t.api('POST', '/domains', { domain: 'docs.example.net' });
    conforms('Domain', domain.body);
    conforms('DomainList', (await t.api('GET', '/domains')).body);
    const hook = await t.api('POST', '/webhooks', { url: 'http://127.0.0.1:9/hook' });
    conforms('WebhookWithSecret', hook.body);
    conforms('Webhook', (await t.api('GET', `/webhooks/${hook.body.id}`)).body);
    // PUT answers without `secret` unless it rotates it: the documented 200 schema must allow both.
    const putSchema = (doc.paths['/webhooks/{id}'].put.responses['200'].content['application/json'].schema.$ref as string).split('/').pop()!;
    const updated = await t.api('PUT', `/webhooks/${hook.body.id}`, { description: 'changed' });
    assert.equal(updated.status, 200);
    assert.equal('secret' in updated.body, false);
    conforms(putSchema, updated.body, 'PUT /webhooks/{id} without rotateSecret');
    const rotated = await t.api('PUT', `/webhooks/${hook.body.id}`, { rotateSecret: true });
    assert.equal(typeof rotated.body.secret, 'string');
    conforms(putSchema, rotated.body, 'PUT /webhooks/{id} with rotateSecret');
    conforms('WebhookActivity', (await t.api('GET', '/webhooks/activity')).body);
    conforms('EventCatalog', (await t.api('GET', '/webhooks/catalog')).body);
    conforms('CreatedApiKey', (await t.api('POST', '/account/api-keys', { name: 'docs' })).body);
    conforms('ApiKeyList', (await t.api('GET', '/account/api-keys')).body);
    const err = await t.api('GET', '/inboxes/inb_nope');
    conforms('Error', err.body);
    assert.ok(doc.components.schemas.Error.properties.error.properties.code.enum.includes(err.body.error.code));
    assert.match(doc.paths['/inboxes/{id}'].get.responses['404'].description, /INBOX_NOT_FOUND/);
  });
});

describe('every e2e answer is checked against the document (test/support/openapi-check.ts)', () => {
  test('a conforming answer passes; an undocumented field, a wrong type, an undocumented status fail, naming the operation', async () => {
    const inbox = await t.api('POST', '/inboxes', { displayName: 'Checked' });
    const path = `/inboxes/${inbox.body.id}`;
    assert.equal(checkAnswer('GET', path, 200, 'application/json', JSON.stringify(inbox.body)), undefined);
    assert.match(checkAnswer('GET', path, 200, 'application/json', JSON.stringify({ ...inbox.body, leaked: 1 })) ?? '', /^GET \/inboxes\/\{id\} answered 200 does not match .*leaked/);
    assert.match(checkAnswer('GET', path, 200, 'application/json', JSON.stringify({ ...inbox.body, createdAt: 5 })) ?? '', /\/createdAt must be string/);
    assert.match(checkAnswer('GET', path, 418, 'application/json', '{}') ?? '', /GET \/inboxes\/\{id\} answered 418: status 418 is not documented/);
    assert.match(checkAnswer('DELETE', path, 204, '', '') ?? 'ok', /ok/);
    // A literal segment is matched before a parameter, and undocumented paths are left alone.
    assert.equal(operationOf('GET', '/webhooks/catalog')?.key, 'GET /webhooks/catalog');
    assert.equal(operationOf('GET', '/dashboard/api/overview'), undefined);
  });

  test('the fetch of a test fails when a server answers off the document', async () => {
    // A stand-in server answering GET /inboxes with a field the document does not list.
    const fake = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [], total: 0, limit: 20, offset: 0, extra: true })));
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
      checkAnswersOf(url);
      await assert.rejects(fetch(`${url}/inboxes`), /OpenAPI conformance: GET \/inboxes answered 200 does not match its documented schema: \/ must NOT have additional properties \(extra\)/);
      // The same answer on a path the document does not list passes through.
      assert.equal((await fetch(`${url}/not-documented`)).status, 200);
    } finally {
      await new Promise((r) => fake.close(r));
    }
  });

  test('the answers of this file were validated: one operation of each group at least', () => {
    for (const op of ['POST /inboxes 201', 'GET /inboxes 200', 'GET /inboxes/{id} 404', 'PUT /webhooks/{id} 200', 'GET /openapi.json 200']) assert.ok(validated.has(op), `${op} was not validated`);
    assert.equal(documentedOperations().length, operations(doc).length);
  });
});
