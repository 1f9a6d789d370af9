// The processing of spooled mail alone, without SMTP beside it (docs/performance.md, "(a) and
// (o)"): a test server (SQLite, or PostgreSQL with MAILROOM_TEST_ENGINE=postgres) with its job
// runner stopped takes BENCH_DRAIN_MESSAGES (default 1,500) messages of text and HTML over SMTP
// into its spool; then the runner starts and the script times until every message is visible,
// with the CPU each thread of the process spent meanwhile (from /proc). BENCH_DRAIN_STATEMENTS=1
// also times every SQLite statement and COMMIT/RELEASE of the adapter and prints the costliest;
// on SQLite it also prints the query plan of every statement run that reads a table other than
// by a key (a SCAN, or an OR over an index: what a growing table or backlog makes slower);
// on PostgreSQL it has the cluster log every statement and prints the statements per message.
// Run with the code to compare checked out, taking turns:
//   node --import=./test/support/fast-start.ts bench/spool-drain.ts
import { readFileSync, readdirSync } from 'node:fs';
import { smtpTransport } from '../test/support/mail.ts';
import { startTestServer } from '../test/support/server.ts';
import { SqliteStore } from '../src/store/sqlite.ts';
import type { Service } from '../src/context.ts';
import { pgCluster } from '../test/support/postgres.ts';
import { TEST_ENGINE } from '../test/support/server.ts';
import pg from 'pg';
import { join } from 'node:path';

const MESSAGES = Number(process.env.BENCH_DRAIN_MESSAGES ?? 1500);

/** CPU ms of each thread of this process, by "tid:name". */
function threadCpu(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const name = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
    out.set(`${tid}:${name}`, (Number(fields[11]) + Number(fields[12])) * 10);
  }
  return out;
}

/** Sets the cluster's log_statement; answers the size of its log then. */
async function logStatements(url: string, level: 'all' | 'none'): Promise<number> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`ALTER SYSTEM SET log_statement = '${level}'`);
    await admin.query('SELECT pg_reload_conf()');
  } finally {
    await admin.end();
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  return readFileSync(join((await pgCluster()).dir, 'server.log')).length;
}

/** Times every statement the SQLite adapter runs, and its COMMITs and RELEASEs, by text. */
const sources = new Set<string>();
function timeStatements(): Map<string, { n: number; ms: number }> {
  const stats = new Map<string, { n: number; ms: number }>();
  const count = (key: string, t0: number) => {
    const e = stats.get(key) ?? { n: 0, ms: 0 };
    e.n++;
    e.ms += performance.now() - t0;
    stats.set(key, e);
  };
  const proto = SqliteStore.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const execute = proto.execute;
  proto.execute = function (this: unknown, source: unknown, ...rest: unknown[]) {
    const t0 = performance.now();
    sources.add(String(source));
    try {
      return execute.call(this, source, ...rest);
    } finally {
      count(String(source).slice(0, 100), t0);
    }
  };
  const statement = proto.statement;
  proto.statement = function (this: unknown, source: unknown) {
    const st = statement.call(this, source) as { run: (...a: unknown[]) => unknown; timed?: boolean };
    if (/^(COMMIT|RELEASE)/.test(String(source)) && !st.timed) {
      const run = st.run.bind(st);
      st.run = (...a: unknown[]) => {
        const t0 = performance.now();
        try {
          return run(...a);
        } finally {
          count(String(source), t0);
        }
      };
      st.timed = true;
    }
    return st;
  };
  return stats;
}

const stats = process.env.BENCH_DRAIN_STATEMENTS ? timeStatements() : undefined;
const t = await startTestServer({ smtp: { inline_processing: 0, spool_limit: 100_000, max_connections_per_ip: 1000 }, limits: { requests_per_minute: 1_000_000 } });
const inbox = (await t.api('POST', '/inboxes', { address: 'drain' })).body;
const runner = t.server.services.find((s) => s.name === 'jobs') as Service;
await runner.stop(1000);
const text = ('The quarterly figures are attached; please review the totals before Friday. '.repeat(2) + '\n').repeat(60);
const transports = Array.from({ length: 10 }, () => smtpTransport(t.server.smtpPort));
await Promise.all(
  transports.map(async (tr, k) => {
    for (let i = k; i < MESSAGES; i += transports.length) {
      await tr.sendMail({ from: 'sender@example.org', to: inbox.address, subject: `message ${i}`, text: `${i} ${text}`, html: `<p>${i} ${text}</p>` });
    }
  }),
);
for (const tr of transports) tr.close();
stats?.clear();
// PostgreSQL: every statement into the cluster's log from here on, counted after the drain.
const cluster = stats && TEST_ENGINE === 'postgres' ? await pgCluster() : undefined;
const logStart = cluster ? await logStatements(cluster.url(), 'all') : 0;
const before = threadCpu();
const t0 = performance.now();
await runner.start();
for (;;) {
  const r = await t.api('GET', `/inboxes/${inbox.id}/messages?limit=1`);
  if (r.body.total >= MESSAGES) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
const seconds = (performance.now() - t0) / 1000;
const after = threadCpu();
if (cluster) {
  await logStatements(cluster.url(), 'none');
  const logged = readFileSync(join(cluster.dir, 'server.log')).subarray(logStart).toString();
  const statements = logged.match(/LOG: {2}(?:execute [^:]*|statement): /g)?.length ?? 0;
  process.stdout.write(`PostgreSQL: ${(statements / MESSAGES).toFixed(2)} statements a message\n`);
}
let total = 0;
const byThread: string[] = [];
for (const [thread, ms] of after) {
  const spent = ms - (before.get(thread) ?? 0);
  total += spent;
  if (spent / MESSAGES >= 0.05) byThread.push(`${thread.split(':')[1]} ${(spent / MESSAGES).toFixed(2)}`);
}
process.stdout.write(
  `${MESSAGES} spooled messages processed in ${seconds.toFixed(2)} s: ${Math.round(MESSAGES / seconds)} msg/s; CPU ${(total / MESSAGES).toFixed(2)} ms a message (${byThread.join(', ')})\n`,
);
for (const [source, e] of [...(stats ?? [])].sort((a, b) => b[1].ms - a[1].ms).slice(0, 15)) {
  process.stdout.write(`  ${(e.ms / MESSAGES).toFixed(3)} ms a message, ${(e.n / MESSAGES).toFixed(2)} runs: ${source.replace(/\s+/g, ' ')}\n`);
}
if (stats && TEST_ENGINE !== 'postgres') {
  // Explained with the store's own connection and null for every value: the plan, not the rows.
  const client = (t.server.ctx.store as unknown as { client: { prepare(s: string): { all(...a: unknown[]): Array<{ detail: string }> } } }).client;
  const tables = new Set((client.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as unknown as Array<{ name: string }>).map((r) => r.name));
  for (const source of sources) {
    const plan = client
      .prepare(`EXPLAIN QUERY PLAN ${source}`)
      .all(...[...source.matchAll(/\?/g)].map(() => null))
      .map((r) => r.detail);
    if (plan.some((d) => tables.has(/^SCAN (\S+)/.exec(d)?.[1] ?? '') || d.startsWith('MULTI-INDEX OR'))) {
      process.stdout.write(`  plan of ${source.replace(/\s+/g, ' ').slice(0, 160)}:\n    ${plan.join('\n    ')}\n`);
    }
  }
}
await t.close();
process.exit(0);
