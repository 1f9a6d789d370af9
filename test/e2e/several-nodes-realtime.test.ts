// Realtime, MCP and SMTP submission on two nodes sharing one PostgreSQL (issue 20: "all work on
// several nodes ... events across nodes via LISTEN/NOTIFY"). Two real servers in this process,
// like test/e2e/several-nodes.test.ts: an event stream open on node B gets the mail node A
// accepted over SMTP and resumes on node A with exactly what it missed; MCP's wait_for_message
// on node B returns mail delivered at node A, and its reply reaches the capturing MX once;
// submission on node B queues sends that the MX receives once, DKIM-signed, whichever node's
// runner sends them. Last, an event committed while an older transaction is still open (so not
// yet readable in commit order) still reaches the stream once that transaction ends.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import pg from 'pg';
import { deliverMail } from '../support/mail.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { onEngine, startTestServer, type TestServer } from '../support/server.ts';
import { openStream, type Stream } from '../support/sse.ts';
import { until } from '../support/wait.ts';
import { peerSkip } from '../support/peers.ts';

// PostgreSQL pass only: nodes share a database only there (build/test.sh leaves this file out of
// the SQLite pass; run on SQLite, it declares nothing: onEngine).
const skip = peerSkip(postgresMissing());

onEngine('postgres').describe('realtime, MCP and submission on two nodes of one PostgreSQL', { skip }, () => {
  let url: string;
  let a: TestServer;
  let b: TestServer;
  let mx: TestMx;
  const streams: Stream[] = [];
  const clients: Client[] = [];

  before(async () => {
    url = await (await pgCluster()).createDatabase();
    mx = await startTestMx();
    // The same configuration on both nodes, as an operator deploys them; submission on loopback
    // (AUTH without TLS is allowed there).
    const node = {
      database: { url },
      submission: { listen: '127.0.0.1:0' },
      outbound: { mode: 'email', relay: `smtp://127.0.0.1:${mx.port}`, relay_verify_tls: false, retry_schedule: ['200ms'] },
      limits: { requests_per_minute: 100_000 },
    };
    a = await startTestServer(node);
    b = await startTestServer(node);
  });

  after(async () => {
    for (const s of streams) s.close();
    for (const c of clients) await c.close().catch(() => undefined);
    await a?.close();
    await b?.close();
    await mx?.close();
  });

  /** A stream of `node` with node A's key (keys are in the shared database), open once the server said so. */
  async function stream(node: TestServer, query: string, headers: Record<string, string> = {}): Promise<Stream> {
    const s = await openStream({ url: node.url, key: a.key }, query, { headers });
    streams.push(s);
    assert.equal(s.status, 200);
    await until('stream open', () => (s.comments.includes('connected') ? true : undefined));
    return s;
  }

  const mail = (node: TestServer, to: string, subject: string) => deliverMail(node.server.smtpPort, { from: 'Alice <alice@remote.test>', to, subject, text: `${subject}, body` });

  /** Waits until the MX captured a message with this subject, then a little longer, and answers how many it holds. */
  async function capturedOnce(subject: string): Promise<Buffer> {
    const withSubject = () => mx.messages.filter((m) => m.raw.toString('latin1').includes(`\r\nSubject: ${subject}\r\n`));
    await until(`the MX received "${subject}"`, () => (withSubject().length ? true : undefined), 15_000);
    // Both runners are awake; give a second delivery every chance to happen.
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(withSubject().length, 1, `"${subject}" delivered ${withSubject().length} times`);
    return withSubject()[0]!.raw;
  }

  test('a stream on node B gets mail accepted at node A; resumed on node A with Last-Event-ID it gets exactly what it missed', async () => {
    const inbox = (await a.api('POST', '/inboxes', { address: 'live' })).body;
    const query = `?types=message.received&inboxId=${inbox.id}`;
    const onB = await stream(b, query);
    const first = await mail(a, inbox.address, 'seen live on B');
    const [frame] = await onB.waitFrames(1);
    assert.equal(frame.event, 'message.received');
    assert.equal(frame.data.data.id, first);
    assert.equal(frame.data.data.subject, 'seen live on B');

    // Disconnected, the client misses mail through both nodes, then reconnects to the other node.
    onB.close();
    await onB.ended;
    const missed = [await mail(a, inbox.address, 'missed 1'), await mail(b, inbox.address, 'missed 2'), await mail(a, inbox.address, 'missed 3')];
    const onA = await stream(a, query, { 'Last-Event-ID': frame.id! });
    assert.deepEqual(
      (await onA.waitFrames(3)).map((f) => f.data.data.id),
      missed,
    );
    const live = await mail(b, inbox.address, 'live again');
    assert.deepEqual(
      (await onA.waitFrames(4)).map((f) => f.data.data.id),
      [...missed, live],
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(onA.frames.length, 4, 'nothing repeated');
    assert.equal(new Set(onA.frames.map((f) => f.id)).size, 4);
  });

  test('MCP wait_for_message on node B returns mail delivered at node A; the reply reaches the MX once, threaded', async () => {
    const client = new Client({ name: 'several-nodes', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${b.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${a.key}` } } }));
    clients.push(client);
    const call = async (name: string, args: Record<string, unknown>) => {
      const res = (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as CallToolResult;
      assert.ok(!res.isError, `${name} failed: ${JSON.stringify(res.content)}`);
      return res.structuredContent as any;
    };
    const inbox = await call('create_inbox', { address: 'mcp-agent' });
    const waiting = call('wait_for_message', { inboxId: inbox.id, timeout: 30 });
    // The wait takes the inbox's newest message when the call arrives as its starting point.
    await new Promise((r) => setTimeout(r, 1000));
    const sent = await mail(a, inbox.address, 'question through A');
    const arrived = await waiting;
    assert.equal(arrived.id, sent);
    assert.equal(arrived.subject, 'question through A');

    const reply = await call('reply_to_message', { messageId: arrived.id, bodyText: 'answered through B' });
    assert.equal(reply.threadId, arrived.threadId);
    const parsed = await simpleParser(await capturedOnce('Re: question through A'));
    assert.equal(parsed.inReplyTo, arrived.messageIdHeader);
    assert.deepEqual(parsed.to && !Array.isArray(parsed.to) ? parsed.to.value.map((v) => v.address) : [], ['alice@remote.test']);
    await until('the reply is sent', async () => ((await a.api('GET', `/messages/${reply.id}`)).body.status === 'sent' ? true : undefined), 15_000);
  });

  test('submission on node B: each message is delivered once, DKIM-signed, whichever node runs its job', async () => {
    const inbox = (await b.api('POST', '/inboxes', { address: 'submitter' }, { key: a.key })).body;
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: b.server.submissionPort, secure: false, ignoreTLS: true, auth: { user: inbox.address, pass: a.key } });
    const ids: string[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const info = await transport.sendMail({ from: inbox.address, to: `bob${i}@remote.test`, subject: `submitted ${i}`, text: 'through B' });
        const id = /queued as (msg_\S+)/.exec(info.response ?? '')?.[1];
        assert.ok(id, info.response);
        ids.push(id);
      }
    } finally {
      transport.close();
    }
    for (const [i, id] of ids.entries()) {
      const raw = await capturedOnce(`submitted ${i}`);
      assert.match(raw.toString('latin1'), /^DKIM-Signature: /m);
      const m = await until(`message ${id} sent`, async () => {
        const res = await a.api('GET', `/messages/${id}`);
        return res.body.status === 'sent' ? res.body : undefined;
      });
      assert.equal(m.direction, 'outbound');
      assert.equal(m.inboxId, inbox.id);
    }
  });

  test('an event committed while an older transaction is open reaches the stream once that transaction ends', async () => {
    const inbox = (await a.api('POST', '/inboxes', { address: 'held-back' })).body;
    const s = await stream(b, `?types=message.received&inboxId=${inbox.id}`);
    // A writing transaction that began before the message's: events are read in commit order,
    // so the message's event is not readable until this one ends (migrations/pg 0006).
    const older = new pg.Client({ connectionString: url });
    await older.connect();
    try {
      await older.query('BEGIN');
      await older.query('SELECT pg_current_xact_id()');
      const id = await mail(a, inbox.address, 'behind an open transaction');
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(s.frames.length, 0, 'not readable while the older transaction is open');
      // It ends without recording an event of its own: nothing else wakes the stream.
      await older.query('COMMIT');
      assert.deepEqual(
        (await s.waitFrames(1)).map((f) => f.data.data.id),
        [id],
      );
    } finally {
      await older.end();
    }
  });
});
