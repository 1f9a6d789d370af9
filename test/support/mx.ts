// A capturing remote MX for outbound tests: smtp-server on loopback that records every message
// (envelope, raw source, TLS, DSN parameters) and answers each recipient as scripted — 250,
// 451, 550 or dropping the connection — optionally a different answer on each attempt.
import { createServer as createNetServer, type Socket } from 'node:net';
import { createSecureContext } from 'node:tls';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import getTLSOptions from 'smtp-server/lib/tls-options.js';
import { guard } from './wait.ts';

/** 'hold' keeps the RCPT reply back until release() (to observe a message while it is being sent). */
export type Behaviour = '250' | '451' | '550' | 'drop' | 'hold';

export interface CapturedMessage {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  secure: boolean;
  envid: string | undefined;
  heloName: string;
}

export interface TestMx {
  port: number;
  messages: CapturedMessage[];
  /** Answers for one recipient, used in turn (the last one repeats): e.g. ['451', '250']. */
  script(address: string, answers: Behaviour | Behaviour[]): void;
  /** Resolves when `n` messages in total have been captured. */
  waitFor(n: number, timeoutMs?: number): Promise<CapturedMessage[]>;
  /** Answers 250 to the held RCPT TO of `address` (and to those held later). */
  release(address: string): void;
  /** Resolves once an RCPT TO for `address` is being held. */
  held(address: string, timeoutMs?: number): Promise<void>;
  /** Refuses the message at the end of DATA (554) when this address is among its recipients. */
  rejectData(address: string): void;
  /** Presents this key and certificate to clients that ask for `serverName` (SNI). */
  certificate(serverName: string, pair: { key: string; cert: string }): void;
  /** Stalls the STARTTLS handshake of clients that ask for this server name (SNI) until they give up. */
  breakTls(serverName: string): void;
  /** Number of RCPT TO commands seen for an address (attempts). */
  attempts(address: string): number;
  /** Connections opened so far (to check reuse). */
  connections(): number;
  close(): Promise<void>;
}

const reply = (code: number, text: string) => Object.assign(new Error(text), { responseCode: code });

export async function startTestMx(): Promise<TestMx> {
  const scripts = new Map<string, Behaviour[]>();
  const seen = new Map<string, number>();
  const messages: CapturedMessage[] = [];
  const sockets = new Map<number, Socket>();
  let connectionCount = 0;
  const waiters: Array<() => void> = [];
  const holding = new Map<string, () => void>();
  const brokenTls = new Set<string>();
  const refuseData = new Set<string>();
  const defaultContext = createSecureContext(getTLSOptions({}));
  const released = new Set<string>();
  const certificates = new Map<string, ReturnType<typeof createSecureContext>>();

  const server = new SMTPServer({
    authOptional: true,
    hideDSN: false,
    // STARTTLS with smtp-server's bundled certificate, except for names made to fail.
    SNICallback(name: string, cb: (err: Error | null, ctx?: ReturnType<typeof createSecureContext>) => void) {
      // A broken name never gets its context: the client's handshake times out.
      if (!brokenTls.has(name.toLowerCase())) cb(null, certificates.get(name.toLowerCase()) ?? defaultContext);
    },
    logger: false,
    size: 50 * 1024 * 1024,
    onConnect(_session, cb) {
      connectionCount++;
      cb();
    },
    onRcptTo(address, session: SMTPServerSession, cb) {
      const addr = address.address.toLowerCase();
      const n = seen.get(addr) ?? 0;
      seen.set(addr, n + 1);
      const answers = scripts.get(addr) ?? ['250'];
      const answer = answers[Math.min(n, answers.length - 1)];
      if (answer === '250') return cb();
      if (answer === '451') return cb(reply(451, '4.7.1 Try again later (scripted)'));
      if (answer === '550') return cb(reply(550, '5.1.1 No such user here (scripted)'));
      if (answer === 'hold') {
        if (released.has(addr)) return cb();
        holding.set(addr, () => cb());
        return;
      }
      // 'drop': cut the TCP connection without a reply.
      sockets.get(session.remotePort)?.destroy();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (session.envelope.rcptTo.some((r) => refuseData.has(r.address.toLowerCase()))) {
          return cb(reply(554, '5.6.0 Message content rejected (scripted)'));
        }
        const env = session.envelope as typeof session.envelope & { dsn?: { envid?: string } };
        messages.push({
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
          secure: session.secure,
          envid: env.dsn?.envid,
          heloName: session.hostNameAppearsAs,
        });
        cb(null, `2.0.0 Ok: queued as ${messages.length}`);
        for (const w of waiters.splice(0)) w();
      });
    },
  });
  // Remember each raw socket by its remote port so a script can drop it.
  const net = (server as unknown as { server: ReturnType<typeof createNetServer> }).server;
  net.on('connection', (socket: Socket) => {
    if (socket.remotePort) {
      const port = socket.remotePort;
      sockets.set(port, socket);
      socket.on('close', () => sockets.delete(port));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (net.address() as { port: number }).port;

  return {
    port,
    messages,
    script(address, answers) {
      scripts.set(address.toLowerCase(), Array.isArray(answers) ? answers : [answers]);
    },
    async waitFor(n, timeoutMs = 10_000) {
      const deadline = Date.now() + guard(timeoutMs);
      while (messages.length < n) {
        if (Date.now() > deadline) throw new Error(`expected ${n} captured messages, have ${messages.length}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 100).unref();
        });
      }
      return messages;
    },
    rejectData(address) {
      refuseData.add(address.toLowerCase());
    },
    certificate(serverName, pair) {
      certificates.set(serverName.toLowerCase(), createSecureContext(pair));
    },
    breakTls(serverName) {
      brokenTls.add(serverName.toLowerCase());
    },
    release(address) {
      const addr = address.toLowerCase();
      released.add(addr);
      holding.get(addr)?.();
      holding.delete(addr);
    },
    async held(address, timeoutMs = 10_000) {
      const deadline = Date.now() + guard(timeoutMs);
      while (!holding.has(address.toLowerCase())) {
        if (Date.now() > deadline) throw new Error(`no RCPT TO ${address} held`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    attempts: (address) => seen.get(address.toLowerCase()) ?? 0,
    connections: () => connectionCount,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets.values()) s.destroy();
        server.close(() => resolve());
      }),
  };
}
