// PostgreSQL: does mail wait behind API reads? (issue 31, docs/performance.md.) A durable private
// cluster and `mailroom serve` (the bench bundle) with `database.api_connections` = 0 (the API
// shares mail's pool, as before 2026-11-30) and = 6 (a pool of its own), in turns. Each round:
// 50 HTTP clients read an inbox's list page without pause while smtp-source sends a burst of
// BENCH_POOLS_COUNT (default 3,000) messages of 10 KB over 50 sessions; the script times the
// 250s and the burst's last stored row (read straight from the database), and counts the pages
// answered meanwhile with their p99.
//   node bench/pools.ts
import pg from 'pg';
import { startCluster } from '../test/support/postgres.ts';
import { startTestDns } from '../test/support/dns.ts';
import { createInbox, startMailroom } from './mailroom.ts';
import { blast } from './scenarios/smtp.ts';
import { sleep } from './support.ts';

const COUNT = Number(process.env.BENCH_POOLS_COUNT ?? 3000);
const READERS = 50;
const ROUNDS = Number(process.env.BENCH_POOLS_ROUNDS ?? 2);

const cluster = await startCluster({ durable: true });
const dns = await startTestDns();
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const api of [0, 6]) {
      const url = await cluster.createDatabase(`bench_pools_${round}_${api}`);
      const m = await startMailroom('pools', { dns: dns.server, config: { database: { url, api_connections: api } } });
      const watcher = new pg.Client({ connectionString: url });
      await watcher.connect();
      try {
        const inbox = await createInbox(m);
        await blast(m.smtpPort, inbox.address, 200, 10);
        const stored = async () => Number((await watcher.query('SELECT count(*) AS n FROM messages WHERE inbox_id = $1', [inbox.id])).rows[0].n);
        while ((await stored()) < 200) await sleep(100);

        let reading = true;
        const latencies: number[] = [];
        const readers = Array.from({ length: READERS }, async () => {
          while (reading) {
            const t = performance.now();
            const res = await fetch(`${m.url}/inboxes/${inbox.id}/messages?limit=20`, { headers: { authorization: `Bearer ${m.key}` } });
            await res.arrayBuffer();
            if (res.status !== 200) throw new Error(`GET list page: ${res.status}`);
            latencies.push(performance.now() - t);
          }
        });
        await sleep(1000);
        latencies.length = 0;
        const t0 = performance.now();
        const sent = await blast(m.smtpPort, inbox.address, COUNT, 50);
        while ((await stored()) < 200 + COUNT) await sleep(50);
        const seconds = (performance.now() - t0) / 1000;
        reading = false;
        await Promise.all(readers);
        latencies.sort((a, b) => a - b);
        const p99 = latencies[Math.floor(latencies.length * 0.99)];
        console.log(
          `round ${round}, api_connections = ${api}: 250s in ${sent.seconds.toFixed(2)} s, all stored after ${seconds.toFixed(2)} s (${(COUNT / seconds).toFixed(0)} msg/s); ` +
            `${latencies.length} pages read meanwhile (${(latencies.length / seconds).toFixed(0)}/s), p99 ${p99.toFixed(0)} ms`,
        );
      } finally {
        await watcher.end();
        await m.stop();
      }
    }
  }
} finally {
  await dns.close();
  cluster.stop();
}
