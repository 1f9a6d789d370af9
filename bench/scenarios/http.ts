// (b) HTTP API throughput: autocannon with 50 keep-alive connections against three endpoints
// of mailroom (auth, rate limit and logging on, as in production) and the same three paths on
// bare tinyhttp + SQLite and bare node:http + SQLite baselines giving the same JSON answers.
import type { TestDns } from '../../test/support/dns.ts';
import { createInbox, startMailroom, type Mailroom } from '../mailroom.ts';
import { accountOfInbox, seedMessages } from '../seed.ts';
import { autocannon, log, startBaseline, stopChild, type HttpLoad, type Row, type ScenarioResult } from '../support.ts';

export const CONNECTIONS = 50;
const SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 8);
const WARMUP_SECONDS = 2;
const SEEDED = 1000;

interface Endpoint {
  name: string;
  method: 'GET' | 'POST';
  path: (inboxId: string) => string;
  body?: string;
  read: boolean;
}

const ENDPOINTS: Endpoint[] = [
  { name: 'GET /inboxes/{id}', method: 'GET', path: (id) => `/inboxes/${id}`, read: true },
  { name: 'GET /inboxes/{id}/messages?limit=20', method: 'GET', path: (id) => `/inboxes/${id}/messages?limit=20`, read: true },
  { name: 'POST /inboxes', method: 'POST', path: () => '/inboxes', body: '{"displayName":"bench"}', read: false },
];

async function measure(base: string, inboxId: string, e: Endpoint, headers: Record<string, string>): Promise<HttpLoad> {
  const opts = {
    connections: CONNECTIONS,
    method: e.method,
    headers: e.body ? { ...headers, 'content-type': 'application/json' } : headers,
    body: e.body,
  };
  await autocannon(base + e.path(inboxId), { ...opts, seconds: WARMUP_SECONDS });
  return autocannon(base + e.path(inboxId), { ...opts, seconds: SECONDS });
}

/** Bytes of one list page as a server answers it: the baselines are meant to send what mailroom does. */
async function pageBytes(base: string, inboxId: string, headers: Record<string, string>): Promise<number> {
  const res = await fetch(base + ENDPOINTS[1].path(inboxId), { headers });
  return (await res.arrayBuffer()).byteLength;
}

async function measureAll(label: string, base: string, inboxId: string, headers: Record<string, string>): Promise<{ loads: HttpLoad[]; page: number }> {
  const page = await pageBytes(base, inboxId, headers);
  log(`${label}: a list page is ${page} bytes`);
  const out: HttpLoad[] = [];
  for (const e of ENDPOINTS) {
    const r = await measure(base, inboxId, e, headers);
    log(`${label} ${e.name}: ${r.reqPerSec} req/s, p99 ${r.p99} ms${r.non2xx ? `, ${r.non2xx} non-2xx` : ''}${r.errors ? `, ${r.errors} errors` : ''}`);
    out.push(r);
  }
  return { loads: out, page };
}

const kb = (bytes: number) => `${(bytes / 1000).toFixed(1)} KB`;

export async function httpApi(env: { dns: TestDns }): Promise<ScenarioResult> {
  let m: Mailroom | undefined = await startMailroom('http', { dns: env.dns.server });
  let mine: HttpLoad[];
  let minePage: number;
  try {
    const inbox = await createInbox(m);
    seedMessages(m.dataDir, accountOfInbox(m.dataDir, inbox.id), inbox.id, SEEDED);
    ({ loads: mine, page: minePage } = await measureAll('mailroom', m.url, inbox.id, { authorization: `Bearer ${m.key}` }));
  } finally {
    await m.stop();
    m = undefined;
  }
  const baselines: Array<{ name: string; loads: HttpLoad[]; page: number }> = [];
  for (const [name, file] of [
    ['bare tinyhttp + SQLite', 'http-tinyhttp.ts'],
    ['bare node:http + SQLite', 'http-node.ts'],
  ] as const) {
    const b = await startBaseline(file);
    try {
      baselines.push({ name, ...(await measureAll(name, `http://127.0.0.1:${b.port}`, b.extra[0], {})) });
    } finally {
      await stopChild(b.child);
    }
  }
  const rows: Row[] = [];
  ENDPOINTS.forEach((e, i) => {
    const tiny = baselines[0].loads[i].reqPerSec;
    const bad = mine[i].non2xx + mine[i].errors;
    rows.push({
      metric: `${e.name} throughput`,
      unit: 'req/s',
      mailroom: mine[i].reqPerSec,
      baselines: baselines.map((b) => ({ name: b.name, value: b.loads[i].reqPerSec })),
      ...(e.read ? { target: '≥ 0.8× tinyhttp', met: mine[i].reqPerSec >= 0.8 * tiny } : {}),
      note: bad ? `${bad} non-2xx or errors` : undefined,
    });
    rows.push({
      metric: `${e.name} p99 latency`,
      unit: 'ms',
      mailroom: mine[i].p99,
      baselines: baselines.map((b) => ({ name: b.name, value: b.loads[i].p99 })),
      ...(e.read ? { target: '< 20', met: mine[i].p99 < 20 } : {}),
      note: `p50 ${mine[i].p50} ms`,
    });
  });
  return {
    id: 'http',
    title: '(b) HTTP API at 50 connections',
    status: 'ok',
    setup: `autocannon, ${CONNECTIONS} keep-alive connections, no pipelining, ${WARMUP_SECONDS} s warm-up then ${SECONDS} s per endpoint; mailroom with auth, rate limiting (limit raised out of the way) and one log line per request; inbox with ${SEEDED} stored messages (~1 KB bodies); baselines serve the same paths from the same rows (JSON of the fields the views had when the baselines were written), without auth, rate limiting, logging or metrics; a list page is ${kb(minePage)} from mailroom, ${baselines.map((b) => `${kb(b.page)} from ${b.name}`).join(', ')}`,
    rows,
    details: { mailroom: mine, baselines },
  };
}
