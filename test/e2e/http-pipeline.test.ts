// The request pipeline shared by every route: HEAD is answered only by GET routes (tinyhttp
// offers it to every route of a path), JSON answers carry Content-Length, query strings are
// read as sent, and the hot reads done with plain SQLite statements (key lookup, inbox by id,
// message pages) return exactly what the drizzle schema describes, column for column.
import { until } from '../support/wait.ts';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { desc, eq } from 'drizzle-orm';
import { apiKeys, inboxes, messages } from '../../src/store/schema.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { findInboxRow } from '../../src/domain/inboxes/inboxes.ts';
import { listMessages, messageViews } from '../../src/domain/mail/messages.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { smtpTransport } from '../support/mail.ts';
import { sqlDb } from '../support/db.ts';

let t: TestServer;

before(async () => {
  t = await startTestServer();
});

after(async () => {
  await t?.close();
});

const countInboxes = async (): Promise<number> => (await sqlDb(t.server.ctx).select().from(inboxes).where(eq(inboxes.accountId, t.accountId)).all()).length;

test('HEAD runs the GET route of a path, never a POST or DELETE route', async () => {
  const before = await countInboxes();
  // POST /inboxes is registered before GET /inboxes: HEAD must not create an inbox.
  const head = await fetch(`${t.url}/inboxes`, { method: 'HEAD', headers: { authorization: `Bearer ${t.key}` } });
  assert.equal(head.status, 200);
  assert.equal(await head.text(), '');
  assert.equal(await countInboxes(), before);

  // DELETE /account/api-keys/:id has no GET route: HEAD with a read-only key revokes nothing.
  const victim = await createApiKey(t.server.ctx, t.accountId, { name: 'victim' });
  const reader = (await createApiKey(t.server.ctx, t.accountId, { name: 'reader', readOnly: true })).key;
  const res = await fetch(`${t.url}/account/api-keys/${victim.id}`, { method: 'HEAD', headers: { authorization: `Bearer ${reader}` } });
  assert.equal(res.status, 404, 'answered like GET, for which the path has no route');
  const row = (await sqlDb(t.server.ctx).select().from(apiKeys).where(eq(apiKeys.id, victim.id)).get())!;
  assert.equal(row.revokedAt, null);
  assert.equal((await t.api('GET', '/inboxes', undefined, { key: victim.key })).status, 200, 'the key still works');

  // HEAD of a GET route answers like GET, without the body.
  const inbox = (await t.api('POST', '/inboxes', {})).body;
  const got = await t.api('GET', `/inboxes/${inbox.id}`);
  const headInbox = await fetch(`${t.url}/inboxes/${inbox.id}`, { method: 'HEAD', headers: { authorization: `Bearer ${t.key}` } });
  assert.equal(headInbox.status, 200);
  assert.equal(headInbox.headers.get('content-length'), String(Buffer.byteLength(got.text)));
  assert.equal(await headInbox.text(), '');
});

test('JSON answers and errors carry Content-Length instead of chunked framing', async () => {
  const inbox = (await t.api('POST', '/inboxes', {})).body;
  for (const res of [await t.api('GET', `/inboxes/${inbox.id}`), await t.api('GET', '/inboxes/inb_missing'), await t.api('GET', '/no/such/route')]) {
    assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(res.text)));
    assert.equal(res.headers.get('transfer-encoding'), null);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  }
  expectError(await t.api('GET', '/inboxes/inb_missing'), 404, 'INBOX_NOT_FOUND');
});

test('query parameters are read as sent: percent-escapes, plus signs, repeated and empty values', async () => {
  const inbox = (await t.api('POST', '/inboxes', {})).body;
  const page = await t.api('GET', `/inboxes/${inbox.id}/messages?limit=%35&offset=0&status=`);
  assert.equal(page.status, 200, page.text);
  assert.equal(page.body.limit, 5);
  expectError(await t.api('GET', `/inboxes/${inbox.id}/messages?status=not+a+status`), 400, 'VALIDATION_ERROR');
  expectError(await t.api('GET', `/inboxes/${inbox.id}/messages?limit=101`), 400, 'VALIDATION_ERROR');
  expectError(await t.api('GET', `/inboxes/${inbox.id}/messages?limit=abc`), 400, 'VALIDATION_ERROR');
});

test('plain-statement reads return what drizzle reads: key lookup, inbox by id, inbound and outbound message pages', async () => {
  const { ctx } = t.server;
  const inbox = (await t.api('POST', '/inboxes', { address: 'columns', displayName: 'Columns' })).body;
  const transport = smtpTransport(t.server.smtpPort);
  try {
    await transport.sendMail({ from: 'Bob <bob@example.org>', to: 'columns@agents.test', cc: 'c@example.org', subject: 'in', text: 'hello', html: '<p>hello</p>' });
  } finally {
    transport.close();
  }
  const sent = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['someone@example.org'], bcc: ['b@example.org'], subject: 'out', bodyText: 'x' });
  assert.equal(sent.status, 202, sent.text);
  // The two reads compared below must see one state: the send's job is over first.
  await until('the send is final', async () => ((await t.api('GET', `/messages/${sent.body.id}`)).body.status === 'sent' ? true : undefined));

  assert.deepEqual(await findInboxRow(ctx, t.accountId, inbox.id), await sqlDb(ctx).select().from(inboxes).where(eq(inboxes.id, inbox.id)).get());
  expectError(await t.api('GET', `/inboxes/${inbox.id}`, undefined, { key: (await t.newAccount('other')).key }), 404, 'INBOX_NOT_FOUND');

  const drizzleRows = await sqlDb(ctx).select().from(messages).where(eq(messages.inboxId, inbox.id)).orderBy(desc(messages.createdAt), desc(messages.id)).all();
  assert.deepEqual(drizzleRows.map((r) => r.direction).sort(), ['inbound', 'outbound']);
  const page = await listMessages(ctx, t.accountId, inbox.id, { limit: 20, offset: 0 });
  assert.deepEqual(page.data, await messageViews(ctx, drizzleRows, 'cut'));
  assert.equal(page.total, 2);
  const outbound = page.data.find((m) => m.direction === 'outbound')!;
  assert.deepEqual(outbound.bccAddresses, ['b@example.org']);
  const inbound = page.data.find((m) => m.direction === 'inbound')!;
  assert.deepEqual(inbound.ccAddresses, ['c@example.org']);
  assert.equal(inbound.bodyHtml?.includes('<p>hello</p>'), true);
  // The status filter and offset go through the other statements.
  const received = await listMessages(ctx, t.accountId, inbox.id, { limit: 20, offset: 0, status: 'received' });
  assert.deepEqual(received.data, [inbound]);
  assert.equal(received.total, 1);
  assert.deepEqual((await listMessages(ctx, t.accountId, inbox.id, { limit: 1, offset: 1 })).data, page.data.slice(1));

  // A read-only key authenticates as read-only; an expired one not at all.
  const ro = (await createApiKey(ctx, t.accountId, { name: 'ro', readOnly: true })).key;
  assert.equal((await t.api('GET', `/inboxes/${inbox.id}`, undefined, { key: ro })).status, 200);
  expectError(await t.api('POST', '/inboxes', {}, { key: ro }), 403, 'FORBIDDEN');
  const expired = (await createApiKey(ctx, t.accountId, { name: 'old', expiresAt: '2000-01-01T00:00:00.000Z' })).key;
  expectError(await t.api('GET', `/inboxes/${inbox.id}`, undefined, { key: expired }), 401, 'UNAUTHORIZED');
});
