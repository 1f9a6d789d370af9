// Slow or vanishing HTTP clients cannot hold the server: headers and the whole request must
// arrive within http.headers_timeout / http.request_timeout (408, then the connection closes),
// connections beyond http.max_connections are closed at once, and a client that drops mid-body
// is logged as an ordinary closed connection, not as an error with a stack trace.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { createLogger } from '../../src/log.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
const logLines: Array<Record<string, unknown>> = [];

before(async () => {
  t = await startTestServer(
    { http: { headers_timeout: '1s', request_timeout: '2s', max_connections: 4 } },
    { log: createLogger((line) => void logLines.push(JSON.parse(line))) },
  );
});
after(async () => {
  await t?.close();
});

/** A raw connection to the API: what it received, and when it closed. */
async function rawClient(): Promise<{ socket: Socket; received: () => string; closed: Promise<number> }> {
  const socket = connect(Number(new URL(t.url).port), '127.0.0.1');
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let text = '';
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (text += d));
  socket.on('error', () => undefined);
  const opened = Date.now();
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - opened)));
  return { socket, received: () => text, closed };
}

/** Writes `text` one byte at a time, `everyMs` apart, until the socket closes. */
async function drip(socket: Socket, text: string, everyMs: number): Promise<void> {
  for (const ch of text) {
    if (socket.destroyed || !socket.writable) return;
    socket.write(ch);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

describe('HTTP limits', () => {
  test('a body dripped one byte at a time gets 408 and is closed at http.request_timeout', async () => {
    const c = await rawClient();
    c.socket.write(`POST /inboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n`);
    void drip(c.socket, '{"displayName":"' + 'x'.repeat(180) + '"}', 250);
    const ms = await c.closed;
    assert.match(c.received(), /^HTTP\/1\.1 408 /);
    assert.ok(ms >= 1900 && ms < 5000, `closed after ${ms} ms`);
    assert.equal((await t.api('GET', '/inboxes')).body.total, 0, 'nothing was created');
  });

  test('headers dripped one byte at a time get 408 and are closed at http.headers_timeout', async () => {
    const c = await rawClient();
    void drip(c.socket, `GET /inboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\nX-Slow: ${'y'.repeat(100)}\r\n\r\n`, 250);
    const ms = await c.closed;
    assert.match(c.received(), /^HTTP\/1\.1 408 /);
    assert.ok(ms >= 900 && ms < 4000, `closed after ${ms} ms`);
  });

  test('connections beyond http.max_connections are closed at once; the open ones keep working', async () => {
    const held = await Promise.all([1, 2, 3, 4].map(() => rawClient()));
    const extra = await rawClient();
    assert.ok((await extra.closed) < 1000);
    assert.equal(extra.received(), '', 'closed without an answer');
    held[0].socket.write(`GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    await held[0].closed;
    assert.match(held[0].received(), /^HTTP\/1\.1 200 /);
    for (const c of held.slice(1)) c.socket.destroy();
    await Promise.all(held.map((c) => c.closed));
  });

  test('a client that drops mid-body is logged as a closed connection, not an error', async () => {
    const c = await rawClient();
    c.socket.write(`POST /inboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"displayName":"`);
    await new Promise((r) => setTimeout(r, 100));
    c.socket.destroy();
    await c.closed;
    const seen = async () => logLines.find((l) => l.msg === 'client closed the connection' && l.path === '/inboxes');
    for (let i = 0; i < 40 && !(await seen()); i++) await new Promise((r) => setTimeout(r, 50));
    const line = await seen();
    assert.ok(line, 'logged');
    assert.equal(line.level, 'info');
    assert.equal(line.received, 'part');
    assert.deepEqual(
      logLines.filter((l) => l.level === 'error'),
      [],
      'no error logged',
    );
  });
});
