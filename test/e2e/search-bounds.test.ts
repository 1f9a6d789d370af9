// Search is bounded in cost (issue 27, PRODUCT.md "Bounded cost"): at most `[limits]
// search_terms` distinct terms (every side of an OR counted) and 2-character word prefixes
// (else 400 INVALID_QUERY), unknown operators refused and `OR` working (issue 32), a time
// budget past which a search answers 503 SEARCH_TIMEOUT with Retry-After (never a 500 or a
// frozen server), and at most `[limits] searches_per_account` searches of one account at once
// (an MCP batch included). Over HTTP and MCP, on either engine (MAILROOM_TEST_ENGINE).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Transporter } from 'nodemailer';
import { smtpTransport } from '../support/mail.ts';
import { until } from '../support/wait.ts';
import pg from 'pg';
import { expectError, onEngine, readResponse, startTestServer, TEST_ENGINE, type TestServer } from '../support/server.ts';
import { sqlDb } from '../support/db.ts';
import { sql } from 'drizzle-orm';

let t: TestServer;
let transport: Transporter;
let inbox: { id: string; address: string };
let msg: any;

before(async () => {
  t = await startTestServer({ limits: { searches_per_account: 1 } });
  transport = smtpTransport(t.server.smtpPort);
  inbox = (await t.api('POST', '/inboxes', { address: 'bounds' })).body;
  const info = await transport.sendMail({ from: 'search-x@example.org', to: inbox.address, subject: 'quarterly or annual report', text: 'Re: the numbers' });
  msg = (await t.api('GET', `/messages/${/stored as (msg_\w+)/.exec(info.response ?? '')![1]}`)).body;
});

after(async () => {
  transport?.close();
  await t?.close();
});

const PATHS = () => [`/inboxes/${inbox.id}/messages`, '/messages', `/inboxes/${inbox.id}/threads`, '/threads'];
const search = (path: string, q: string) => t.api('GET', `${path}?q=${encodeURIComponent(q)}`);
/** `n` distinct words of two letters and more: aa0, aa1, … */
const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}x`);

/** Asserts a 400 INVALID_QUERY whose message says `why`, on every list path. */
async function refused(q: string, why: string | RegExp) {
  for (const path of PATHS()) {
    const res = await search(path, q);
    expectError(res, 400, 'INVALID_QUERY');
    assert.match(res.body.error.message, typeof why === 'string' ? new RegExp(why.replace(/[.*+?^${}()|[\]\\`]/g, '\\$&')) : why, `${path} ${q.slice(0, 40)}`);
  }
}

describe('the terms of q', () => {
  test('at most search_terms (32) distinct terms: 500 one-letter words or 33 words are refused, on every list', async () => {
    await refused(Array.from({ length: 500 }, (_, i) => String.fromCharCode(97 + (i % 26))).join(' '), 'at least 2 characters');
    await refused(words(33).join(' '), 'at most 32 terms');
    await refused(`"${words(33).join(' ')}"`, 'at most 32 terms');
    await refused(words(33).join('-'), 'at most 32 terms');
    await refused(`${words(31).join(' ')} is:unread label:x1 has:attachment`, 'at most 32 terms');
    for (const path of PATHS()) assert.equal((await search(path, words(32).join(' '))).status, 200);
  });

  test('a repeated term counts once', async () => {
    const res = await search('/messages', Array(90).fill('quarterly').join(' '));
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.body.data.map((m: any) => m.id),
      [msg.id],
    );
    assert.equal((await search('/threads', `${Array(40).fill('report').join(' ')} ${Array(40).fill('-Annual').join(' ')} ${Array(40).fill('-annual').join(' ')}`)).status, 200);
  });

  test('a word prefix needs 2 characters; a quoted letter, or a short last word after others, matches whole', async () => {
    for (const q of ['a', 'x*', '-q', 'from:s', 'subject:"quarterly" r', 'filename:a']) await refused(q, 'at least 2 characters');
    const ids = async (q: string) => (await search('/messages', q)).body.data.map((m: any) => m.id);
    assert.deepEqual(await ids('"re"'), [msg.id]);
    assert.deepEqual(await ids('from:search-x'), [msg.id]);
    assert.deepEqual(await ids('qu'), [msg.id]);
  });

  test('every side of an OR counts towards search_terms; a side repeated counts once', async () => {
    await refused(words(33).join(' OR '), 'at most 32 terms');
    await refused(`${words(16).join(' OR ')} ${words(30).slice(16).join(' ')} w0x OR "w99x w98x"`, 'at most 32 terms');
    await refused(`from:aa OR ${words(31).join(' OR ')} is:read`, 'at most 32 terms');
    await refused(
      `label:a1 OR ${words(32)
        .map((w) => `label:${w}`)
        .join(' OR ')}`,
      'at most 32 terms',
    );
    for (const path of PATHS()) assert.equal((await search(path, words(32).join(' OR '))).status, 200);
    const ids = async (q: string) => (await search('/messages', q)).body.data.map((m: any) => m.id);
    assert.deepEqual(await ids(`${Array(20).fill('w1x OR quarterly').join(' ')} ${Array(20).fill('quarterly OR w1x').join(' ')} ${words(29).join(' OR ')} OR annual`), [msg.id]);
  });

  test('OR works; unknown operators are refused instead of finding nothing; `word:` then a space, and a lowercase or, are text', async () => {
    await refused('quarterly OR', 'a search term after `OR`');
    const withOr = await search('/messages', 'zzmissing OR annual');
    assert.equal(withOr.status, 200);
    assert.deepEqual(
      withOr.body.data.map((m: any) => m.id),
      [msg.id],
    );
    await refused('older_than:7d', /found `older_than:`/);
    await refused('Subject:quarterly newer:2024', /found `newer:`/);
    const ids = async (q: string) => (await search('/messages', q)).body.data.map((m: any) => m.id);
    assert.deepEqual(await ids('quarterly or annual'), [msg.id]);
    assert.deepEqual(await ids('re: numbers'), [msg.id]);
    assert.deepEqual(await ids('"older_than:7d"'), []);
  });

  test('search_terms is configurable', async () => {
    const small = await startTestServer({ limits: { search_terms: 2 } });
    try {
      expectError(await small.api('GET', `/messages?q=${encodeURIComponent('aa bb cc')}`), 400, 'INVALID_QUERY');
      assert.equal((await small.api('GET', `/messages?q=${encodeURIComponent('aa bb aa bb')}`)).status, 200);
    } finally {
      await small.close();
    }
  });
});

/** POSTs a JSON-RPC batch to /mcp (protocol 2025-03-26) and answers its responses by id. */
async function mcpBatch(calls: Array<{ name: string; arguments: unknown }>): Promise<any[]> {
  const res = await readResponse(
    await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-03-26' },
      body: JSON.stringify(calls.map((params, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params }))),
    }),
  );
  assert.equal(res.status, 200, res.text);
  // One answer per call: an SSE event each, or one JSON array.
  const events = [...res.text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]));
  const answers = (events.length ? events.flat() : JSON.parse(res.text)) as any[];
  return answers.sort((a, b) => a.id - b.id).map((a) => a.result);
}

describe('what the index takes of a body', () => {
  test('the first 262,144 characters of the body text are searchable and the rest is not; deleting the message takes it out', async () => {
    // Indexing a body of 24 MB of text held SQLite's single writer about 3 s per stored copy.
    const filler = 'filler '.repeat(40_000);
    assert.ok(filler.length > 262_144);
    const info = await transport.sendMail({ from: 'long@example.org', to: inbox.address, subject: 'a long body', text: `openingword ${filler} closingword` });
    const id = /stored as (msg_\w+)/.exec(info.response ?? '')![1];
    const found = async (q: string) => (await search(`/inboxes/${inbox.id}/messages`, q)).body.data.map((m: { id: string }) => m.id);
    assert.deepEqual(await found('openingword'), [id]);
    assert.deepEqual(await found('closingword'), []);
    assert.equal((await t.api('DELETE', `/messages/${id}`)).status, 204);
    assert.deepEqual(await found('openingword'), []);
    // The delete gave FTS5 exactly what was indexed (an external-content index is corrupt otherwise).
    if (TEST_ENGINE === 'sqlite') await sqlDb(t.server.ctx).run(sql`INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')`);
    assert.deepEqual(await found('quarterly'), [msg.id], 'the other message is still found');
  });
});

describe('MCP searches', () => {
  test('search_messages and search_threads refuse too many terms', async () => {
    for (const name of ['search_messages', 'search_threads']) {
      const [result] = await mcpBatch([{ name, arguments: { q: words(40).join(' ') } }]);
      assert.equal(result.isError, true);
      assert.equal(result.structuredContent.error.code, 'INVALID_QUERY');
    }
  });

  test('wait_for_message with q is held to the same term cap, before it waits', async () => {
    const [result] = await mcpBatch([{ name: 'wait_for_message', arguments: { inboxId: inbox.id, q: words(40).join(' '), timeout: 30 } }]);
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.error.code, 'INVALID_QUERY');
  });

  test('a batch of searches runs searches_per_account at once: the others answer RATE_LIMITED', async () => {
    const results = await mcpBatch(Array.from({ length: 20 }, (_, i) => ({ name: i % 2 ? 'search_threads' : 'search_messages', arguments: { q: 'quarterly' } })));
    const codes = results.map((r) => (r.isError ? r.structuredContent.error.code : 'ok'));
    assert.ok(codes.includes('ok'), codes.join());
    assert.ok(codes.includes('RATE_LIMITED'), codes.join());
    assert.deepEqual(new Set(codes), new Set(['ok', 'RATE_LIMITED']));
    // The account's next search finds its slot free again.
    assert.equal((await search('/messages', 'quarterly')).status, 200);
  });
});

/** Deterministic words of 2 to 8 letters: many distinct ones, so two-letter prefixes expand to many. */
function text(seed: number, n: number): string {
  let x = seed;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let w = '';
    const len = 2 + (i % 7);
    for (let j = 0; j < len; j++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      w += String.fromCharCode(97 + (x % 26));
    }
    out.push(w);
  }
  return out.join(' ');
}

describe('the time budget', () => {
  let slow: TestServer;
  let slowTransport: Transporter;

  before(async () => {
    slow = await startTestServer({ limits: { search_timeout: '1ms' } });
    slowTransport = smtpTransport(slow.server.smtpPort);
    const box = (await slow.api('POST', '/inboxes', { address: 'corpus' })).body;
    for (let i = 0; i < 20; i++) await slowTransport.sendMail({ from: 'corpus@example.org', to: box.address, subject: `corpus ${i}`, text: text(i + 1, 4000) });
  });

  after(async () => {
    slowTransport?.close();
    await slow?.close();
  });

  test('a search past search_timeout answers 503 SEARCH_TIMEOUT with Retry-After, and the server keeps serving', async () => {
    // 32 two-letter prefixes, each expanding to hundreds of words of the index.
    const letters = 'abcdefghijklmnopqrstuvwxyz';
    const q = Array.from({ length: 32 }, (_, i) => letters[i % 26] + letters[(i * 7 + 3) % 26]).join(' ');
    for (const path of ['/messages', '/threads']) {
      const res = await slow.api('GET', `${path}?q=${encodeURIComponent(q)}`);
      expectError(res, 503, 'SEARCH_TIMEOUT');
      assert.equal(res.headers.get('retry-after'), '1');
      assert.match(res.body.error.message, /time budget/);
    }
    assert.equal((await slow.api('GET', '/inboxes')).status, 200);
    // On PostgreSQL statement_timeout ends the statement on the server: nothing is left to wait
    // for (and a warm cache can answer the repeated query inside 1 ms, so its outcome is not
    // asserted; the lock test below makes the PostgreSQL budget deterministic).
    if (TEST_ENGINE === 'postgres') return;
    // On SQLite an abandoned statement still counts for its account until its thread has ended
    // (429 meanwhile); then the account searches again, and is refused for time only.
    await until('the abandoned searches to end', async () => {
      const res = await slow.api('GET', `/messages?q=${encodeURIComponent(q)}`);
      if (res.status === 429) return undefined;
      expectError(res, 503, 'SEARCH_TIMEOUT');
      return true;
    });
  });
});

onEngine('postgres').describe('the time budget on PostgreSQL', () => {
  test('statement_timeout cancels a search that waits (here on a lock): 503 SEARCH_TIMEOUT, the connection goes back to the pool', async () => {
    const s = await startTestServer({ limits: { search_timeout: '300ms' } });
    const locker = new pg.Client({ connectionString: s.config.database.url });
    try {
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE messages IN ACCESS EXCLUSIVE MODE');
      for (const path of ['/messages', '/threads']) {
        const res = await s.api('GET', `${path}?q=hello`);
        expectError(res, 503, 'SEARCH_TIMEOUT');
        assert.equal(res.headers.get('retry-after'), '1');
      }
      await locker.query('ROLLBACK');
      assert.equal((await s.api('GET', '/messages?q=hello')).status, 200);
    } finally {
      await locker.end();
      await s.close();
    }
  });

  test("one account's stuck searches hold searches_per_account pool connections, not the pool: another account is served", async () => {
    const s = await startTestServer({ limits: { search_timeout: '60s' } });
    const other = await s.newAccount('other');
    const locker = new pg.Client({ connectionString: s.config.database.url });
    try {
      await locker.connect();
      await locker.query('BEGIN');
      // Every search of the first account waits on the lock (as a costly statement would run).
      await locker.query('LOCK TABLE messages IN ACCESS EXCLUSIVE MODE');
      const stuck = Array.from({ length: 12 }, (_, i) => s.api('GET', `/${i % 2 ? 'threads' : 'messages'}?q=hello`));
      const settled: number[] = [];
      for (const p of stuck) void p.then((r) => settled.push(r.status));
      // The account's searches past its bound are refused at once; the first two wait.
      await until('the searches over the bound to be refused', () => (settled.length >= 10 ? true : undefined), 30_000);
      assert.deepEqual(settled, Array(10).fill(429));
      // The pool (10 connections) still serves another account while two searches wait.
      assert.equal((await s.api('GET', '/inboxes', undefined, { key: other.key })).status, 200);
      assert.equal(settled.length, 10);
      await locker.query('ROLLBACK');
      assert.deepEqual((await Promise.all(stuck)).map((r) => r.status).sort(), [...Array(2).fill(200), ...Array(10).fill(429)]);
    } finally {
      await locker.end();
      await s.close();
    }
  });
});
