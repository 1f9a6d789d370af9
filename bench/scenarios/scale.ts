// (e) Scale: the same reads with 10³ and with 10⁶ messages stored in one inbox (bulk-loaded
// with the server stopped), both servers running and measured in alternation. Latency with one
// connection, so it is the cost of one request; the target is that 10⁶ stays within 1.5× of 10³.
import type { TestDns } from '../../test/support/dns.ts';
import { createInbox, startMailroom, type Mailroom } from '../mailroom.ts';
import { accountOfInbox, seedMessages } from '../seed.ts';
import { autocannon, log, round, type HttpLoad, type Row, type ScenarioResult } from '../support.ts';
import { judge } from '../targets.ts';

const SIZES = [1_000, Number(process.env.BENCH_SCALE_MAX ?? 1_000_000)];
const SECONDS = 2;
const ROUNDS = 3;

interface Read {
  name: string;
  path: (ids: { inbox: string; message: string }) => string;
}

const READS: Read[] = [
  { name: 'GET /inboxes/{id}/messages?limit=20', path: (i) => `/inboxes/${i.inbox}/messages?limit=20` },
  { name: 'GET /inboxes/{id}/messages?limit=20&offset=100', path: (i) => `/inboxes/${i.inbox}/messages?limit=20&offset=100` },
  { name: 'GET /messages/{id}', path: (i) => `/messages/${i.message}` },
  { name: 'GET /inboxes/{id}', path: (i) => `/inboxes/${i.inbox}` },
];

/** Seeds an inbox of `n` messages (server stopped) and starts the server on it again. */
async function seededServer(n: number, dns: string): Promise<{ m: Mailroom; ids: { inbox: string; message: string }; seedSeconds: number }> {
  const name = `scale-${n}`;
  const first = await startMailroom(name, { dns });
  const inbox = await createInbox(first);
  await first.stop();
  log(`seeding ${n} messages`);
  const seeded = seedMessages(first.dataDir, accountOfInbox(first.dataDir, inbox.id), inbox.id, n, { shortBodies: true });
  log(`seeded ${n} in ${round(seeded.seconds, 1)} s`);
  const m = await startMailroom(name, { dns, reuseDir: first.dir, key: first.key });
  return { m, ids: { inbox: inbox.id, message: seeded.middleId }, seedSeconds: seeded.seconds };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Both servers run at once and each read alternates between them, ROUNDS times: one-connection
 * latency swings by 2x between minutes on this shared machine, and alternating puts both sizes
 * in the same minutes. The median round of each is reported.
 */
async function measureBoth(servers: Array<Awaited<ReturnType<typeof seededServer>>>): Promise<HttpLoad[][]> {
  const out: HttpLoad[][] = servers.map(() => []);
  for (const r of READS) {
    const targets = servers.map((s) => ({ url: s.m.url + r.path(s.ids), headers: { authorization: `Bearer ${s.m.key}` } }));
    for (const t of targets) await autocannon(t.url, { connections: 1, seconds: 1, headers: t.headers });
    const rounds: HttpLoad[][] = servers.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, t] of targets.entries()) {
        const load = await autocannon(t.url, { connections: 1, seconds: SECONDS, headers: t.headers });
        if (load.non2xx || load.errors) throw new Error(`${r.name} at ${SIZES[i]}: ${load.non2xx} non-2xx, ${load.errors} errors`);
        rounds[i].push(load);
      }
    }
    for (const [i, loads] of rounds.entries()) {
      const mid = median(loads.map((l) => l.reqPerSec));
      const chosen = loads.find((l) => l.reqPerSec === mid)!;
      log(`${SIZES[i]}: ${r.name} ${loads.map((l) => l.reqPerSec).join(' / ')} req/s, median p99 ${chosen.p99} ms`);
      out[i].push(chosen);
    }
  }
  return out;
}

export async function scale(env: { dns: TestDns }): Promise<ScenarioResult> {
  const servers = [await seededServer(SIZES[0], env.dns.server), await seededServer(SIZES[1], env.dns.server)];
  let loads: HttpLoad[][];
  try {
    loads = await measureBoth(servers);
  } finally {
    for (const s of servers) await s.m.stop();
  }
  const small = { loads: loads[0] };
  const large = { loads: loads[1], seedSeconds: servers[1].seedSeconds };
  const rows: Row[] = READS.map((r, i) => {
    // Mean latency from throughput at one connection: steadier than p50 at millisecond resolution.
    const meanSmall = round(1000 / small.loads[i].reqPerSec, 3);
    const meanLarge = round(1000 / large.loads[i].reqPerSec, 3);
    return {
      metric: `${r.name} at ${SIZES[1].toLocaleString('en-US')} messages`,
      unit: 'ms',
      mailroom: meanLarge,
      baselines: [{ name: `same at ${SIZES[0].toLocaleString('en-US')}`, value: meanSmall }],
      ...judge('scale', meanLarge, meanSmall),
      note: `p99 ${large.loads[i].p99} ms vs ${small.loads[i].p99} ms`,
    };
  });
  return {
    id: 'scale',
    title: '(e) Scale: list and get with 10³ and 10⁶ stored messages',
    status: 'ok',
    setup: `one inbox holding ${SIZES.map((s) => s.toLocaleString('en-US')).join(' or ')} received messages (10 per thread, 60-byte bodies, bulk-inserted: ${round(large.seedSeconds)} s for the larger set); both servers running, each read alternating between them: autocannon with 1 connection, 1 s warm-up, then ${ROUNDS} rounds of ${SECONDS} s each, the median round reported; mean latency = 1 / throughput`,
    rows,
    details: { small: small.loads, large: large.loads },
  };
}
