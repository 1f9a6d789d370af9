// (o) Inbound flow: how fast accepted mail becomes something an agent sees. Two measurements
// on a fresh server with a message.received webhook to a receiver on loopback:
//  1. A burst: smtp-source sends BENCH_FLOW_COUNT (20,000) 10 KB messages over 50 reused
//     sessions; from the first message sent until the last 250, the last message visible through
//     GET /inboxes/{id}/messages, and the last message webhooked (distinct message ids: a
//     retried POST counts once). Baselines: Postfix delivering the same burst into Maildir in
//     the same run (bench/postfix.ts), and the listener's own 250 rate ("mail visible as fast as
//     it is accepted" is a ratio of 1).
//  2. A steady offer: 50 connections send BENCH_FLOW_RATE (1,500) messages a second in total
//     for BENCH_FLOW_SECONDS (60), each message at its slot whatever the earlier ones did; a
//     Server-Sent Events client (GET /events/stream) timestamps each message.received. Latency
//     = the frame's arrival − the 250's arrival at the client, same clock; p50/p99 over the run
//     and per 10 s window, so a backlog that grows shows as a p99 that grows.
// Both on embedded SQLite and, when Debian's postgresql is installed, on a private durable
// PostgreSQL cluster (fsync on): ids `flow` and `flow-pg`. BENCH_FLOW_ENGINES=sqlite for one;
// BENCH_PG_SOCKET=1 has the server connect over the cluster's Unix socket instead of loopback TCP.
// Each burst's server CPU is also given per thread (main thread, analysis workers, GC helpers).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { TestDns } from '../../test/support/dns.ts';
import { SmtpClient } from '../../test/support/smtp-client.ts';
import { postgresMissing, startCluster, type PgCluster } from '../../test/support/postgres.ts';
import { createInbox, startMailroom, type Mailroom } from '../mailroom.ts';
import { postfixMaildir, type PostfixRun } from '../postfix.ts';
import { judge } from '../targets.ts';
import { WORK, cpuMsOf, ensurePostfixTools, log, postmasterOf, round, sleep, startReceiver, summarize, threadCpuMs, threadCpuPer, treeCpuMsOf, type Row, type ScenarioResult } from '../support.ts';
import { readEvents } from './events.ts';
import { blast, MESSAGE_BYTES, SESSIONS } from './smtp.ts';

const COUNT = Number(process.env.BENCH_FLOW_COUNT ?? 20_000);
const RATE = Number(process.env.BENCH_FLOW_RATE ?? 1_500);
const SECONDS = Number(process.env.BENCH_FLOW_SECONDS ?? 60);
const WINDOW_S = 10;
const DRAIN_LIMIT_MS = 180_000;

/** A 10 KB message whose subject names it (the stream's frames are matched by subject). */
function message(subject: string): Buffer {
  const line = 'The quick brown fox jumps over the lazy dog, again and again and again.\r\n';
  const body = line.repeat(Math.ceil(MESSAGE_BYTES / line.length));
  return Buffer.from(`From: load@source.bench\r\nTo: flow@bench\r\nSubject: ${subject}\r\nMessage-ID: <${subject.replace(/\s+/g, '.')}@source.bench>\r\n\r\n${body}`);
}

interface Burst {
  accepted: number;
  acceptSeconds: number;
  visibleSeconds: number;
  webhookSeconds: number;
  visible: number;
  webhooks: number;
  cpuMsPerMsg?: number;
  /** The same by thread name (threadCpuPer). */
  threads: Record<string, number>;
  /** PostgreSQL: the CPU time of the cluster's processes (postmaster and backends) per message. */
  databaseMsPerMsg?: number;
}

async function burst(m: Mailroom, inbox: { id: string; address: string }, hooks: () => number, postmaster?: number): Promise<Burst> {
  const total = async () => ((await m.api('GET', `/inboxes/${inbox.id}/messages?limit=1`)).body?.total ?? 0) as number;
  const before = await total();
  const hooksBefore = hooks();
  const t0 = performance.now();
  const cpu0 = cpuMsOf(m.pid);
  const threads0 = threadCpuMs(m.pid);
  const db0 = postmaster === undefined ? undefined : treeCpuMsOf(postmaster);
  const sent = await blast(m.smtpPort, inbox.address, COUNT, SESSIONS);
  const deadline = performance.now() + DRAIN_LIMIT_MS;
  let visible = 0;
  let visibleAt = NaN;
  let webhookAt = NaN;
  while (performance.now() < deadline) {
    if (Number.isNaN(visibleAt) && (visible = (await total()) - before) >= COUNT) visibleAt = performance.now();
    if (Number.isNaN(webhookAt) && hooks() - hooksBefore >= COUNT) webhookAt = performance.now();
    if (!Number.isNaN(visibleAt) && !Number.isNaN(webhookAt)) break;
    await sleep(50);
  }
  const cpu1 = cpuMsOf(m.pid);
  const db1 = postmaster === undefined ? undefined : treeCpuMsOf(postmaster);
  return {
    accepted: COUNT,
    acceptSeconds: sent.seconds,
    visibleSeconds: round((visibleAt - t0) / 1000, 2),
    webhookSeconds: round((webhookAt - t0) / 1000, 2),
    visible,
    webhooks: hooks() - hooksBefore,
    cpuMsPerMsg: cpu0 !== undefined && cpu1 !== undefined ? round((cpu1 - cpu0) / COUNT, 3) : undefined,
    threads: threadCpuPer(m.pid, threads0, COUNT),
    databaseMsPerMsg: db0 !== undefined && db1 !== undefined ? round((db1 - db0) / COUNT, 3) : undefined,
  };
}

interface Steady {
  offered: number;
  accepted: number;
  refused: number;
  seen: number;
  latency: ReturnType<typeof summarize>;
  windows: Array<{ from: number; p50: number; p99: number; n: number }>;
  offeredPerSecond: number;
}

async function steady(m: Mailroom, inbox: { address: string }): Promise<Steady> {
  const acceptedAt = new Map<string, number>();
  const seenAt = new Map<string, number>();
  const stream = new AbortController();
  const reading = await readEvents(m, stream.signal, (e, at) => seenAt.set(e.data.subject, at));
  const clients = await Promise.all(Array.from({ length: SESSIONS }, async () => (await SmtpClient.open(m.smtpPort)).client));
  for (const c of clients) await c.cmd('EHLO source.bench');
  let refused = 0;
  const start = performance.now();
  const perClient = RATE / SESSIONS;
  const slots = Math.floor(SECONDS * perClient);
  const now = () => performance.timeOrigin + performance.now();
  await Promise.all(
    clients.map(async (c, ci) => {
      for (let n = 0; n < slots; n++) {
        // Client ci's n-th message is due at its slot; the clients' slots interleave evenly.
        const due = start + ((n + ci / SESSIONS) * 1000) / perClient;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const subject = `flow ${ci}-${n}`;
        const reply = await c.send('load@source.bench', [inbox.address], message(subject));
        if (reply.code === 250) acceptedAt.set(subject, now());
        else refused++;
      }
    }),
  );
  const sendSeconds = (performance.now() - start) / 1000;
  await Promise.all(clients.map((c) => c.quit()));
  const deadline = performance.now() + DRAIN_LIMIT_MS;
  while ([...acceptedAt.keys()].some((s) => !seenAt.has(s)) && performance.now() < deadline) await sleep(200);
  stream.abort();
  await reading.done;
  const samples: Array<{ at: number; ms: number }> = [];
  for (const [subject, at] of acceptedAt) {
    const seen = seenAt.get(subject);
    if (seen !== undefined) samples.push({ at, ms: seen - at });
  }
  const t0 = performance.timeOrigin + start;
  const windows = [];
  for (let from = 0; from < SECONDS; from += WINDOW_S) {
    const inWindow = samples.filter((s) => s.at - t0 >= from * 1000 && s.at - t0 < (from + WINDOW_S) * 1000).map((s) => s.ms);
    const sum = summarize(inWindow);
    windows.push({ from, p50: sum.p50, p99: sum.p99, n: sum.n });
  }
  return {
    offered: slots * SESSIONS,
    accepted: acceptedAt.size,
    refused,
    seen: samples.length,
    latency: summarize(samples.map((s) => s.ms)),
    windows,
    offeredPerSecond: round((slots * SESSIONS) / sendSeconds),
  };
}

/**
 * BENCH_PG_STATEMENTS=1: the PostgreSQL burst's statements (pg_stat_statements, triggers' too),
 * by database time, written to bench/work/flow-pg/statements.tsv: calls, execution ms, planning
 * ms, rows, statement.
 */
const STATEMENTS = process.env.BENCH_PG_STATEMENTS === '1';

/** BENCH_PG_SOCKET=1: the server connects to the cluster over its Unix socket instead of loopback TCP. */
const viaSocket = (cluster: PgCluster, url: string): string =>
  process.env.BENCH_PG_SOCKET === '1' ? `postgres://mailroom@localhost${new URL(url).pathname}?host=${encodeURIComponent(cluster.dir)}&port=${cluster.port}` : url;

/** Resets pg_stat_statements on `url`; the function returned writes what was counted since and answers the file. */
async function statementStats(url: string): Promise<() => Promise<string>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await client.query('ALTER SYSTEM SET pg_stat_statements.track_planning = on');
  await client.query('SELECT pg_reload_conf()');
  await client.query('SELECT pg_stat_statements_reset()');
  return async () => {
    try {
      const { rows } = await client.query<{ calls: string; ms: string; plan: string; rows: string; q: string }>(
        `SELECT calls, round(total_exec_time::numeric, 1) AS ms, round(total_plan_time::numeric, 1) AS plan, rows, regexp_replace(query, '\\s+', ' ', 'g') AS q
         FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 60`,
      );
      const file = join(WORK, 'flow-pg', 'statements.tsv');
      writeFileSync(file, rows.map((r) => `${r.calls}\t${r.ms}\t${r.plan}\t${r.rows}\t${r.q}`).join('\n') + '\n');
      return file;
    } finally {
      await client.end();
    }
  };
}

export async function inboundFlow(env: { dns: TestDns }): Promise<ScenarioResult[]> {
  ensurePostfixTools();
  const postfix = await postfixMaildir(COUNT, SESSIONS);
  if (typeof postfix === 'string') log(`Postfix → Maildir baseline skipped: ${postfix}`);
  const sqlite = await flowOn(env, typeof postfix === 'string' ? undefined : postfix);
  const out = [sqlite];
  if ((process.env.BENCH_FLOW_ENGINES ?? 'sqlite,postgres').includes('postgres') && !postgresMissing()) {
    const cluster = await startCluster({ durable: true, statements: STATEMENTS });
    try {
      out.push(await flowOn(env, typeof postfix === 'string' ? undefined : postfix, cluster, sqlite.rows[0]!.mailroom ?? undefined));
    } finally {
      cluster.stop();
    }
  }
  return out;
}

async function flowOn(env: { dns: TestDns }, postfix: PostfixRun | undefined, cluster?: PgCluster, sqliteRate?: number): Promise<ScenarioResult> {
  // Distinct message ids, not POSTs: a delivery retried after a slow answer counts once.
  const webhooked = new Set<string>();
  const receiver = await startReceiver((e: { data?: { id?: string } }) => {
    if (typeof e.data?.id === 'string') webhooked.add(e.data.id);
  });
  const url = cluster ? viaSocket(cluster, await cluster.createDatabase('bench_flow')) : undefined;
  const database = url ? { database: { url } } : {};
  const m = await startMailroom(cluster ? 'flow-pg' : 'flow', { dns: env.dns.server, config: database });
  const engine = cluster ? 'PostgreSQL' : 'SQLite';
  let b: Burst;
  let s: Steady;
  try {
    const inbox = await createInbox(m);
    const hook = await m.api('POST', '/webhooks', { url: receiver.url, events: ['message.received'] });
    if (hook.status !== 201) throw new Error(`POST /webhooks: ${hook.status} ${JSON.stringify(hook.body)}`);
    log(`flow (${engine}): warm-up, then a burst of ${COUNT} messages over ${SESSIONS} sessions`);
    await blast(m.smtpPort, inbox.address, 500, 10);
    await sleep(3000);
    const statements = url && STATEMENTS ? await statementStats(url) : undefined;
    b = await burst(m, inbox, () => webhooked.size, cluster && postmasterOf(cluster));
    if (statements) log(`flow (${engine}): the burst's statements by database time in ${await statements()}`);
    log(
      `flow (${engine}): 250s in ${b.acceptSeconds} s, all visible after ${b.visibleSeconds} s, all webhooks after ${b.webhookSeconds} s, ${b.cpuMsPerMsg} ms CPU/msg (by thread: ${Object.entries(
        b.threads,
      )
        .map(([t, ms]) => `${t} ${ms}`)
        .join(', ')})${b.databaseMsPerMsg === undefined ? '' : `, the database's processes ${b.databaseMsPerMsg} ms/msg`}`,
    );
    log(`flow (${engine}): ${RATE} msg/s offered for ${SECONDS} s over ${SESSIONS} connections`);
    s = await steady(m, inbox);
    log(`flow (${engine}): ${s.accepted} accepted (${s.refused} refused), 250 → stream p50 ${s.latency.p50} ms, p99 ${s.latency.p99} ms; windows p99 ${s.windows.map((w) => w.p99).join(' / ')}`);
  } finally {
    await m.stop();
    receiver.close();
  }
  const acceptRate = round(b.accepted / b.acceptSeconds);
  const e2eRate = round(b.accepted / b.visibleSeconds);
  const hookRate = round(b.accepted / b.webhookSeconds);
  const first = s.windows[0];
  const last = s.windows[s.windows.length - 1];
  const flat = first && last && last.p99 <= Math.max(2 * first.p99, 100);
  /** A burst figure: messages per second from the first sent to the last `what`, against Postfix → Maildir and the burst's own 250 rate. */
  const endToEnd = (what: string, rate: number, judged: ReturnType<typeof judge>, note: string): Row => ({
    metric: `end to end: first message sent → ${what}`,
    unit: 'msg/s',
    mailroom: rate,
    baselines: [
      { name: 'Postfix → Maildir, same burst', value: postfix?.deliveredPerSecond ?? null },
      { name: 'the same burst answered 250', value: acceptRate },
    ],
    ...judged,
    note,
  });
  const visibleTarget = cluster ? judge('postgresVsSqlite', e2eRate, sqliteRate, b.visible >= COUNT) : judge('endToEndVsPostfix', e2eRate, postfix?.deliveredPerSecond, b.visible >= COUNT);
  const pfNote = postfix
    ? `; Postfix ${postfix.version}: ${postfix.delivered} in the Maildir after ${postfix.deliveredSeconds} s (${postfix.cpuMsPerMsg} ms CPU/msg, all its processes)`
    : '; Postfix → Maildir not measured';
  return {
    id: cluster ? 'flow-pg' : 'flow',
    title: `(o) Inbound flow on ${cluster ? 'PostgreSQL (private durable cluster, fsync on)' : 'embedded SQLite'}: accepted → visible and webhooked, and 250 → visible latency under a steady offer`,
    status: 'ok',
    setup: `${postfix ? `Postfix → Maildir first (bench/postfix.ts: Postfix ${postfix.version}, fsynced queue, virtual delivery into a Maildir), the same burst; then a ` : ''}fresh server, one inbox, one message.received webhook to a receiver on loopback; burst: smtp-source -d, ${SESSIONS} sessions, ${COUNT} messages of ${MESSAGE_BYTES} bytes body (after 500 warm-up); steady: ${SESSIONS} connections sending ${RATE} msg/s in total for ${SECONDS} s, latency from the 250 at the client to the message.received frame on GET /events/stream`,
    rows: [
      endToEnd(
        'last visible in the API',
        e2eRate,
        visibleTarget,
        `${b.visible} of ${COUNT} visible after ${b.visibleSeconds} s; 250s took ${b.acceptSeconds} s; ${b.cpuMsPerMsg} ms of server CPU per message in all${b.databaseMsPerMsg === undefined ? '' : ` (and ${b.databaseMsPerMsg} ms of the database's processes)`}${cluster && sqliteRate ? `; ${(e2eRate / sqliteRate).toFixed(2)}× SQLite's ${sqliteRate} msg/s in this run` : ''}${pfNote}`,
      ),
      endToEnd(
        'last message webhooked (distinct ids)',
        hookRate,
        judge('webhookedVsVisible', hookRate, e2eRate, b.webhooks >= COUNT),
        `${b.webhooks} of ${COUNT} distinct messages webhooked after ${b.webhookSeconds} s; ${(hookRate / e2eRate).toFixed(2)}× visible; the receiver accepted ${receiver.connections} connections in the whole scenario`,
      ),
      {
        metric: `250 → visible (stream), p50, at ${RATE} msg/s offered`,
        unit: 'ms',
        mailroom: s.latency.p50,
        note: `${s.accepted} of ${s.offered} accepted (${s.refused} refused), ${s.seen} seen on the stream; offered ${s.offeredPerSecond} msg/s`,
      },
      {
        metric: `250 → visible (stream), p99, at ${RATE} msg/s offered`,
        unit: 'ms',
        mailroom: s.latency.p99,
        ...judge('steadyP99Ms', s.latency.p99, undefined, Boolean(flat) && s.refused === 0),
        note: `p99 per ${WINDOW_S} s window: ${s.windows.map((w) => `${w.p99} ms`).join(', ')}`,
      },
    ],
    details: { burst: b, steady: s },
  };
}
