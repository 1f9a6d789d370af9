// An SMTP load generator that, unlike Postfix's smtp-source, times every 250: from the end of a
// message's DATA (the terminating dot on the wire) to the server's reply, which is how long the
// server took to make the message durable. Persistent sessions (smtp-server waits 100 ms before
// greeting each new connection, so connections are opened once, before the clock starts), spread
// round-robin over one or more nodes' ports, so two nodes take the same load one node would.
// Run as its own process so the load does not share the benchmark's event loop:
//   node bench/smtp-load.ts '{"ports":[2525],"to":"x@agents.bench","sessions":50,"bytes":10240,"seconds":12,"warmupSeconds":2}'
// With "count" instead of "seconds" it sends that many messages (seeding) and stops.
// Prints one JSON line (LoadResult) on stdout. Import only its types: importing it runs it.
import { SmtpClient } from '../test/support/smtp-client.ts';
import { round, summarize } from './support.ts';

export interface LoadOptions {
  ports: number[];
  to: string;
  sessions: number;
  /** Size of the message body (the headers come on top). */
  bytes: number;
  /** Measured duration; with warmupSeconds of unmeasured load before it. */
  seconds?: number;
  warmupSeconds?: number;
  /** Instead of a duration: this many messages in all, then stop. */
  count?: number;
}

export interface LoadResult {
  /** 250s received within the measured window (or in all, with count). */
  accepted: number;
  /** 4xx replies (e.g. 451 when the spool is full): an MTA would retry later. */
  deferred: number;
  /** Anything else: 5xx, or the connection lost. */
  failed: number;
  perSecond: number;
  seconds: number;
  /** Accepted per port, in the order of `ports`. */
  acceptedPerPort: number[];
  /** End of DATA → 250, in ms, over the measured messages. */
  latency: ReturnType<typeof summarize>;
}

/** A body of `bytes` bytes of 76-character lines (no line starts with a dot: no stuffing needed). */
function bodyText(bytes: number): Buffer {
  const line = 'The quick brown fox jumps over the lazy dog while the bench counts replies.\r\n';
  return Buffer.from(line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes - 2) + '\r\n', 'latin1');
}

async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const body = Buffer.concat([bodyText(o.bytes), Buffer.from('.\r\n')]);
  const clients = await Promise.all(
    Array.from({ length: o.sessions }, async (_v, i) => {
      const { client, greeting } = await SmtpClient.open(o.ports[i % o.ports.length]!);
      if (greeting.code !== 220) throw new Error(`greeting ${greeting.code} ${greeting.text}`);
      const ehlo = await client.cmd('EHLO load.bench');
      if (ehlo.code !== 250) throw new Error(`EHLO: ${ehlo.code} ${ehlo.text}`);
      return client;
    }),
  );
  const warmupMs = o.count ? 0 : (o.warmupSeconds ?? 0) * 1000;
  const start = performance.now() + warmupMs;
  const end = o.count ? Infinity : start + (o.seconds ?? 10) * 1000;
  const latencies: number[] = [];
  const acceptedPerPort = o.ports.map(() => 0);
  let started = 0;
  let deferred = 0;
  let failed = 0;
  let lastReply = start;
  const more = () => (o.count ? started < o.count : performance.now() < end);

  // Only replies inside the measured window count; the warm-up's, and any that arrive after
  // the end (their messages went out before it), are left out of rate and latency.
  const tally = (port: number, code: number, latencyMs?: number) => {
    const at = performance.now();
    if (code === 0) throw new Error('connection lost');
    if (at < start || at > end) return;
    lastReply = at;
    if (code === 250 && latencyMs !== undefined) {
      acceptedPerPort[port]!++;
      latencies.push(latencyMs);
    } else if (code >= 400 && code < 500) deferred++;
    else failed++;
  };

  await Promise.all(
    clients.map(async (client, i) => {
      const port = i % o.ports.length;
      while (more()) {
        const n = started++;
        const id = `load-${process.pid}-${n}@load.bench`;
        const head = `From: <load@source.bench>\r\nTo: <${o.to}>\r\nSubject: bench message ${n}\r\nMessage-ID: <${id}>\r\nDate: ${new Date().toUTCString()}\r\n\r\n`;
        let code = (await client.cmd('MAIL FROM:<load@source.bench>')).code;
        if (code === 250) code = (await client.cmd(`RCPT TO:<${o.to}>`)).code;
        if (code === 250) code = (await client.cmd('DATA')).code;
        if (code !== 354) {
          tally(port, code);
          await client.cmd('RSET');
          continue;
        }
        client.socket.cork();
        client.socket.write(head, 'latin1');
        client.socket.write(body);
        client.socket.uncork();
        const sent = performance.now();
        const reply = await client.read();
        tally(port, reply.code, performance.now() - sent);
      }
    }),
  );
  await Promise.all(clients.map((c) => c.quit()));
  const accepted = acceptedPerPort.reduce((a, b) => a + b, 0);
  const seconds = ((o.count ? lastReply : end) - start) / 1000;
  return { accepted, deferred, failed, perSecond: round(accepted / seconds), seconds: round(seconds, 2), acceptedPerPort, latency: summarize(latencies) };
}

runLoad(JSON.parse(process.argv[2]!) as LoadOptions).then(
  (r) => process.stdout.write(JSON.stringify(r) + '\n'),
  (err: Error) => {
    process.stderr.write(`smtp-load: ${err.stack ?? err}\n`);
    process.exit(1);
  },
);
