// Bounded responses (issue 27, PRODUCT.md "Bounded cost"), over real sockets: every list answer
// (the inbox and account lists with each of their statements, searches, the `after` long-poll
// cursor, a thread's messages, the MCP list, search and get_thread tools) cuts each body longer
// than `[limits] list_body_bytes` at a UTF-8 boundary and says `bodyTruncated: true`, with the
// reply text extracted from the cut body; GET /messages/{id} and get_message have it whole.
// GET /threads/{id} and get_thread answer a page of messages (limit ≤ 100, default 100).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { SendMailOptions, Transporter } from 'nodemailer';
import { smtpTransport } from '../support/mail.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';

const LIST_BODY_BYTES = 1024;

let t: TestServer;
let smtp: Transporter;
let mcp: Client;
let inbox: { id: string; address: string };
/** A long text body (3-byte characters: a cut can fall inside one) and a long HTML body. */
let big: any;
let small: any;
/** A reply to `big` whose new text alone is longer than a list body. */
let reply: any;

const LONG_TEXT = 'Start. ' + 'fünf € '.repeat(1500) + 'END-OF-TEXT';
const LONG_HTML = '<p>' + 'html body '.repeat(1000) + 'END-OF-HTML</p>';

async function receive(mail: SendMailOptions): Promise<any> {
  const info = await smtp.sendMail({ from: 'sender@example.org', to: inbox.address, ...mail });
  const id = /stored as (msg_\w+)/.exec(info.response ?? '')![1];
  return (await t.api('GET', `/messages/${id}`)).body;
}

before(async () => {
  t = await startTestServer({ limits: { list_body_bytes: LIST_BODY_BYTES, requests_per_minute: 100_000, daily_send_limit: 1000 }, policy: { thread_hourly_sends: 1000 } });
  smtp = smtpTransport(t.server.smtpPort);
  inbox = (await t.api('POST', '/inboxes', { address: 'bounds' })).body;
  big = await receive({ subject: 'zebracrossing big', text: LONG_TEXT, html: LONG_HTML, messageId: '<big@example.org>' });
  small = await receive({ subject: 'zebracrossing small', text: 'short body' });
  reply = await receive({
    subject: 'Re: zebracrossing big',
    text: 'New words. ' + 'reply text '.repeat(300) + 'END-OF-REPLY\n\nOn Monday someone wrote:\n> quoted',
    inReplyTo: '<big@example.org>',
    references: '<big@example.org>',
  });
  mcp = new Client({ name: 'response-bounds-test', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${t.key}` } } }));
});

after(async () => {
  await mcp?.close().catch(() => undefined);
  smtp?.close();
  await t?.close();
});

async function tool(name: string, args: Record<string, unknown>): Promise<any> {
  const res = (await mcp.callTool({ name, arguments: args })) as CallToolResult;
  assert.notEqual(res.isError, true, JSON.stringify(res.structuredContent).slice(0, 300));
  return res.structuredContent;
}

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/** `cut` is `whole` cut to LIST_BODY_BYTES at a character boundary, flagged. */
function assertCut(cut: any, whole: any): void {
  assert.equal(cut.bodyTruncated, true, `${cut.id} is flagged`);
  for (const field of ['bodyText', 'bodyHtml', 'extractedText', 'extractedHtml'] as const) {
    const value = cut[field];
    if (value === null) continue;
    assert.ok(bytes(value) <= LIST_BODY_BYTES, `${field} is ${bytes(value)} bytes`);
    assert.ok(!value.includes('\uFFFD'), `${field} is not cut inside a character`);
  }
  assert.ok(bytes(cut.bodyText) > LIST_BODY_BYTES - 4, 'the text is cut at the limit, not before');
  assert.ok(whole.bodyText.startsWith(cut.bodyText));
  assert.ok(whole.bodyHtml === null || whole.bodyHtml.startsWith(cut.bodyHtml));
  assert.equal(cut.size, whole.size, 'size stays the whole message');
}

/** In a list `data`: the long messages cut, the short one whole and not flagged. */
function assertListBounded(data: any[], what: string): void {
  const byId = new Map(data.map((m) => [m.id, m]));
  assert.ok(byId.has(big.id) && byId.has(small.id), `${what} lists the messages`);
  assertCut(byId.get(big.id), big);
  if (byId.has(reply.id)) assertCut(byId.get(reply.id), reply);
  const s = byId.get(small.id);
  assert.equal(s.bodyTruncated, false, `${what}: a short body is not flagged`);
  assert.equal(s.bodyText, small.bodyText);
}

describe('bodies in list answers', () => {
  test('GET /messages/{id} has every body whole, bodyTruncated false', () => {
    for (const m of [big, small, reply]) assert.equal(m.bodyTruncated, false);
    assert.ok(big.bodyText.includes('END-OF-TEXT') && big.bodyHtml.includes('END-OF-HTML'));
    assert.ok(bytes(big.bodyText) > 10_000);
    assert.ok(reply.extractedText.includes('END-OF-REPLY') && !reply.extractedText.includes('quoted'), 'the reply text, whole');
  });

  test('every message list cuts long bodies to limits.list_body_bytes and flags them', async () => {
    const older = (await t.api('POST', '/inboxes', { address: 'bounds-cursor' })).body;
    for (const path of [
      `/inboxes/${inbox.id}/messages`,
      `/inboxes/${inbox.id}/messages?status=received`,
      `/inboxes/${inbox.id}/messages?direction=inbound`,
      '/messages',
      '/messages?status=received',
      '/messages?unread=true',
      '/messages?q=zebracrossing',
      `/inboxes/${inbox.id}/messages?q=zebracrossing`,
    ]) {
      const res = await t.api('GET', path);
      assert.equal(res.status, 200, `${path}: ${res.text.slice(0, 200)}`);
      assertListBounded(res.body.data, path);
    }
    // The long-poll's cursor: messages stored after the first of the inbox.
    assert.ok(older.id);
    const first = (await t.api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).body.data.at(-1);
    const later = await t.api('GET', `/inboxes/${inbox.id}/messages?after=${first.id}`);
    assert.equal(later.status, 200);
    for (const m of later.body.data) assert.equal(m.bodyTruncated, m.id !== small.id);
  });

  test('a reply text is extracted from the cut body in a list, from the whole body in GET /messages/{id}', async () => {
    const listed = (await t.api('GET', `/inboxes/${inbox.id}/messages`)).body.data.find((m: any) => m.id === reply.id);
    assert.ok(bytes(listed.extractedText) <= LIST_BODY_BYTES);
    assert.ok(reply.bodyText.startsWith(listed.extractedText.slice(0, 100)));
    // Read again after the list: the list's extraction is not served for the whole message.
    const whole = (await t.api('GET', `/messages/${reply.id}`)).body;
    assert.equal(whole.bodyTruncated, false);
    assert.equal(whole.extractedText, reply.extractedText);
  });

  test('MCP list_messages, search_messages and get_thread cut; get_message has the body whole', async () => {
    assertListBounded((await tool('list_messages', { inboxId: inbox.id })).data, 'list_messages');
    assertListBounded((await tool('list_messages', {})).data, 'list_messages (account)');
    assertListBounded((await tool('search_messages', { q: 'zebracrossing' })).data, 'search_messages');
    const thread = await tool('get_thread', { threadId: big.threadId });
    assertCut(thread.messages[0], big);
    assertCut(thread.messages[1], reply);
    const whole = await tool('get_message', { messageId: big.id });
    assert.equal(whole.bodyTruncated, false);
    assert.equal(whole.bodyText, big.bodyText);
  });
});

describe('GET /threads/{id}: a page of messages', () => {
  test('limit and offset page the messages, oldest first; messageCount counts them all; bodies cut', async () => {
    const threadId = big.threadId;
    const all = await t.api('GET', `/threads/${threadId}`);
    assert.equal(all.status, 200);
    assert.equal(all.body.limit, 100);
    assert.equal(all.body.offset, 0);
    assert.equal(all.body.messageCount, 2);
    assert.deepEqual(
      all.body.messages.map((m: any) => m.id),
      [big.id, reply.id],
    );
    assertCut(all.body.messages[0], big);
    const first = await t.api('GET', `/threads/${threadId}?limit=1`);
    assert.deepEqual([first.body.messages.map((m: any) => m.id), first.body.limit, first.body.offset, first.body.messageCount], [[big.id], 1, 0, 2]);
    const second = await t.api('GET', `/threads/${threadId}?limit=1&offset=1`);
    assert.deepEqual([second.body.messages.map((m: any) => m.id), second.body.offset, second.body.messageCount], [[reply.id], 1, 2]);
    const past = await t.api('GET', `/threads/${threadId}?offset=5`);
    assert.deepEqual([past.status, past.body.messages, past.body.messageCount], [200, [], 2]);
  });

  test('bad paging: 400 VALIDATION_ERROR naming the parameter', async () => {
    for (const [query, name] of [
      ['limit=101', 'limit'],
      ['limit=0', 'limit'],
      ['limit=ten', 'limit'],
      ['offset=-1', 'offset'],
    ]) {
      const res = await t.api('GET', `/threads/${big.threadId}?${query}`);
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, new RegExp(`\`${name}\``));
    }
    const res = (await mcp.callTool({ name: 'get_thread', arguments: { threadId: big.threadId, limit: 101 } })) as CallToolResult;
    assert.equal(res.isError, true);
    const error = (res.structuredContent as { error: { code: string; status: number; message: string } }).error;
    assert.deepEqual([error.code, error.status], ['VALIDATION_ERROR', 400]);
    assert.match(error.message, /limit/);
  });

  test('a thread of more than 100 messages: 100 by default, the rest from offset 100 (HTTP and MCP)', async () => {
    const own = (await t.api('POST', '/inboxes', { address: 'bounds-long' })).body;
    const first = (await t.api('POST', `/inboxes/${own.id}/messages`, { to: ['x@example.net'], subject: 'long thread', bodyText: 'm0' })).body;
    const threadId = first.threadId;
    for (let i = 1; i <= 101; i++) {
      const res = await t.api('POST', `/inboxes/${own.id}/messages`, { to: ['x@example.net'], subject: 'long thread', bodyText: `m${i}`, threadId });
      assert.equal(res.status, 202, res.text);
    }
    const page = (await t.api('GET', `/threads/${threadId}`)).body;
    assert.equal(page.messageCount, 102);
    assert.equal(page.messages.length, 100);
    assert.equal(page.messages[0].id, first.id, 'oldest first');
    const rest = (await t.api('GET', `/threads/${threadId}?offset=100`)).body;
    assert.deepEqual(
      rest.messages.map((m: any) => m.bodyText),
      ['m100', 'm101'],
    );
    const viaMcp = await tool('get_thread', { threadId });
    assert.equal(viaMcp.messages.length, 100);
    assert.deepEqual(
      (await tool('get_thread', { threadId, limit: 2, offset: 100 })).messages.map((m: any) => m.bodyText),
      ['m100', 'm101'],
    );

    // PATCH of the thread: every message, though it is applied a part of the thread at a time.
    const labels = Array.from({ length: t.config.limits.labels_per_message }, (_, i) => `tag-${i}`);
    const marked = await t.api('PATCH', `/threads/${threadId}`, { addLabels: labels, unread: true });
    assert.equal(marked.status, 200, marked.text);
    assert.equal(marked.body.unreadCount, 102);
    assert.deepEqual(marked.body.labels, [...labels].sort());
    const labelled = async () => [...(await t.api('GET', `/threads/${threadId}`)).body.messages, ...(await t.api('GET', `/threads/${threadId}?offset=100`)).body.messages];
    for (const m of await labelled()) assert.equal(m.labels.length, labels.length, `${m.bodyText} has every label`);
    const cleared = await t.api('PATCH', `/threads/${threadId}`, { removeLabels: labels.slice(1) });
    assert.deepEqual(cleared.body.labels, ['tag-0']);
    for (const m of await labelled()) assert.deepEqual(m.labels, ['tag-0']);
  });
});
