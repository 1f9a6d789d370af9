// (e) Scale: the same reads with 10³ and with 10⁶ messages stored in one inbox (bulk-loaded
// with the server stopped). Latency with one connection, so it is the cost of one request;
// the target is that 10⁶ stays within 1.5× of 10³.
import type { TestDns } from '../../test/support/dns.ts';
import { createInbox, startMailroom } from '../mailroom.ts';
import { accountOfInbox, seedMessages } from '../seed.ts';
import { autocannon, log, round, type HttpLoad, type Row, type ScenarioResult } from '../support.ts';

const SIZES = [1_000, Number(process.env.BENCH_SCALE_MAX ?? 1_000_000)];
const SECONDS = 5;

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

async function measureSize(n: number, dns: string): Promise<{ loads: HttpLoad[]; seedSeconds: number }> {
  const name = `scale-${n}`;
  const first = await startMailroom(name, { dns });
  const inbox = await createInbox(first);
  await first.stop();
  log(`seeding ${n} messages`);
  const seeded = seedMessages(first.dataDir, accountOfInbox(first.dataDir, inbox.id), inbox.id, n, { shortBodies: true });
  log(`seeded ${n} in ${round(seeded.seconds, 1)} s`);
  const m = await startMailroom(name, { dns, reuseDir: first.dir, key: first.key });
  try {
    const loads: HttpLoad[] = [];
    for (const r of READS) {
      const url = m.url + r.path({ inbox: inbox.id, message: seeded.middleId });
      const headers = { authorization: `Bearer ${m.key}` };
      await autocannon(url, { connections: 1, seconds: 1, headers });
      const load = await autocannon(url, { connections: 1, seconds: SECONDS, headers });
      if (load.non2xx || load.errors) throw new Error(`${r.name} at ${n}: ${load.non2xx} non-2xx, ${load.errors} errors`);
      log(`${n}: ${r.name} p50 ${load.p50} ms p99 ${load.p99} ms ${load.reqPerSec} req/s`);
      loads.push(load);
    }
    return { loads, seedSeconds: seeded.seconds };
  } finally {
    await m.stop();
  }
}

export async function scale(env: { dns: TestDns }): Promise<ScenarioResult> {
  const [small, large] = [await measureSize(SIZES[0], env.dns.server), await measureSize(SIZES[1], env.dns.server)];
  const rows: Row[] = READS.map((r, i) => {
    // Mean latency from throughput at one connection: steadier than p50 at millisecond resolution.
    const meanSmall = round(1000 / small.loads[i].reqPerSec, 3);
    const meanLarge = round(1000 / large.loads[i].reqPerSec, 3);
    return {
      metric: `${r.name} at ${SIZES[1].toLocaleString('en-US')} messages`,
      unit: 'ms',
      mailroom: meanLarge,
      baselines: [{ name: `same at ${SIZES[0].toLocaleString('en-US')}`, value: meanSmall }],
      target: '≤ 1.5×',
      met: meanLarge <= 1.5 * meanSmall,
      note: `p99 ${large.loads[i].p99} ms vs ${small.loads[i].p99} ms`,
    };
  });
  return {
    id: 'scale',
    title: '(e) Scale: list and get with 10³ and 10⁶ stored messages',
    status: 'ok',
    setup: `one inbox holding ${SIZES.map((s) => s.toLocaleString('en-US')).join(' or ')} received messages (10 per thread, 60-byte bodies, bulk-inserted: ${round(large.seedSeconds)} s for the larger set); autocannon with 1 connection, 1 s warm-up then ${SECONDS} s per read; mean latency = 1 / throughput`,
    rows,
    details: { small: small.loads, large: large.loads },
  };
}
