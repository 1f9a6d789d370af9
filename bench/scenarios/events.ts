// (j) Event latency at 500 events/s: real SMTP deliveries (nodemailer, 5 pooled connections),
// 25 messages a second each to 20 inboxes, make 500 `message.received` events a second. A
// Server-Sent Events client (fetch, reading GET /events/stream), and in a second run also a
// webhook receiver on loopback (one message.received webhook per inbox), timestamp each event
// as it arrives; latency = arrival − the event's createdAt (stamped when it is recorded, in the
// transaction that stores the message; same machine, same clock).
// Before both, the idle case of issue 20 ("message.received within 100 ms of the 250 on an idle
// server"): one message at a time over one reused connection, each awaited on the stream before
// the next, from the 250 (nodemailer's sendMail resolving) to the frame's arrival: on SQLite, on
// one node of a durable PostgreSQL cluster, and across two nodes of it (SMTP to one, the stream
// on the other: LISTEN/NOTIFY in between).
import nodemailer from 'nodemailer';
import type { TestDns } from '../../test/support/dns.ts';
import { postgresMissing, startCluster } from '../../test/support/postgres.ts';
import { createInbox, startMailroom, type Mailroom } from '../mailroom.ts';
import { judge } from '../targets.ts';
import { load, log, round, sleep, startReceiver, summarize, waitFor, type Row, type ScenarioResult } from '../support.ts';

const INBOXES = 20;
const MESSAGES_PER_SECOND = 25;
const WARMUP_SECONDS = 2;
const SECONDS = 10;
const OFFERED_EVENTS_PER_SECOND = INBOXES * MESSAGES_PER_SECOND;

interface Arrival {
  id: string;
  subject: string;
  createdAt: number;
  at: number;
}

/** An event envelope as the stream and webhooks carry it. */
interface Envelope {
  id: string;
  createdAt: string;
  data: { subject: string };
}

/** An event envelope (SSE data line or webhook body) as it arrived at `at`. */
const arrival = (e: Envelope, at: number): Arrival => ({ id: e.id, subject: e.data.subject, createdAt: Date.parse(e.createdAt), at });

/** The measured phase's events: subject "events run <n>" (warm-up: "events warm-up <n>"). */
const measured = (a: Arrival) => a.subject.startsWith('events run ');

/**
 * Reads GET /events/stream?types=message.received of `node` with `key` until `signal` aborts;
 * calls `onEvent` with each envelope and the wall-clock ms its chunk arrived. Resolves once the
 * stream is open; `done` ends with the stream.
 */
export async function readEvents(node: { url: string; key: string }, signal: AbortSignal, onEvent: (e: Envelope, at: number) => void): Promise<{ done: Promise<void> }> {
  const res = await fetch(`${node.url}/events/stream?types=message.received`, { headers: { authorization: `Bearer ${node.key}` }, signal });
  if (res.status !== 200 || !res.body) throw new Error(`GET /events/stream: ${res.status}`);
  const done = (async () => {
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
        if (data) onEvent(JSON.parse(data) as Envelope, at);
      }
    }
  })().catch((err: Error) => {
    if (err.name !== 'AbortError') throw err;
  });
  return { done };
}

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
    const reading = await readEvents(m, stream.signal, (e, at) => sse.push(arrival(e, at)));

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
    await reading.done;

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

const IDLE_WARMUP = 20;
const IDLE_MESSAGES = 200;
/** Between two idle messages: the server has nothing else to do when the next one comes. */
const IDLE_PAUSE_MS = 50;

interface Idle {
  label: string;
  /** 250 → the frame's arrival (negative: the frame came first). */
  afterReply: ReturnType<typeof summarize>;
  /** sendMail called (MAIL FROM … DATA, parse, commit) → the frame's arrival. */
  fromStart: ReturnType<typeof summarize>;
  missing: number;
  loadBefore: number[];
}

/** Messages one at a time over one reused connection to `smtpNode`, each awaited on `streamNode`'s stream before the next. */
async function runIdle(label: string, smtpNode: Mailroom, streamNode: Mailroom): Promise<Idle> {
  const loadBefore = load();
  const inbox = await createInbox(smtpNode);
  const waiting = new Map<string, (at: number) => void>();
  const stream = new AbortController();
  const reading = await readEvents(streamNode, stream.signal, (e, at) => waiting.get(e.data.subject)?.(at));
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: smtpNode.smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 1, maxMessages: Infinity });
  const afterReply: number[] = [];
  const fromStart: number[] = [];
  let missing = 0;
  const now = () => performance.timeOrigin + performance.now();
  try {
    for (let n = 0; n < IDLE_WARMUP + IDLE_MESSAGES; n++) {
      const subject = `idle ${n}`;
      let timer: NodeJS.Timeout | undefined;
      const seen = new Promise<number | undefined>((resolve) => {
        waiting.set(subject, resolve);
        timer = setTimeout(() => resolve(undefined), 10_000);
      });
      const start = now();
      await transport.sendMail({ from: 'sender@source.bench', to: inbox.address, subject, text: 'Idle event latency probe.\n'.repeat(10) });
      const replied = now();
      const at = await seen;
      clearTimeout(timer);
      waiting.delete(subject);
      if (n < IDLE_WARMUP) continue;
      if (at === undefined) missing++;
      else {
        afterReply.push(at - replied);
        fromStart.push(at - start);
      }
      await sleep(IDLE_PAUSE_MS);
    }
  } finally {
    transport.close();
    stream.abort();
    await reading.done;
  }
  log(`events idle, ${label}: 250 → SSE p50 ${summarize(afterReply).p50} p99 ${summarize(afterReply).p99} ms, ${missing} missing`);
  return { label, afterReply: summarize(afterReply), fromStart: summarize(fromStart), missing, loadBefore };
}

/** The idle case on SQLite, on one PostgreSQL node, and across two (without PostgreSQL: SQLite only). */
async function idleSetups(env: { dns: TestDns }): Promise<Idle[]> {
  const results: Idle[] = [];
  const sqlite = await startMailroom('events-idle-sqlite', { dns: env.dns.server });
  try {
    results.push(await runIdle('SQLite, one node', sqlite, sqlite));
  } finally {
    await sqlite.stop();
  }
  if (postgresMissing()) return results;
  const cluster = await startCluster({ durable: true });
  const nodes: Mailroom[] = [];
  try {
    const config = { database: { url: await cluster.createDatabase('bench_events_idle') } };
    nodes.push(await startMailroom('events-idle-pg-a', { dns: env.dns.server, config }));
    results.push(await runIdle('PostgreSQL, one node', nodes[0]!, nodes[0]!));
    nodes.push(await startMailroom('events-idle-pg-b', { dns: env.dns.server, config, key: nodes[0]!.key }));
    results.push(await runIdle('PostgreSQL, 250 at node A, stream on node B', nodes[0]!, nodes[1]!));
  } finally {
    for (const n of nodes) await n.stop();
    cluster.stop();
  }
  return results;
}

const idleRows = (r: Idle): Row[] => [
  { metric: `idle, ${r.label}: 250 → SSE client, p50`, unit: 'ms', mailroom: r.afterReply.p50, note: `load before ${r.loadBefore.join(' / ')}` },
  {
    metric: `idle, ${r.label}: 250 → SSE client, p99`,
    unit: 'ms',
    mailroom: r.afterReply.p99,
    note: `max ${r.afterReply.max} ms; ${IDLE_MESSAGES - r.missing} of ${IDLE_MESSAGES} arrived`,
    ...judge('eventP99Ms', r.afterReply.p99, undefined, r.missing === 0),
  },
  { metric: `idle, ${r.label}: SMTP transaction start → SSE client, p50`, unit: 'ms', mailroom: r.fromStart.p50, note: `p99 ${r.fromStart.p99} ms` },
];

export async function eventLatency(env: { dns: TestDns }): Promise<ScenarioResult> {
  const idle = await idleSetups(env);
  const alone = await runPhase(env, false);
  const both = await runPhase(env, true);
  const expected = SECONDS * MESSAGES_PER_SECOND * INBOXES;
  const all = (p: Phase, hooks: boolean) =>
    p.received.sse === expected && p.received.sseDistinct === expected && (!hooks || (p.received.webhook >= expected && p.received.webhookDistinct === expected));
  const rate = (p: Phase) => ({ unit: 'events/s', mailroom: p.producedPerSecond, ...judge('eventRate', p.producedPerSecond) });
  const sending = (p: Phase) => `SMTP sends in flight at most ${p.maxInFlight}, ${p.failed} failed, sending took ${round(p.sendSeconds, 1)} s`;
  log(
    `events: SSE alone ${alone.producedPerSecond}/s p50 ${alone.sse.p50} p99 ${alone.sse.p99} ms; with webhooks ${both.producedPerSecond}/s SSE p50 ${both.sse.p50} p99 ${both.sse.p99}, webhook p50 ${both.webhook!.p50} p99 ${both.webhook!.p99} ms`,
  );
  return {
    id: 'events',
    title: '(j) Event latency at 500 events/s: event → SSE and event → webhook',
    status: 'ok',
    setup: `idle first: ${IDLE_MESSAGES} messages (after ${IDLE_WARMUP} warm-up) one at a time over one reused SMTP connection, each awaited on the stream before the next and ${IDLE_PAUSE_MS} ms apart; 250 = nodemailer's sendMail resolving; ${idle.map((r) => r.label).join('; ')} (PostgreSQL: a private cluster on loopback, fsync on). Then the load: two runs, each on a fresh server, ${SECONDS} s measured after ${WARMUP_SECONDS} s of warm-up: nodemailer (pool of 5 SMTP connections) sends ${MESSAGES_PER_SECOND} messages a second, paced by the clock, each to ${INBOXES} inboxes, so ${OFFERED_EVENTS_PER_SECOND} message.received events a second (${expected} measured). Read by one SSE client (fetch on GET /events/stream?types=message.received); in the second run also by one webhook per inbox (inboxIds: one webhook's deliveries run at most 4 at a time) to a receiver answering 204; all on loopback, the clients in the bench process. Latency = arrival − the event's createdAt (stamped in the transaction that stores the message, before its commit). SSE alone: ${sending(alone)}; with webhooks: ${sending(both)}`,
    rows: [
      ...idle.flatMap(idleRows),
      { metric: 'SSE alone: events produced per second', ...rate(alone) },
      { metric: 'SSE alone: event → SSE client, p50', unit: 'ms', mailroom: alone.sse.p50 },
      {
        metric: 'SSE alone: event → SSE client, p99',
        unit: 'ms',
        mailroom: alone.sse.p99,
        note: `max ${alone.sse.max} ms; ${alone.received.sseDistinct} of ${expected} events, ${alone.received.sse - alone.received.sseDistinct} twice`,
        ...judge('everyEventOnce', all(alone, false) ? 1 : 0, 1),
      },
      { metric: 'with webhooks: events produced per second', ...rate(both) },
      { metric: 'with webhooks: event → SSE client, p50', unit: 'ms', mailroom: both.sse.p50 },
      { metric: 'with webhooks: event → SSE client, p99', unit: 'ms', mailroom: both.sse.p99, note: `max ${both.sse.max} ms` },
      { metric: 'with webhooks: event → webhook receiver, p50', unit: 'ms', mailroom: both.webhook!.p50 },
      {
        metric: 'with webhooks: event → webhook receiver, p99',
        unit: 'ms',
        mailroom: both.webhook!.p99,
        note: `max ${both.webhook!.max} ms; SSE ${both.received.sseDistinct}, webhook ${both.received.webhookDistinct} distinct of ${expected} (${both.received.webhook} deliveries)`,
        ...judge('everyEventOnce', all(both, true) ? 1 : 0, 1),
      },
    ],
    details: { idle, alone, both },
  };
}
