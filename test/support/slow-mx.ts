// A remote MX for fault tests: smtp-server on a fixed loopback port that holds each message for
// `delayMs` before answering 250 (a slow receiver), can be taken down and brought back on the
// same port, and counts deliveries per Message-ID so duplicates are visible.
import { SMTPServer } from 'smtp-server';
import type { Socket } from 'node:net';

export interface SlowMx {
  port: number;
  delayMs: number;
  /** Message-ID header → number of times the whole message was received. */
  deliveries: Map<string, number>;
  /** DATA transactions started (the server was reached), finished or not. */
  started(): number;
  /** Messages received in full whose 250 has not been sent yet (a crash now may duplicate them). */
  inflight(): number;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startSlowMx(delayMs: number, port = 0): Promise<SlowMx> {
  const deliveries = new Map<string, number>();
  let started = 0;
  let inflight = 0;
  let server: SMTPServer | undefined;
  const sockets = new Set<Socket>();
  const mx: SlowMx = {
    port,
    delayMs,
    deliveries,
    started: () => started,
    inflight: () => inflight,
    async up() {
      if (server) return;
      server = new SMTPServer({
        authOptional: true,
        disabledCommands: ['STARTTLS', 'AUTH'],
        logger: false,
        size: 50 * 1024 * 1024,
        onData(stream, _session, cb) {
          started++;
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () => {
            // Counted once the whole message arrived: from here a real MTA delivers it even if the
            // sender vanishes before reading the 250 (RFC 5321 §6.1's duplicate window).
            const id = /^message-id:\s*(\S+)/im.exec(Buffer.concat(chunks).toString('latin1'))?.[1] ?? '(none)';
            deliveries.set(id, (deliveries.get(id) ?? 0) + 1);
            inflight++;
            setTimeout(() => {
              inflight--;
              cb(null, '2.0.0 queued');
            }, mx.delayMs);
          });
        },
      });
      // A sender killed mid-session resets its connection; that is expected here, not fatal.
      server.on('error', () => undefined);
      const net = (server as unknown as { server: import('node:net').Server }).server;
      net.on('connection', (s: Socket) => {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
      });
      await new Promise<void>((resolve) => server!.listen(mx.port, '127.0.0.1', resolve));
      mx.port = (net.address() as { port: number }).port;
    },
    async down() {
      const s = server;
      server = undefined;
      if (!s) return;
      for (const sock of sockets) sock.destroy();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
    close: () => mx.down(),
  };
  await mx.up();
  return mx;
}
