// (j) Event latency at 500 events/s: real SMTP deliveries (nodemailer, 5 pooled connections),
// 25 messages a second each to 20 inboxes, make 500 `message.received` events a second. A
// Server-Sent Events client (fetch, reading GET /events/stream), and in a second run also a
// webhook receiver on loopback (one message.received webhook per inbox), timestamp each event
// as it arrives; latency = arrival − the event's createdAt (stamped when it is recorded, in the
// transaction that stores the message; same machine, same clock).
import nodemailer from 'nodemailer';
import type { TestDns } from '../../test/support/dns.ts';
import { createInbox, startMailroom } from '../mailroom.ts';
import { log, round, sleep, startReceiver, summarize, waitFor, type ScenarioResult } from '../support.ts';

const INBOXES = 20;
const MESSAGES_PER_SECOND = 25;
const WARMUP_SECONDS = 2;
const SECONDS = 10;
const TARGET_EVENTS_PER_SECOND = INBOXES * MESSAGES_PER_SECOND;

interface Arrival {
  id: string;
  subject: string;
  createdAt: number;
  at: number;
}

/** An event envelope (SSE data line or webhook body) as it arrived at `at`. */
const arrival = (e: { id: string; createdAt: string; data: { subject: string } }, at: number): Arrival => ({ id: e.id, subject: e.data.subject, createdAt: Date.parse(e.createdAt), at });

/** The measured phase's events: subject "events run <n>" (warm-up: "events warm-up <n>"). */
const measured = (a: Arrival) => a.subject.startsWith('events run ');

interface Phase {
  sse: ReturnType<typeof summarize>;
  webhook?: ReturnType<typeof summarize>;
  producedPerSecond: number;
  received: { sse: number; sseDistinct: number; webhook: number; webhookDistinct: number };
  maxInFlight: number;
  failed: number;
  sendSeconds: number;
}

/** One run on a fresh server: SMTP load at the target rate, the SSE client, and (withWebhooks) one webhook per inbox. */
async function runPhase(env: { dns: TestDns }, withWebhooks: boolean): Promise<Phase> {
  const webhook: Arrival[] = [];
  // Arrival times are wall-clock ms, comparable with the events' createdAt.
  const receiver = await startReceiver((e, at) => webhook.push(arrival(e, performance.timeOrigin + at)));
  const m = await startMailroom('events', { dns: env.dns.server, config: { jobs: { concurrency: 32 } } });
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: m.smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 5, maxMessages: Infinity });
  const stream = new AbortController();
  try {
    const inboxes = [];
    for (let i = 0; i < INBOXES; i++) inboxes.push(await createInbox(m));
    // One webhook per inbox (scoped with inboxIds): deliveries to one webhook run at most 4 at
    // a time (src/jobs/handlers/webhook.ts), too few for 500 a second to one URL.
    for (const inbox of inboxes.slice(0, withWebhooks ? INBOXES : 0)) {
      const hook = await m.api('POST', '/webhooks', { url: receiver.url, events: ['message.received'], inboxIds: [inbox.id] });
      if (hook.status !== 201) throw new Error(`POST /webhooks: ${hook.status} ${JSON.stringify(hook.body)}`);
    }

    // The SSE client: a plain fetch reading the stream as it comes.
    const sse: Arrival[] = [];
    const res = await fetch(`${m.url}/events/stream?types=message.received`, { headers: { authorization: `Bearer ${m.key}` }, signal: stream.signal });
    if (res.status !== 200 || !res.body) throw new Error(`GET /events/stream: ${res.status}`);
    const reading = (async () => {
      const decoder = new TextDecoder();
      let buf = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        const at = performance.timeOrigin + performance.now();
        buf += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buf.indexOf('\n\n')) !== -1) {
          const frame = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const data = /^data: (.*)$/m.exec(frame)?.[1];
          if (!data) continue;
          sse.push(arrival(JSON.parse(data), at));
        }
      }
    })().catch((err: Error) => {
      if (err.name !== 'AbortError') throw err;
    });

    // Paced by the clock: message n is sent at start + n / rate, whatever the earlier ones do.
    const to = inboxes.map((i) => i.address);
    let failed = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const sends: Promise<unknown>[] = [];
    const total = (WARMUP_SECONDS + SECONDS) * MESSAGES_PER_SECOND;
    const start = performance.now();
    for (let n = 0; n < total; n++) {
      const due = start + (n * 1000) / MESSAGES_PER_SECOND;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const subject = n < WARMUP_SECONDS * MESSAGES_PER_SECOND ? `events warm-up ${n}` : `events run ${n}`;
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      sends.push(
        transport
          .sendMail({ from: 'sender@source.bench', to, subject, text: 'Event latency probe.\n'.repeat(10) })
          .catch(() => failed++)
          .finally(() => inFlight--),
      );
    }
    await Promise.all(sends);
    const sendSeconds = (performance.now() - start) / 1000;
    const expected = SECONDS * MESSAGES_PER_SECOND * INBOXES;
    const count = (list: Arrival[]) => list.filter(measured).length;
    await waitFor('every event over SSE and webhook', () => count(sse) >= expected && (!withWebhooks || count(webhook) >= expected), 60_000, 100).catch(() => undefined);
    await sleep(500); // anything delivered twice would show now
    stream.abort();
    await reading;

    const run = sse.filter(measured);
    const hooks = webhook.filter(measured);
    const created = run.map((a) => a.createdAt);
    const producedPerSecond = created.length > 1 ? round((created.length - 1) / ((Math.max(...created) - Math.min(...created)) / 1000)) : 0;
    const unique = (list: Arrival[]) => new Set(list.map((a) => a.id)).size;
    const latency = (list: Arrival[]) => summarize(list.map((a) => a.at - a.createdAt));
    return {
      sse: latency(run),
      webhook: withWebhooks ? latency(hooks) : undefined,
      producedPerSecond,
      received: { sse: run.length, sseDistinct: unique(run), webhook: hooks.length, webhookDistinct: unique(hooks) },
      maxInFlight,
      failed,
      sendSeconds,
    };
  } finally {
    stream.abort();
    transport.close();
    await m.stop();
    receiver.close();
  }
}

export async function eventLatency(env: { dns: TestDns }): Promise<ScenarioResult> {
  const alone = await runPhase(env, false);
  const both = await runPhase(env, true);
  const expected = SECONDS * MESSAGES_PER_SECOND * INBOXES;
  const all = (p: Phase, hooks: boolean) => p.received.sse === expected && p.received.sseDistinct === expected && (!hooks || (p.received.webhook >= expected && p.received.webhookDistinct === expected));
  const rate = (p: Phase) => ({ unit: 'events/s', mailroom: p.producedPerSecond, target: `≥ ${TARGET_EVENTS_PER_SECOND * 0.95}`, met: p.producedPerSecond >= TARGET_EVENTS_PER_SECOND * 0.95 });
  const load = (p: Phase) => `SMTP sends in flight at most ${p.maxInFlight}, ${p.failed} failed, sending took ${round(p.sendSeconds, 1)} s`;
  log(`events: SSE alone ${alone.producedPerSecond}/s p50 ${alone.sse.p50} p99 ${alone.sse.p99} ms; with webhooks ${both.producedPerSecond}/s SSE p50 ${both.sse.p50} p99 ${both.sse.p99}, webhook p50 ${both.webhook!.p50} p99 ${both.webhook!.p99} ms`);
  return {
    id: 'events',
    title: '(j) Event latency at 500 events/s: event → SSE and event → webhook',
    status: 'ok',
    setup: `two runs, each on a fresh server, ${SECONDS} s measured after ${WARMUP_SECONDS} s of warm-up: nodemailer (pool of 5 SMTP connections) sends ${MESSAGES_PER_SECOND} messages a second, paced by the clock, each to ${INBOXES} inboxes, so ${TARGET_EVENTS_PER_SECOND} message.received events a second (${expected} measured). Read by one SSE client (fetch on GET /events/stream?types=message.received); in the second run also by one webhook per inbox (inboxIds: one webhook's deliveries run at most 4 at a time) to a receiver answering 204; all on loopback, the clients in the bench process. Latency = arrival − the event's createdAt (stamped in the transaction that stores the message, before its commit). SSE alone: ${load(alone)}; with webhooks: ${load(both)}`,
    rows: [
      { metric: 'SSE alone: events produced per second', ...rate(alone) },
      { metric: 'SSE alone: event → SSE client, p50', unit: 'ms', mailroom: alone.sse.p50 },
      { metric: 'SSE alone: event → SSE client, p99', unit: 'ms', mailroom: alone.sse.p99, note: `max ${alone.sse.max} ms; ${alone.received.sseDistinct} of ${expected} events, ${alone.received.sse - alone.received.sseDistinct} twice`, target: 'every event once', met: all(alone, false) },
      { metric: 'with webhooks: events produced per second', ...rate(both) },
      { metric: 'with webhooks: event → SSE client, p50', unit: 'ms', mailroom: both.sse.p50 },
      { metric: 'with webhooks: event → SSE client, p99', unit: 'ms', mailroom: both.sse.p99, note: `max ${both.sse.max} ms` },
      { metric: 'with webhooks: event → webhook receiver, p50', unit: 'ms', mailroom: both.webhook!.p50 },
      {
        metric: 'with webhooks: event → webhook receiver, p99',
        unit: 'ms',
        mailroom: both.webhook!.p99,
        note: `max ${both.webhook!.max} ms; SSE ${both.received.sseDistinct}, webhook ${both.received.webhookDistinct} distinct of ${expected} (${both.received.webhook} deliveries)`,
        target: 'every event once',
        met: all(both, true),
      },
    ],
    details: { alone, both },
  };
}
