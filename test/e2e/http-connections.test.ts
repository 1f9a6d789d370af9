// One client address cannot take the HTTP listener: past `[http] max_connections_per_ip` its new
// connections are closed at once, while another address (127.0.0.2, which Linux routes on lo)
// is still answered, even when the first one tries to hold every connection of the server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

const PER_IP = 5;
let t: TestServer;

before(async () => {
  t = await startTestServer({ http: { max_connections: 12, max_connections_per_ip: PER_IP } });
});
after(async () => {
  await t?.close();
});

interface Raw {
  socket: Socket;
  received: () => string;
  closed: Promise<void>;
  isClosed: () => boolean;
}

/** A raw connection to the API from `from`: what it received, and whether it was closed. */
async function rawClient(from: string): Promise<Raw> {
  const socket = connect({ port: Number(new URL(t.url).port), host: '127.0.0.1', localAddress: from });
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let text = '';
  let done = false;
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (text += d));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve(void (done = true))));
  return { socket, received: () => text, closed, isClosed: () => done };
}

/** GET /health over a fresh connection from `from`; the status line, or '' when closed unanswered. */
async function probe(from: string): Promise<string> {
  const c = await rawClient(from);
  c.socket.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  await c.closed;
  return c.received().split('\r\n')[0];
}

describe('HTTP connections per client address', () => {
  test('past max_connections_per_ip one address is closed at once; another address is still answered', async () => {
    // Idle sockets from one address, more than the whole server takes; the first ones one after
    // the other, so that they are the ones the server accepts first.
    const idle: Raw[] = [];
    for (let i = 0; i < PER_IP; i++) idle.push(await rawClient('127.0.0.1'));
    idle.push(...(await Promise.all(Array.from({ length: 15 }, () => rawClient('127.0.0.1')))));
    // The ones past the per-address limit are closed by the server, unanswered (not by a timeout:
    // the server's header timeout is 10 s, and `closed` is awaited for those only).
    const refused = idle.slice(PER_IP);
    await Promise.all(refused.map((c) => c.closed));
    for (const c of refused) assert.equal(c.received(), '', 'closed without an answer');
    assert.equal(idle.slice(0, PER_IP).filter((c) => c.isClosed()).length, 0, 'the first ones stay open');

    // Other addresses are served while 127.0.0.1 holds its share.
    for (let i = 0; i < 5; i++) assert.match(await probe('127.0.0.2'), /^HTTP\/1\.1 200 /);
    // The held connections still work.
    idle[0].socket.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await idle[0].closed;
    assert.match(idle[0].received(), /^HTTP\/1\.1 200 /);

    // Once they close, the address gets connections again.
    for (const c of idle) c.socket.destroy();
    await Promise.all(idle.map((c) => c.closed));
    // (The server sees those closes a moment after the client does.)
    await until('127.0.0.1 served again', async () => ((await probe('127.0.0.1')).startsWith('HTTP/1.1 200 ') ? true : undefined));
  });
});
