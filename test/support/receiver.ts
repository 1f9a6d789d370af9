// A local HTTP server standing in for a webhook receiver. Each request takes the next scripted
// behaviour (answer 200, 500 or any status, answer after a delay, never answer) and is
// recorded with its raw body and headers. `down()`/`up()` stop and restart the listener on the
// same port to play a receiver that is unreachable (connection refused) for a while.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { guard } from './wait.ts';

export type Behaviour = number | { status: number; delayMs?: number; headers?: Record<string, string> } | 'hang';

export interface Received {
  at: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The exact bytes received. */
  raw: Buffer;
  json: any;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Behaviours for the next requests, in order; after them `fallback` applies. */
  script(...behaviours: Behaviour[]): void;
  fallback: Behaviour;
  /** Resolves when at least `n` requests were received (rejects after `timeoutMs`). */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
  /** Connections accepted so far, and those open now. */
  readonly connections: number;
  readonly open: number;
  /**
   * The next `n` requests that arrive on a connection which served one before are cut off
   * (the socket destroyed, no answer, not recorded): a receiver closing an idle kept-alive
   * connection just as a request goes out on it.
   */
  cutReused(n: number): void;
  /** Answers, with `status`, every request left hanging ('hang') so far. */
  answerHung(status: number): void;
}

export async function startReceiver(fallback: Behaviour = 200): Promise<Receiver> {
  const queue: Behaviour[] = [];
  const received: Received[] = [];
  const sockets = new Set<Socket>();
  const pending = new Set<ServerResponse>();
  const waiters: Array<() => void> = [];
  let server: Server;
  let port = 0;
  let connections = 0;
  let cut = 0;
  const served = new WeakSet<Socket>();

  const handler = (req: import('node:http').IncomingMessage, res: ServerResponse) => {
    if (cut > 0 && served.has(req.socket)) {
      cut--;
      req.socket.destroy();
      return;
    }
    served.add(req.socket);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        json = undefined;
      }
      received.push({ at: Date.now(), method: req.method ?? '', path: req.url ?? '', headers: req.headers, raw, json });
      for (const w of waiters.splice(0)) w();
      const b = queue.length ? queue.shift()! : receiver.fallback;
      if (b === 'hang') {
        pending.add(res);
        return;
      }
      const spec = typeof b === 'number' ? { status: b } : b;
      const answer = () => {
        if (res.destroyed) return;
        res.writeHead(spec.status, { 'content-type': 'text/plain', ...spec.headers });
        res.end('ok');
      };
      if (spec.delayMs) setTimeout(answer, spec.delayMs).unref();
      else answer();
    });
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer(handler);
      server.on('connection', (s) => {
        connections++;
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        port = (server.address() as import('node:net').AddressInfo).port;
        resolve();
      });
    });

  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      pending.clear();
      server.close(() => resolve());
    });

  await listen();
  const receiver: Receiver = {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    fallback,
    script: (...b) => void queue.push(...b),
    async waitFor(n, timeoutMs = 5000) {
      const deadline = Date.now() + guard(timeoutMs);
      while (received.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`receiver: expected ${n} requests, got ${received.length}`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
      return received;
    },
    down: stop,
    up: listen,
    close: stop,
    get connections() {
      return connections;
    },
    get open() {
      return sockets.size;
    },
    cutReused: (n) => void (cut += n),
    answerHung(status) {
      for (const res of pending) if (!res.destroyed) res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
      pending.clear();
    },
  };
  return receiver;
}
