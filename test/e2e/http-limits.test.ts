// Slow or vanishing HTTP clients cannot hold the server: headers and the whole request must
// arrive within http.headers_timeout / http.request_timeout (408, then the connection closes),
// connections beyond http.max_connections are closed at once, and a client that drops mid-body
// is logged as an ordinary closed connection, not as an error with a stack trace. No test
// times anything (under load timing proves nothing): each timeout is the only thing that could
// have closed its connection, as the other limits of that server are far away.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { createLogger } from '../../src/log.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

let t: TestServer;
const logLines: Array<Record<string, unknown>> = [];

before(async () => {
  // Timeouts far longer than any test here: only max_connections closes a connection early.
  t = await startTestServer({ http: { headers_timeout: '30s', request_timeout: '60s', max_connections: 4 } }, { log: createLogger((line) => void logLines.push(JSON.parse(line))) });
});
after(async () => {
  await t?.close();
});

/** A raw connection to the API of `server`: what it received, and whether it closed. */
async function rawClient(server: TestServer = t): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let text = '';
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (text += d));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return { socket, received: () => text, closed };
}

/** Writes `text` one byte at a time, `everyMs` apart, until the socket closes; answers the bytes written. */
async function drip(socket: Socket, text: string, everyMs: number): Promise<number> {
  let sent = 0;
  for (const ch of text) {
    if (socket.destroyed || !socket.writable) break;
    socket.write(ch);
    sent++;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return sent;
}

/** A server of its own with these HTTP timeouts, for one test. */
async function withTimeouts(http: { headers_timeout: string; request_timeout: string }, fn: (server: TestServer) => Promise<void>): Promise<void> {
  const server = await startTestServer({ http });
  try {
    await fn(server);
  } finally {
    await server.close();
  }
}

describe('HTTP limits', () => {
  test('a body dripped one byte at a time gets 408 and is closed by http.request_timeout', async () => {
    // The headers arrive at once, and the 50 s drip outlasts request_timeout (2 s) only.
    await withTimeouts({ headers_timeout: '1s', request_timeout: '2s' }, async (server) => {
      const c = await rawClient(server);
      c.socket.write(`POST /inboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.key}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n`);
      const body = '{"displayName":"' + 'x'.repeat(180) + '"}';
      const sent = drip(c.socket, body, 250);
      await c.closed;
      assert.match(c.received(), /^HTTP\/1\.1 408 /);
      assert.ok((await sent) < body.length, 'closed by the server before the body was complete');
      assert.equal((await server.api('GET', '/inboxes')).body.total, 0, 'nothing was created');
    });
  });

  test('headers dripped one byte at a time get 408 and are closed by http.headers_timeout', async () => {
    // The whole request would arrive within request_timeout (60 s): only headers_timeout can end it.
    await withTimeouts({ headers_timeout: '1s', request_timeout: '60s' }, async (server) => {
      const c = await rawClient(server);
      const head = `GET /inboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.key}\r\nX-Slow: ${'y'.repeat(100)}\r\n\r\n`;
      const sent = drip(c.socket, head, 250);
      await c.closed;
      assert.match(c.received(), /^HTTP\/1\.1 408 /);
      assert.ok((await sent) < head.length, 'closed by the server before the headers were complete');
    });
  });

  test('connections beyond http.max_connections are closed at once; the open ones keep working', async () => {
    const held = await Promise.all([1, 2, 3, 4].map(() => rawClient()));
    const extra = await rawClient();
    await extra.closed;
    assert.equal(extra.received(), '', 'closed without an answer');
    // Nothing else closes a connection on this server within 30 s: the held ones are all open.
    assert.ok(
      held.every((c) => !c.socket.destroyed && c.received() === ''),
      'the held connections are open and unanswered',
    );
    held[0].socket.write(`GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    await held[0].closed;
    assert.match(held[0].received(), /^HTTP\/1\.1 200 /);
    for (const c of held.slice(1)) c.socket.destroy();
    await Promise.all(held.map((c) => c.closed));
  });

  test('a client that drops mid-body is logged as a closed connection, not an error', async () => {
    const c = await rawClient();
    // Expect: 100-continue makes the server say when it has taken the request (no sleep to guess it).
    c.socket.write(`POST /inboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n`);
    await until('100 Continue', () => (c.received().startsWith('HTTP/1.1 100 Continue\r\n') ? true : undefined));
    c.socket.write('{"displayName":"');
    c.socket.destroy();
    await c.closed;
    const line = await until('the closed connection logged', () => logLines.find((l) => l.msg === 'client closed the connection' && l.path === '/inboxes'));
    assert.equal(line.level, 'info');
    assert.equal(line.received, 'part');
    assert.deepEqual(
      logLines.filter((l) => l.level === 'error'),
      [],
      'no error logged',
    );
  });
});
