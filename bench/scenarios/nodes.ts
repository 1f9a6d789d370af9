// (n) What moving to PostgreSQL and adding a second node does to speed, measured in one run on
// this machine: the same SMTP ingest and HTTP reads against one node on embedded SQLite (the
// reference every ratio is taken against), one node on a durable PostgreSQL cluster (fsync on),
// and two nodes sharing that cluster with the load split between them. Each node is its own
// `mailroom serve` process. With two nodes and PostgreSQL on 2 cores the CPU is the limit, so
// the CPU time of the node processes and of the cluster's processes is read from /proc around
// every measured phase: where the time goes, per message or request.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { cpus } from 'node:os';
import pg from 'pg';
import type { TestDns } from '../../test/support/dns.ts';
import { postgresMissing, startCluster, type PgCluster } from '../../test/support/postgres.ts';
import { createInbox, startMailroom, type Mailroom } from '../mailroom.ts';
import type { LoadOptions, LoadResult } from '../smtp-load.ts';
import { ROOT, SkipError, autocannon, cpuMsOf, load, log, machineBusyMs, postmasterOf, round, runBounded, sleep, treeCpuMsOf, type HttpLoad, type Row, type ScenarioResult } from '../support.ts';
import { CONNECTIONS } from './http.ts';
import { MESSAGE_BYTES, SESSIONS } from './smtp.ts';

const ID = 'nodes';
const TITLE = '(n) Several nodes: SMTP ingest and HTTP reads on SQLite, PostgreSQL with one node, PostgreSQL with two nodes';
/** Length of each measured phase; BENCH_NODES_SECONDS=3 for a quick check. */
const SECONDS = Number(process.env.BENCH_NODES_SECONDS ?? 12);
const WARMUP_SECONDS = 2;
/** Messages in the inbox the HTTP reads read, sent over SMTP (~1 KB bodies, as (b) seeds). */
const SEEDED = 1000;
const SEED_BYTES = 1000;

interface Setup {
  label: string;
  nodes: Mailroom[];
  /** The PostgreSQL cluster's postmaster, whose processes are charged as the database. */
  postmaster?: number;
}

/** CPU time used during one measured phase, in ms, and the wall time it took. */
interface CpuUse {
  nodesMs: number;
  databaseMs: number;
  /** The load generators (this process's children that exited meanwhile) and this process. */
  loadMs: number;
  machineMs: number;
  wallMs: number;
}

interface Phase {
  perSecond: number;
  p50: number;
  p99: number;
  /** Operations the CPU is divided by (messages answered 250, requests). */
  operations: number;
  bad: number;
  /** For the throughput row. */
  note?: string;
  cpu: CpuUse;
  detail: unknown;
}

interface SetupResult {
  label: string;
  smtp: Phase;
  list: Phase;
  get: Phase;
  loadBefore: number[];
}

/** Runs `work` and charges the CPU used meanwhile to the nodes, the database and the machine. */
async function withCpu<T>(setup: Setup, work: () => Promise<T>): Promise<{ result: T; cpu: CpuUse }> {
  const read = () => ({
    nodesMs: setup.nodes.reduce((sum, n) => sum + (cpuMsOf(n.pid) ?? NaN), 0),
    databaseMs: setup.postmaster === undefined ? 0 : (treeCpuMsOf(setup.postmaster) ?? NaN),
    // The load generators run as children of this process and are reaped when they exit.
    loadMs: cpuMsOf(process.pid, { reapedChildren: true }) ?? NaN,
    machineMs: machineBusyMs(),
    wallMs: performance.now(),
  });
  const before = read();
  const result = await work();
  const after = read();
  const cpu = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[k as keyof CpuUse]])) as unknown as CpuUse;
  return { result, cpu };
}

/** One run of bench/smtp-load.ts in its own process. */
async function smtpLoad(opts: LoadOptions): Promise<LoadResult> {
  const limitMs = ((opts.seconds ?? 0) + 90) * 1000;
  const res = await runBounded(process.execPath, [join(ROOT, 'bench', 'smtp-load.ts'), JSON.stringify(opts)], limitMs);
  if (res.code !== 0) throw new Error(`smtp-load failed (${res.timedOut ? 'timed out' : res.code}): ${res.stderr.slice(-800)}`);
  return JSON.parse(res.stdout) as LoadResult;
}

/**
 * SMTP ingest: SESSIONS persistent sessions spread over the set-up's nodes, 10 KB messages. The
 * CPU of the phase also pays for spooled mail processed meanwhile (more of it once the spool is
 * half full), so how many messages became visible in the API during it is reported beside it.
 */
async function smtpPhase(setup: Setup, inbox: { id: string; address: string }): Promise<Phase> {
  const ports = setup.nodes.map((n) => n.smtpPort);
  const blast = (seconds: number) => smtpLoad({ ports, to: inbox.address, sessions: SESSIONS, bytes: MESSAGE_BYTES, seconds });
  const visible = async () => (await setup.nodes[0]!.api('GET', `/inboxes/${inbox.id}/messages?limit=1`)).body.total as number;
  await blast(WARMUP_SECONDS);
  const before = await visible();
  const { result: r, cpu } = await withCpu(setup, () => blast(SECONDS));
  const processed = (await visible()) - before;
  const note = [
    ports.length > 1 ? `per node ${r.acceptedPerPort.join(' + ')}` : '',
    `${processed} messages became visible in the API meanwhile (spooled ones processed)`,
    r.deferred ? `${r.deferred} deferred (4xx)` : '',
    r.failed ? `${r.failed} failed` : '',
  ]
    .filter(Boolean)
    .join('; ');
  log(`${setup.label} SMTP: ${r.perSecond} msg/s, 250 after end of DATA p50 ${r.latency.p50} ms p99 ${r.latency.p99} ms; ${note}`);
  return { perSecond: r.perSecond, p50: r.latency.p50, p99: r.latency.p99, operations: r.accepted, bad: r.failed, note, cpu, detail: { ...r, processed } };
}

/**
 * One read at CONNECTIONS connections, as two autocannon processes of half the connections each,
 * one per node with two nodes and both at the one node otherwise, so the load generators cost
 * the same in every set-up. Throughputs add up; p50 and p99 are the higher of the two.
 */
async function httpPhase(setup: Setup, path: string): Promise<Phase> {
  const targets = [0, 1].map((i) => setup.nodes[i % setup.nodes.length]!);
  const both = (seconds: number) => Promise.all(targets.map((n) => autocannon(n.url + path, { connections: CONNECTIONS / 2, seconds, headers: { authorization: `Bearer ${n.key}` } })));
  await both(WARMUP_SECONDS);
  const { result: loads, cpu } = await withCpu(setup, () => both(SECONDS));
  const sum = (f: (l: HttpLoad) => number) => loads.reduce((s, l) => s + f(l), 0);
  const bad = sum((l) => l.non2xx + l.errors);
  const note = bad ? `${bad} non-2xx or errors` : undefined;
  const phase = {
    perSecond: sum((l) => l.reqPerSec),
    p50: Math.max(...loads.map((l) => l.p50)),
    p99: Math.max(...loads.map((l) => l.p99)),
    operations: sum((l) => l.requests),
    bad,
    note,
    cpu,
    detail: loads,
  };
  log(`${setup.label} ${path.replace(/[a-z]{3}_[A-Za-z0-9]+/g, '{id}')}: ${phase.perSecond} req/s, p99 ${phase.p99} ms${note ? `, ${note}` : ''}`);
  return phase;
}

/**
 * Starts the set-up's nodes (the first makes the schema and the bootstrap key; the others start
 * on it with that key), fills an inbox over SMTP for the reads, measures the two reads and then
 * SMTP ingest (last: the spooled mail it leaves is never processed, the nodes stop first).
 */
async function runSetup(env: { dns: TestDns }, label: string, opts: { nodes: number; databaseUrl?: string; postmaster?: number }): Promise<SetupResult> {
  const loadBefore = load();
  log(`nodes: ${label} (load ${loadBefore.join(' ')})`);
  const config = opts.databaseUrl ? { database: { url: opts.databaseUrl } } : {};
  const name = (i: number) => `nodes-${label.replace(/\W+/g, '-').toLowerCase()}-${i}`;
  const first = await startMailroom(name(0), { dns: env.dns.server, config });
  const setup: Setup = { label, nodes: [first], postmaster: opts.postmaster };
  try {
    for (let i = 1; i < opts.nodes; i++) setup.nodes.push(await startMailroom(name(i), { dns: env.dns.server, config, key: first.key }));
    const inbox = await createInbox(first);
    const seeded = await smtpLoad({ ports: [first.smtpPort], to: inbox.address, sessions: 10, bytes: SEED_BYTES, count: SEEDED });
    if (seeded.accepted !== SEEDED) throw new Error(`seeding: ${seeded.accepted} of ${SEEDED} accepted`);
    const page = await waitForMessages(first, inbox.id, SEEDED);
    const list = await httpPhase(setup, `/inboxes/${inbox.id}/messages?limit=20`);
    const get = await httpPhase(setup, `/messages/${page.data[10].id}`);
    const smtp = await smtpPhase(setup, inbox);
    return { label, smtp, list, get, loadBefore };
  } finally {
    for (const n of setup.nodes) {
      await n.stop();
      // Some 15,000 spooled 10 KB messages on SQLite: scratch, not worth keeping.
      rmSync(n.dataDir, { recursive: true, force: true });
    }
  }
}

/** Waits (bounded) until `count` messages are visible in the inbox; answers the first page. */
async function waitForMessages(m: Mailroom, inboxId: string, count: number): Promise<{ data: Array<{ id: string }> }> {
  const deadline = performance.now() + 120_000;
  for (;;) {
    const res = await m.api('GET', `/inboxes/${inboxId}/messages?limit=20`);
    if ((res.body?.total ?? 0) >= count) return res.body;
    if (performance.now() > deadline) throw new Error(`only ${res.body?.total} of ${count} seeded messages visible after 120 s`);
    await sleep(200);
  }
}

/** A checkpoint between set-ups, so one set-up's writes are not flushed during the next one. */
async function checkpoint(cluster: PgCluster): Promise<void> {
  const admin = new pg.Client({ connectionString: cluster.url() });
  await admin.connect();
  try {
    await admin.query('CHECKPOINT');
  } finally {
    await admin.end();
  }
}

// ---- Report -------------------------------------------------------------------------------

const perOp = (ms: number, ops: number) => (ops ? round(ms / ops, 3) : NaN);
const cpuPerOp = (p: Phase) => perOp(p.cpu.nodesMs + p.cpu.databaseMs, p.operations);

/**
 * Where the time of a phase went: nodes against database per operation, then every consumer's
 * share of what the machine's cores did (the wall time includes the load generators' start).
 */
function cpuNote(p: Phase): string {
  const { nodesMs, databaseMs, loadMs, machineMs, wallMs } = p.cpu;
  const pct = (ms: number, of: number) => `${Math.round((100 * ms) / of)}%`;
  const split = databaseMs
    ? `nodes ${perOp(nodesMs, p.operations)} ms (${pct(nodesMs, nodesMs + databaseMs)}), database ${perOp(databaseMs, p.operations)} ms (${pct(databaseMs, nodesMs + databaseMs)}); `
    : '';
  const other = machineMs - nodesMs - databaseMs - loadMs;
  return `${split}machine ${round(machineMs / wallMs, 2)} of ${cpus().length} cores busy: nodes ${pct(nodesMs, machineMs)}, database ${pct(databaseMs, machineMs)}, load generators ${pct(loadMs, machineMs)}, other work ${pct(other, machineMs)}`;
}

/**
 * One metric for the three set-ups: three rows, the PostgreSQL ones with SQLite as baseline
 * (and two nodes also against one), so the report's ratio column holds the ratios asked for.
 */
function threeRows(metric: string, unit: string, results: SetupResult[], value: (r: SetupResult) => number, note?: (r: SetupResult) => string | undefined): Row[] {
  return results.map((r, i) => ({
    metric: `${metric}: ${r.label}`,
    unit,
    mailroom: value(r),
    baselines: results.slice(0, i).map((b) => ({ name: b.label, value: value(b) })),
    note: note?.(r),
  }));
}

type PhaseName = 'smtp' | 'list' | 'get';

function phaseRows(results: SetupResult[], phase: PhaseName, what: string, rate: string, p50Too: boolean): Row[] {
  return [
    ...threeRows(
      `${what} throughput`,
      rate,
      results,
      (r) => r[phase].perSecond,
      (r) => r[phase].note,
    ),
    ...(p50Too ? threeRows(`${what} p50 latency`, 'ms', results, (r) => r[phase].p50) : []),
    ...threeRows(`${what} p99 latency`, 'ms', results, (r) => r[phase].p99, p50Too ? undefined : (r) => `p50 ${r[phase].p50} ms`),
    ...threeRows(
      `${what} CPU per ${phase === 'smtp' ? 'message' : 'request'} (nodes + database)`,
      'ms',
      results,
      (r) => cpuPerOp(r[phase]),
      (r) => cpuNote(r[phase]),
    ),
  ];
}

export async function nodes(env: { dns: TestDns }): Promise<ScenarioResult> {
  const missing = postgresMissing();
  if (missing) throw new SkipError(missing);
  const cluster = await startCluster({ durable: true });
  try {
    const postmaster = postmasterOf(cluster);
    const results = [await runSetup(env, 'SQLite, one node', { nodes: 1 })];
    for (const n of [1, 2]) {
      await checkpoint(cluster);
      const databaseUrl = await cluster.createDatabase(`bench_nodes_${n}`);
      results.push(await runSetup(env, `PostgreSQL, ${n === 1 ? 'one node' : 'two nodes'}`, { nodes: n, databaseUrl, postmaster }));
    }
    const failed = results.flatMap((r) => (['smtp', 'list', 'get'] as const).filter((p) => r[p].bad || !r[p].operations).map((p) => `${r.label} ${p}`));
    return {
      id: ID,
      title: TITLE,
      status: failed.length ? 'failed' : 'ok',
      reason: failed.length ? `failures or nothing measured in: ${failed.join(', ')}` : undefined,
      setup:
        `three set-ups one after the other, each on fresh nodes (\`mailroom serve\` child processes, one per node) and a fresh database: one node on embedded SQLite; one node on a private PostgreSQL cluster on loopback with fsync on (defaults otherwise); two nodes on one database of that cluster. ` +
        `Reads first, on an inbox of ${SEEDED} messages (~1 KB bodies) sent over SMTP: autocannon, ${CONNECTIONS} keep-alive connections as two processes of ${CONNECTIONS / 2} (one per node with two nodes), ${WARMUP_SECONDS} s warm-up then ${SECONDS} s per endpoint; p50/p99 are the higher of the two processes'. ` +
        `Then SMTP ingest: bench/smtp-load.ts, ${SESSIONS} persistent sessions (split evenly between the nodes), ${MESSAGE_BYTES}-byte bodies, ${WARMUP_SECONDS} s warm-up then ${SECONDS} s; latency from the end of DATA to the 250. ` +
        `CPU from /proc around each measured phase: the node processes, the cluster (postmaster and every backend, exited ones too), the load generators (children of the bench) and the whole machine (${cpus().length} cores); what remains is other work on the machine. Ratios: against SQLite, and two nodes also against one.`,
      rows: [
        ...phaseRows(results, 'smtp', 'SMTP ingest (250 = durable)', 'msg/s', true),
        ...phaseRows(results, 'list', 'GET /inboxes/{id}/messages?limit=20', 'req/s', false),
        ...phaseRows(results, 'get', 'GET /messages/{id}', 'req/s', false),
      ],
      details: { results },
    };
  } finally {
    cluster.stop();
  }
}
