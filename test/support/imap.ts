// IMAP clients for the tests: imapflow (the library mail apps are built on) logged in to a test
// server, and a raw socket client that sends lines as written and reads responses until the
// tagged one, for the exact answers of refusals and bounds.
import { connect, type Socket } from 'node:net';
import { ImapFlow } from 'imapflow';
import type { ImapService } from '../../src/imap/server.ts';
import type { TestServer } from './server.ts';

export const imapPort = (t: TestServer): number => (t.server.services.find((s) => s.name === 'imap') as ImapService).port;

/** An imapflow client of `t`'s IMAP listener, logged in (or throwing what the login answered). */
export async function imapClient(t: TestServer, user: string, pass: string): Promise<ImapFlow> {
  const client = new ImapFlow({ host: '127.0.0.1', port: imapPort(t), secure: false, auth: { user, pass }, logger: false, disableAutoIdle: true, doSTARTTLS: false });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** A raw IMAP connection: lines in, response lines out. */
export class RawImap {
  private buf = '';
  private waiters: Array<() => void> = [];
  closed = false;
  /** The server's first line. */
  greeting = '';
  /** Bytes received in all (a FETCH's responses are counted, not kept, past `keep`). */
  received = 0;

  readonly socket: Socket;
  /** Keep at most this many characters of unread input (a big FETCH is read and dropped). */
  private readonly keep: number;

  private constructor(socket: Socket, keep: number) {
    this.socket = socket;
    this.keep = keep;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      this.received += chunk.length;
      this.buf += chunk;
      if (this.buf.length > this.keep) this.buf = this.buf.slice(-this.keep);
      this.wakeAll();
    });
    const end = () => {
      this.closed = true;
      this.wakeAll();
    };
    socket.on('close', end);
    socket.on('error', end);
  }

  static async open(port: number, keep = 1 << 20): Promise<RawImap> {
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const c = new RawImap(socket, keep);
    c.greeting = (await c.until((text) => /^\* (OK|BYE).*\r\n/m.test(text))).trimEnd();
    return c;
  }

  private wakeAll(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits until the unread text passes `done` (or the connection closed); answers it and forgets it. */
  async until(done: (text: string) => boolean): Promise<string> {
    while (!done(this.buf)) {
      if (this.closed) break;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    const text = this.buf;
    this.buf = '';
    return text;
  }

  /** Sends `line` (with CRLF) and answers everything up to and including the tagged response of `tag`. */
  async command(tag: string, line: string): Promise<string> {
    this.socket.write(`${tag} ${line}\r\n`);
    return this.until((text) => new RegExp(`^${tag} (OK|NO|BAD)`, 'm').test(text));
  }

  send(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Resolves when the server has closed the connection. */
  async ended(): Promise<string> {
    return this.until(() => false);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** The tagged response line of `tag` in `text`. */
export function taggedLine(text: string, tag: string): string {
  return new RegExp(`^${tag} .*$`, 'm').exec(text)?.[0].trimEnd() ?? '';
}
