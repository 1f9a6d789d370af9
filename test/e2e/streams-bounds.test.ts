// What an account may hold open, and what that costs everybody else (issue 27, PRODUCT.md
// "Bounded cost"): event streams, long-polls (`wait`) and MCP wait_for_message calls share
// `[limits] streams_per_account` (429 TOO_MANY_STREAMS past it, a slot back whenever one ends);
// an event wakes only its own account's waiters; the long-poll with `q` does not search again
// until something was recorded for its inbox; a revoked key's streams, long-polls and waits end
// within seconds (revoked through the API, through the CLI, and on another node of one
// PostgreSQL); streams that never read, plus a large mail, leave the server's memory bounded.
import { searchReaderOf } from '../../src/store/search-reader.ts';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { get as httpGet, type ClientRequest, type IncomingMessage } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AppContext } from '../../src/context.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { FEED_SETTINGS } from '../../src/domain/events/event-feed.ts';
import { openStreamCount } from '../../src/domain/events/stream-slots.ts';
import { executorOf } from '../../src/store/store.ts';
import type { SqliteStore } from '../../src/store/sqlite.ts';
import { startChild, stopChild, prepareInstance } from '../support/child-server.ts';
import { runCli } from '../support/cli.ts';
import { emitEvent } from '../support/events.ts';
import { peerSkip } from '../support/peers.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { deliverMail } from '../support/mail.ts';
import { expectError, onEngine, readResponse, startTestServer, type TestServer } from '../support/server.ts';
import { openStream, type Stream } from '../support/sse.ts';
import { until } from '../support/wait.ts';

const LIMIT = 3;

async function mcpClient(t: TestServer, key: string): Promise<Client> {
  const client = new Client({ name: 'streams-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

/** A wait_for_message call, settled with the tool's answer (or its error) whenever it ends. */
function waitForMessage(client: Client, args: Record<string, unknown>): Promise<CallToolResult> {
  return client.callTool({ name: 'wait_for_message', arguments: args }, undefined, { timeout: 120_000 }) as Promise<CallToolResult>;
}

const toolError = (res: CallToolResult) => (res.isError ? (res.structuredContent as { error: { code: string } }).error.code : undefined);

/** A long-poll left running: its answer once it ends, and a way to leave early. */
function longPoll(t: TestServer, inboxId: string, query: string, key: string): { done: Promise<{ status: number; body: any }>; abort(): void } {
  const ac = new AbortController();
  const done = fetch(`${t.url}/inboxes/${inboxId}/messages?${query}`, { headers: { authorization: `Bearer ${key}` }, signal: ac.signal })
    .then(readResponse)
    .catch(() => ({ status: 0, body: undefined }));
  return { done, abort: () => ac.abort() };
}

/**
 * Counts the statements the server runs from now on that `matches` (both engines: SQLite's
 * prepared statements and raw statements), to see whose waiters an event woke.
 */
function countStatements(ctx: AppContext, matches: (source: string, params: unknown[]) => boolean): { count(): number; stop(): void } {
  let n = 0;
  const executor = executorOf(ctx.db);
  const exec = executor.exec;
  executor.exec = (source, params, method) => {
    if (matches(source, params)) n++;
    return exec.call(executor, source, params, method);
  };
  let undo = () => {};
  if (ctx.store.dialect === 'sqlite') {
    const client = (ctx.store as SqliteStore).client;
    const prepare = client.prepare;
    client.prepare = ((source: string) => {
      if (matches(source, [])) n++;
      return prepare.call(client, source);
    }) as typeof prepare;
    undo = () => (client.prepare = prepare);
  }
  return {
    count: () => n,
    stop: () => {
      executor.exec = exec;
      undo();
    },
  };
}

describe('streams per account', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ limits: { requests_per_minute: 100_000, streams_per_account: LIMIT } });
  });
  after(async () => t?.close());

  test(`streams, long-polls and wait_for_message share ${LIMIT} slots per account; the next gets 429 TOO_MANY_STREAMS; a slot comes back when one ends`, async () => {
    const acc = await t.newAccount('greedy');
    const inbox = (await t.api('POST', '/inboxes', {}, { key: acc.key })).body;
    const mcp = await mcpClient(t, acc.key);
    try {
      const stream = await openStream(t, '', { key: acc.key });
      assert.equal(stream.status, 200);
      const poll = longPoll(t, inbox.id, 'wait=60', acc.key);
      const waiting = waitForMessage(mcp, { inboxId: inbox.id, timeout: 60 });
      // All three hold their slot (the fourth of any kind is refused).
      await until('the three to wait', () => (openStreamCount(t.server.ctx, acc.accountId) === LIMIT ? true : undefined));
      expectError(await t.api('GET', '/events/stream', undefined, { key: acc.key }), 429, 'TOO_MANY_STREAMS');
      expectError(await t.api('GET', `/inboxes/${inbox.id}/messages?wait=5`, undefined, { key: acc.key }), 429, 'TOO_MANY_STREAMS');
      assert.equal(toolError(await waitForMessage(mcp, { inboxId: inbox.id, timeout: 5 })), 'TOO_MANY_STREAMS');
      // A list that does not wait is not a stream; another account has its own slots.
      assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages`, undefined, { key: acc.key })).status, 200);
      const other = await openStream(t, '');
      assert.equal(other.status, 200);
      other.close();

      // The client leaving gives the slot back: a stream, then a long-poll.
      stream.close();
      await until('the slot of the stream that left', () => (openStreamCount(t.server.ctx, acc.accountId) === LIMIT - 1 ? true : undefined));
      const again = await openStream(t, '', { key: acc.key });
      assert.equal(again.status, 200);
      poll.abort();
      await until('the slot of the long-poll that left', () => (openStreamCount(t.server.ctx, acc.accountId) === LIMIT - 1 ? true : undefined));
      // A long-poll that times out gives its slot back too (twice in a row: the first returned it).
      for (let i = 0; i < 2; i++) {
        const r = await t.api('GET', `/inboxes/${inbox.id}/messages?wait=1`, undefined, { key: acc.key });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.data.length, 0);
      }
      // A wait_for_message that ends (here: a message came) gives its slot back.
      await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'wake', text: 'x' });
      assert.equal(toolError(await waiting), undefined);
      assert.equal(openStreamCount(t.server.ctx, acc.accountId), 1);
      // An error (an unknown inbox) holds no slot either.
      assert.equal(toolError(await waitForMessage(mcp, { inboxId: 'inb_nope', timeout: 5 })), 'INBOX_NOT_FOUND');
      expectError(await t.api('GET', `/inboxes/inb_nope/messages?wait=5`, undefined, { key: acc.key }), 404, 'INBOX_NOT_FOUND');
      assert.equal(openStreamCount(t.server.ctx, acc.accountId), 1);
      again.close();
      await until('every slot back', () => (openStreamCount(t.server.ctx, acc.accountId) === 0 ? true : undefined));
    } finally {
      await mcp.close();
    }
  });
});

describe('wake-ups', () => {
  let t: TestServer;
  const savedPoll = FEED_SETTINGS.pollMs;
  before(async () => {
    // No timer may wake anyone during these tests: only events do.
    FEED_SETTINGS.pollMs = 600_000;
    t = await startTestServer({ limits: { requests_per_minute: 100_000 } });
  });
  after(async () => {
    FEED_SETTINGS.pollMs = savedPoll;
    await t?.close();
  });

  test("another account's events wake none of this account's streams, long-polls or wait_for_message calls", async () => {
    const idle = await t.newAccount('idle');
    const busy = await t.newAccount('busy');
    const idleInbox = (await t.api('POST', '/inboxes', {}, { key: idle.key })).body;
    const busyInbox = (await t.api('POST', '/inboxes', {}, { key: busy.key })).body;
    const mcp = await mcpClient(t, idle.key);
    const streams: Stream[] = [];
    const polls: Array<ReturnType<typeof longPoll>> = [];
    try {
      for (let i = 0; i < 3; i++) streams.push(await openStream(t, '', { key: idle.key }));
      for (let i = 0; i < 3; i++) streams.push(await openStream(t, `?inboxId=${idleInbox.id}`, { key: idle.key }));
      for (let i = 0; i < 3; i++) polls.push(longPoll(t, idleInbox.id, 'wait=60&q=hello', idle.key));
      const waits = [0, 1, 2].map(() => waitForMessage(mcp, { inboxId: idleInbox.id, timeout: 60 }));
      // From here on, anything that reads events, or names the idle account or its inbox, is
      // one of the idle waiters at work (the busy account has no stream, no webhook).
      // (Open streams re-reading their keys every few seconds is not a wake-up; the hourly sweep
      // deleting old events is not a read.)
      const idleReads = countStatements(
        t.server.ctx,
        (source, params) => !source.includes('api_keys') && (params.includes(idle.accountId) || params.includes(idleInbox.id) || /^\s*select\b[\s\S]*\bfrom "?events"?\b/i.test(source)),
      );
      // Each waiter reads once as it starts: wait until they all sit still.
      let last = -1;
      await until('the idle waiters to settle', async () => {
        const n = idleReads.count();
        if (n === last) return true;
        last = n;
        await new Promise((r) => setTimeout(r, 300));
        return undefined;
      });
      const before = idleReads.count();
      for (let i = 0; i < 5; i++) await emitEvent(t.server.ctx, busy.accountId, 'message.received', { id: `msg_busy${i}`, inboxId: busyInbox.id });
      await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: busyInbox.address, subject: 'hello', text: 'hello' });
      // The wake-ups of those commits ran before this request is answered.
      await until('the busy message', async () => ((await t.api('GET', `/inboxes/${busyInbox.id}/messages?status=received`, undefined, { key: busy.key })).body.total > 0 ? true : undefined));
      const woken = idleReads.count() - before;
      idleReads.stop();
      assert.equal(woken, 0, `the idle account's waiters ran ${woken} statements for another account's events`);
      for (const s of streams) assert.equal(s.frames.length, 0);
      for (const p of polls) p.abort();
      await mcp.close();
      await Promise.allSettled(waits);
    } finally {
      for (const s of streams) s.close();
    }
  });

  test('the long-poll with q searches once, then again only when something was recorded for its inbox', async () => {
    FEED_SETTINGS.pollMs = 50;
    const acc = await t.newAccount('searcher');
    const inbox = (await t.api('POST', '/inboxes', {}, { key: acc.key })).body;
    // Searches run through the search reader (a worker thread on SQLite, src/store/search-reader.ts): count its runs.
    const reader = searchReaderOf(t.server.ctx.store, t.server.ctx.config.limits.concurrent_searches);
    const run = reader.run;
    let runs = 0;
    reader.run = ((...args: Parameters<typeof run>) => (runs++, run.apply(reader, args))) as typeof run;
    const searches = { count: () => runs, stop: () => void (reader.run = run) };
    try {
      const poll = longPoll(t, inbox.id, 'wait=60&q=needle', acc.key);
      await until('the first search', () => (searches.count() > 0 ? true : undefined));
      const first = searches.count();
      // Twenty ticks of the feed (50 ms each) pass: watched through another account's requests.
      const ticks = Date.now() + 20 * FEED_SETTINGS.pollMs;
      await until('twenty feed ticks', async () => (Date.now() >= ticks ? true : (await t.api('GET', '/inboxes'), undefined)));
      assert.equal(searches.count(), first, 'no new message: no new search');
      // A message that does not match: searched again, still waiting; one that matches: answered.
      await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'hay', text: 'hay' });
      await until('a search after the message', () => (searches.count() > first ? true : undefined));
      await deliverMail(t.server.smtpPort, { from: 'a@example.org', to: inbox.address, subject: 'needle', text: 'the needle' });
      const answer = await poll.done;
      assert.equal(answer.status, 200);
      assert.deepEqual(
        answer.body.data.map((m: any) => m.subject),
        ['needle'],
      );
    } finally {
      searches.stop();
      FEED_SETTINGS.pollMs = 600_000;
    }
  });
});

describe('revoked keys', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ limits: { requests_per_minute: 100_000 } });
  });
  after(async () => t?.close());

  /**
   * Opens a stream, a long-poll and a wait_for_message with a new key, revokes the key with
   * `revoke`, and checks that all three end (PRODUCT.md: within 5 s; the deadline here is looser,
   * for a loaded machine) and that the stream got no event recorded after the revocation.
   */
  async function revokedEndsAll(revoke: (keyId: string) => Promise<void>): Promise<void> {
    const made = await createApiKey(t.server.ctx, t.accountId, { name: 'to revoke' });
    const inbox = (await t.api('POST', '/inboxes', {})).body;
    const mcp = await mcpClient(t, made.key);
    try {
      const stream = await openStream(t, '', { key: made.key });
      assert.equal(stream.status, 200);
      const poll = longPoll(t, inbox.id, 'wait=60', made.key);
      const waiting = waitForMessage(mcp, { inboxId: inbox.id, timeout: 60 });
      waiting.catch(() => undefined); // settled below; closing the client rejects it otherwise
      await emitEvent(t.server.ctx, t.accountId, 'domain.verified', { id: 'dom_before' });
      await stream.waitFrames(1);
      await revoke(made.id);
      let ended = false;
      void stream.ended.then(() => (ended = true));
      await until('the stream to end', () => (ended ? true : undefined), 15_000);
      const answer = await Promise.race([poll.done, new Promise<undefined>((r) => setTimeout(r, 15_000))]);
      assert.ok(answer, 'the long-poll ended');
      assert.equal(answer.status, 401);
      assert.equal(answer.body.error.code, 'UNAUTHORIZED');
      const waited = await Promise.race([waiting, new Promise<undefined>((r) => setTimeout(r, 15_000))]);
      assert.ok(waited, 'wait_for_message ended');
      assert.equal(toolError(waited), 'UNAUTHORIZED');
      await emitEvent(t.server.ctx, t.accountId, 'domain.verified', { id: 'dom_after' });
      assert.deepEqual(
        stream.frames.map((f) => f.data.data.id),
        ['dom_before'],
      );
      expectError(await t.api('GET', '/events/stream', undefined, { key: made.key }), 401, 'UNAUTHORIZED');
    } finally {
      await mcp.close();
    }
  }

  test('a key revoked through the API: its stream, long-poll and wait_for_message end within seconds', async () => {
    await revokedEndsAll(async (id) => {
      assert.equal((await t.api('DELETE', `/account/api-keys/${id}`)).status, 204);
    });
  });

  test('a key revoked by the CLI (another process): its stream, long-poll and wait_for_message end within seconds', async () => {
    const config = join(t.config.data_dir, 'cli.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(t.config.data_dir)}\nshared_domain = "agents.test"\n`);
    await revokedEndsAll(async (id) => {
      const r = await runCli(['keys', 'revoke', id, '--config', config]);
      assert.equal(r.code, 0, r.stderr);
    });
  });
});

// The server runs as a child process on SQLite: the bound is in the stream, not the engine.
onEngine('sqlite').describe('memory', () => {
  test("twenty streams that never read and a 14 MB mail: the server's RSS stays bounded", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-streams-rss-'));
    const inst = await prepareInstance(dir, '[limits]\nrequests_per_minute = 100000\n');
    const server = await startChild(inst);
    const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.child.pid}/status`, 'utf8'))![1]) * 1024;
    const requests: ClientRequest[] = [];
    try {
      const api = async (method: string, path: string, body?: unknown) =>
        readResponse(
          await fetch(inst.httpUrl + path, {
            method,
            headers: { authorization: `Bearer ${inst.key}`, 'content-type': 'application/json' },
            body: body === undefined ? undefined : JSON.stringify(body),
          }),
        );
      const inbox = (await api('POST', '/inboxes', {})).body;
      // Twenty real clients that open the stream and then read nothing.
      for (let i = 0; i < 20; i++) {
        await new Promise<void>((resolve, reject) => {
          const req = httpGet(`${inst.httpUrl}/events/stream`, { headers: { authorization: `Bearer ${inst.key}` } }, (res: IncomingMessage) => {
            res.pause();
            resolve();
          });
          req.on('error', reject);
          requests.push(req);
        });
      }
      const baseline = rss();
      let peak = baseline;
      const sampler = setInterval(() => (peak = Math.max(peak, rss())), 20);
      try {
        const text = 'All work and no play makes Jack a dull boy. '.repeat(160_000); // 7 MB
        await deliverMail(inst.smtpPort, { from: 'big@example.org', to: inbox.address, subject: 'large', text, html: `<p>${text}</p>` });
        await until('the message.received event', async () => (await api('GET', `/events?types=message.received&limit=1`)).body.data[0]);
        // Every stream has read the event and written what it could (the log says nothing per
        // frame: wait until the server's memory stops changing).
        let last = 0;
        await until(
          'the server to settle',
          async () => {
            const now = rss();
            const settled = Math.abs(now - last) < 1 << 20;
            last = now;
            await new Promise((r) => setTimeout(r, 500));
            return settled ? true : undefined;
          },
          30_000,
        );
      } finally {
        clearInterval(sampler);
      }
      const grew = peak - baseline;
      assert.ok(grew < 300 * 1024 * 1024, `RSS grew by ${Math.round(grew / 1048576)} MB (from ${Math.round(baseline / 1048576)} MB)`);
      // What an event list carries of the mail: the bodies cut, flagged.
      const [event] = (await api('GET', `/events?types=message.received&limit=1`)).body.data;
      assert.equal(event.data.bodyTruncated, true);
      assert.ok(Buffer.byteLength(event.data.bodyText) <= 65_536);
    } finally {
      for (const r of requests) r.destroy();
      await stopChild(server, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

onEngine('postgres').describe('revoked keys across nodes', { skip: peerSkip(postgresMissing()) }, () => {
  let a: TestServer;
  let b: TestServer;
  before(async () => {
    const url = await (await pgCluster()).createDatabase();
    a = await startTestServer({ database: { url }, limits: { requests_per_minute: 100_000 } });
    b = await startTestServer({ database: { url }, limits: { requests_per_minute: 100_000 } });
  });
  after(async () => {
    await a?.close();
    await b?.close();
  });

  test('a key revoked on node A ends its stream and long-poll open on node B', async () => {
    const made = await createApiKey(a.server.ctx, a.accountId, { name: 'to revoke elsewhere' });
    const inbox = (await a.api('POST', '/inboxes', {})).body;
    const stream = await openStream({ url: b.url, key: made.key }, '');
    assert.equal(stream.status, 200);
    let ended = false;
    void stream.ended.then(() => (ended = true));
    const poll = longPoll(b, inbox.id, 'wait=60', made.key);
    await until('the long-poll to wait on node B', () => (openStreamCount(b.server.ctx, a.accountId) === 2 ? true : undefined));
    assert.equal((await a.api('DELETE', `/account/api-keys/${made.id}`)).status, 204);
    await until('the stream on node B to end', () => (ended ? true : undefined), 15_000);
    const answer = await poll.done;
    assert.equal(answer.status, 401);
    assert.equal(answer.body.error.code, 'UNAUTHORIZED');
    stream.close();
  });
});
