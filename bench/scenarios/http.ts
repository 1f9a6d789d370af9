// (b) HTTP API throughput: autocannon with 50 keep-alive connections against three endpoints
// of mailroom (auth, rate limit and logging on, as in production) and the same three paths on
// bare tinyhttp + SQLite and bare node:http + SQLite baselines answering from the same rows,
// the three taking turns in short rounds so that they share whatever else loads the machine.
import type { ChildProcess } from 'node:child_process';
import type { TestDns } from '../../test/support/dns.ts';
import { createInbox, startMailroom, type Mailroom } from '../mailroom.ts';
import { accountOfInbox, seedMessages } from '../seed.ts';
import { autocannon, cpuMsOf, log, startBaseline, stopChild, type HttpLoad, type Row, type ScenarioResult } from '../support.ts';
import { judge } from '../targets.ts';

export const CONNECTIONS = 50;
const SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 8);
const WARMUP_SECONDS = 2;
const ROUNDS = 4;
const SEEDED = 1000;

interface Endpoint {
  name: string;
  method: 'GET' | 'POST';
  path: (inboxId: string) => string;
  body?: string;
  read: boolean;
}

const ALL_ENDPOINTS: Endpoint[] = [
  { name: 'GET /inboxes/{id}', method: 'GET', path: (id) => `/inboxes/${id}`, read: true },
  { name: 'GET /inboxes/{id}/messages?limit=20', method: 'GET', path: (id) => `/inboxes/${id}/messages?limit=20`, read: true },
  { name: 'POST /inboxes', method: 'POST', path: () => '/inboxes', body: '{"displayName":"bench"}', read: false },
];
/**
 * BENCH_HTTP_ENDPOINTS=1,3: only these of the list above (1 is the first), say for a CPU profile
 * (BENCH_PROFILE=1) of one endpoint in each server.
 */
const ENDPOINTS = process.env.BENCH_HTTP_ENDPOINTS ? process.env.BENCH_HTTP_ENDPOINTS.split(',').map((n) => ALL_ENDPOINTS[Number(n) - 1]!) : ALL_ENDPOINTS;

/** One server under test: where it listens, the inbox it serves and the headers it needs. */
interface Target {
  name: string;
  base: string;
  inboxId: string;
  headers: Record<string, string>;
  /** The server's process: its CPU time per request is the figure the machine's load moves least. */
  pid: number;
}

/** A load run and the server's CPU time per request during it (all its threads, from /proc), in µs. */
type Measured = HttpLoad & { cpuUsPerRequest: number | null };

const loadOptions = (t: Target, e: Endpoint) => ({
  connections: CONNECTIONS,
  method: e.method,
  headers: e.body ? { ...t.headers, 'content-type': 'application/json' } : t.headers,
  body: e.body,
});

/** Bytes of one list page as a server answers it: the baselines are meant to send what mailroom does. */
async function pageBytes(t: Target): Promise<number> {
  const res = await fetch(t.base + ALL_ENDPOINTS[1].path(t.inboxId), { headers: t.headers });
  return (await res.arrayBuffer()).byteLength;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Every server on one endpoint: a warm-up each, then ROUNDS rounds in which each server takes
 * its turn of SECONDS / ROUNDS, so that all of them meet the same load from the rest of a shared
 * machine (measured one after the other for SECONDS each, a ratio moved with whatever else ran
 * during the half minute between them). Throughput: the mean of the rounds' (equal turns); p50
 * and p99: the median round's.
 */
async function measureEndpoint(targets: Target[], e: Endpoint): Promise<Measured[]> {
  for (const t of targets) await autocannon(t.base + e.path(t.inboxId), { ...loadOptions(t, e), seconds: WARMUP_SECONDS });
  const rounds: HttpLoad[][] = targets.map(() => []);
  const cpu = targets.map(() => 0);
  const turn = Math.max(1, Math.round(SECONDS / ROUNDS));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [i, t] of targets.entries()) {
      const before = cpuMsOf(t.pid) ?? NaN;
      rounds[i].push(await autocannon(t.base + e.path(t.inboxId), { ...loadOptions(t, e), seconds: turn }));
      cpu[i] += (cpuMsOf(t.pid) ?? NaN) - before;
    }
  }
  return targets.map((t, i) => {
    const runs = rounds[i];
    const requests = runs.reduce((n, l) => n + l.requests, 0);
    const perRequest = (cpu[i] * 1000) / requests;
    const load: Measured = {
      cpuUsPerRequest: Number.isFinite(perRequest) ? Math.round(perRequest) : null,
      reqPerSec: Math.round(runs.reduce((n, l) => n + l.reqPerSec, 0) / runs.length),
      p50: median(runs.map((l) => l.p50)),
      p99: median(runs.map((l) => l.p99)),
      requests: runs.reduce((n, l) => n + l.requests, 0),
      non2xx: runs.reduce((n, l) => n + l.non2xx, 0),
      errors: runs.reduce((n, l) => n + l.errors, 0),
    };
    log(
      `${t.name} ${e.name}: ${load.reqPerSec} req/s, ${load.cpuUsPerRequest} µs CPU/request, p99 ${load.p99} ms (rounds: ${runs.map((l) => l.reqPerSec).join(', ')} req/s)${load.non2xx ? `, ${load.non2xx} non-2xx` : ''}${load.errors ? `, ${load.errors} errors` : ''}`,
    );
    return load;
  });
}

const kb = (bytes: number) => `${(bytes / 1000).toFixed(1)} KB`;

export async function httpApi(env: { dns: TestDns }): Promise<ScenarioResult> {
  const m: Mailroom = await startMailroom('http', { dns: env.dns.server });
  const children: ChildProcess[] = [];
  const targets: Target[] = [];
  const byEndpoint: Measured[][] = [];
  const pages: number[] = [];
  try {
    const inbox = await createInbox(m);
    seedMessages(m.dataDir, accountOfInbox(m.dataDir, inbox.id), inbox.id, SEEDED);
    targets.push({ name: 'mailroom', base: m.url, inboxId: inbox.id, headers: { authorization: `Bearer ${m.key}` }, pid: m.pid });
    for (const [name, file] of [
      ['bare tinyhttp + SQLite', 'http-tinyhttp.ts'],
      ['bare node:http + SQLite', 'http-node.ts'],
    ] as const) {
      const b = await startBaseline(file);
      children.push(b.child);
      targets.push({ name, base: `http://127.0.0.1:${b.port}`, inboxId: b.extra[0], headers: {}, pid: b.child.pid! });
    }
    for (const t of targets) pages.push(await pageBytes(t));
    for (const e of ENDPOINTS) byEndpoint.push(await measureEndpoint(targets, e));
  } finally {
    await m.stop();
    for (const c of children) await stopChild(c);
  }
  const mine = byEndpoint.map((loads) => loads[0]);
  const baselines = targets.slice(1).map((t, b) => ({ name: t.name, loads: byEndpoint.map((loads) => loads[b + 1]) }));
  const rows: Row[] = [];
  ENDPOINTS.forEach((e, i) => {
    const tiny = baselines[0].loads[i].reqPerSec;
    const bad = mine[i].non2xx + mine[i].errors;
    rows.push({
      metric: `${e.name} throughput`,
      unit: 'req/s',
      mailroom: mine[i].reqPerSec,
      baselines: baselines.map((b) => ({ name: b.name, value: b.loads[i].reqPerSec })),
      ...(e.read ? judge('httpRead', mine[i].reqPerSec, tiny) : {}),
      note: bad ? `${bad} non-2xx or errors` : undefined,
    });
    rows.push({
      metric: `${e.name} server CPU per request`,
      unit: 'µs',
      mailroom: mine[i].cpuUsPerRequest,
      baselines: baselines.map((b) => ({ name: b.name, value: b.loads[i].cpuUsPerRequest })),
      note: 'all threads of the server process, from /proc, over the measured rounds: what load on the rest of the machine disturbs least',
    });
    rows.push({
      metric: `${e.name} p99 latency`,
      unit: 'ms',
      mailroom: mine[i].p99,
      baselines: baselines.map((b) => ({ name: b.name, value: b.loads[i].p99 })),
      ...(e.read ? judge('httpReadP99Ms', mine[i].p99) : {}),
      note: `p50 ${mine[i].p50} ms`,
    });
  });
  return {
    id: 'http',
    title: '(b) HTTP API at 50 connections',
    status: 'ok',
    setup: `autocannon, ${CONNECTIONS} keep-alive connections, no pipelining; per endpoint a ${WARMUP_SECONDS} s warm-up of each server, then ${ROUNDS} rounds in which mailroom and the baselines take turns of ${Math.max(1, Math.round(SECONDS / ROUNDS))} s (all servers running throughout; p50/p99 of the median round); mailroom with auth, rate limiting (limit raised out of the way) and one log line per request; inbox with ${SEEDED} stored messages (~1 KB bodies); baselines serve the same paths from the same rows with the same fields (a message that is no reply: extractedText and extractedHtml are its bodies), without auth, rate limiting, logging or metrics; a list page is ${targets.map((t, i) => `${kb(pages[i])} from ${t.name}`).join(', ')}`,
    rows,
    details: { mailroom: mine, baselines },
  };
}
