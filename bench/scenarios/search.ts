// (k) Search: `q` on the message list of one inbox holding 10³, 10⁴ and 10⁶ messages, bulk-inserted
// with the server stopped (the full-text index is filled during the load — FTS5 by its
// triggers, PostgreSQL's generated tsvector columns and GIN indexes — so the load time includes
// indexing). Bodies are 20 words drawn from a 5,000-word vocabulary with a Zipf-like skew
// (common words match many messages, rare ones few); one message in ten has an attachment. Each
// query form is asked sequentially (one connection): p50 and p99 per form. Then the same on
// PostgreSQL (a private cluster) at 10³, 10⁴ and 10⁵ (BENCH_SEARCH_PG_MAX=1000000 adds 10⁶; 0 skips it).
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { TestDns } from '../../test/support/dns.ts';
import { postgresMissing, startCluster, type PgCluster } from '../../test/support/postgres.ts';
import { newId } from '../../src/ids.ts';
import { createInbox, startMailroom, type Mailroom } from '../mailroom.ts';
import { accountOfInbox } from '../seed.ts';
import { cpuMsOf, load, log, round, summarize, treeCpuMsOf, type Row, type ScenarioResult } from '../support.ts';
import { judge } from '../targets.ts';

const sizes = (max: number, steps: number[]) => [...new Set([...steps, max])].filter((n) => n <= max);
const SIZES = sizes(Number(process.env.BENCH_SEARCH_MAX ?? 1_000_000), [1_000, 10_000]);
const PG_SIZES = sizes(Number(process.env.BENCH_SEARCH_PG_MAX ?? 100_000), [1_000, 10_000, 100_000]);
const VOCABULARY = 5_000;
const BATCH = 50_000;
const FILES = ['report', 'invoice', 'contract', 'minutes', 'budget', 'photo', 'scan', 'notes'];

/** Word w<k>z: k drawn so that w1z is in many bodies and w4999z in very few (x² skew); the z keeps w1z from being a prefix of w10z. */
const word = (r: number) => `w${Math.floor(r * r * VOCABULARY)}z`;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;
}

type ThreadValues = [id: string, accountId: string, inboxId: string, subject: string, lastMessageAt: string, createdAt: string];
type MessageValues = [
  id: string,
  accountId: string,
  inboxId: string,
  threadId: string,
  from: string,
  fromName: string,
  to: string,
  subject: string,
  body: string,
  messageIdHeader: string,
  size: number,
  createdAt: string,
  updatedAt: string,
];
type AttachmentValues = [id: string, accountId: string, messageId: string, filename: string, sha256: string, storagePath: string, createdAt: string];

/** The corpus, the same on both engines: `count` received messages, oldest first, each its own thread, an attachment on one in ten. */
function* corpus(accountId: string, inboxId: string, to: string, count: number): Generator<{ thread: ThreadValues; message: MessageValues; attachment?: AttachmentValues }> {
  const random = lcg(count);
  const start = Date.now() - 365 * 86_400_000;
  const step = Math.max(1, Math.floor((365 * 86_400_000) / count));
  for (let i = 0; i < count; i++) {
    const ms = start + i * step;
    const at = new Date(ms).toISOString();
    const threadId = newId('thr', ms);
    const id = newId('msg', ms);
    const subject = Array.from({ length: 4 }, () => word(random())).join(' ');
    const body = Array.from({ length: 20 }, () => word(random())).join(' ');
    yield {
      thread: [threadId, accountId, inboxId, subject, at, at],
      message: [id, accountId, inboxId, threadId, `sender${i % 97}@example.org`, `Sender ${i % 97}`, to, subject, body, `<${id}@example.org>`, body.length + 400, at, at],
      attachment: i % 10 === 0 ? [newId('att', ms), accountId, id, `${FILES[i % FILES.length]}-${i}.pdf`, '0'.repeat(64), `attachments/none/${id}`, at] : undefined,
    };
  }
}

const INSERT_THREAD = 'INSERT INTO threads (id, account_id, inbox_id, subject, message_count, last_message_at, created_at)';
const INSERT_MESSAGE = `INSERT INTO messages (id, account_id, inbox_id, thread_id, direction, from_address, from_name, to_addresses, subject,
       body_text, status, message_id_header, raw_path, size, created_at, updated_at)`;
const INSERT_ATTACHMENT = 'INSERT INTO attachments (id, account_id, message_id, filename, content_type, size, sha256, storage_path, created_at)';

/** Inserts the corpus into a stopped server's SQLite database; answers the seconds it took. */
function seedSqlite(dataDir: string, accountId: string, inboxId: string, count: number): number {
  const t0 = performance.now();
  const db = new Database(join(dataDir, 'mailroom.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -262144');
  const insertThread = db.prepare(`${INSERT_THREAD} VALUES (?, ?, ?, ?, 1, ?, ?)`);
  const insertMessage = db.prepare(`${INSERT_MESSAGE} VALUES (?, ?, ?, ?, 'inbound', ?, ?, ?, ?, ?, 'received', ?, NULL, ?, ?, ?)`);
  const insertAttachment = db.prepare(`${INSERT_ATTACHMENT} VALUES (?, ?, ?, ?, 'application/pdf', 1000, ?, ?, ?)`);
  const to = JSON.stringify([(db.prepare('SELECT address FROM inboxes WHERE id = ?').get(inboxId) as { address: string }).address]);
  const rows = corpus(accountId, inboxId, to, count);
  for (let done = 0; done < count;) {
    const n = Math.min(BATCH, count - done);
    db.transaction(() => {
      for (let i = 0; i < n; i++) {
        const { thread, message, attachment } = rows.next().value!;
        insertThread.run(...thread);
        insertMessage.run(...message);
        if (attachment) insertAttachment.run(...attachment);
      }
    })();
    done += n;
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return (performance.now() - t0) / 1000;
}

/** Inserts the corpus into a stopped server's PostgreSQL database (unnest: one statement per table and batch), then ANALYZE. */
export async function seedPostgres(url: string, accountId: string, inboxId: string, count: number): Promise<number> {
  const t0 = performance.now();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const [{ address }] = (await client.query('SELECT address FROM inboxes WHERE id = $1', [inboxId])).rows;
    const rows = corpus(accountId, inboxId, JSON.stringify([address]), count);
    const columns = <T extends unknown[]>(list: T[]) => list[0].map((_, c) => list.map((r) => r[c]));
    for (let done = 0; done < count;) {
      const n = Math.min(5_000, count - done);
      const batch = Array.from({ length: n }, () => rows.next().value!);
      const attachments = batch.flatMap((b) => (b.attachment ? [b.attachment] : []));
      await client.query('BEGIN');
      await client.query(
        `${INSERT_THREAD} SELECT a, b, c, d, 1, e, f FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(a, b, c, d, e, f)`,
        columns(batch.map((b) => b.thread)),
      );
      await client.query(
        `${INSERT_MESSAGE} SELECT a, b, c, d, 'inbound', e, f, g, h, i, 'received', j, NULL, k, l, m
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::int[], $12::text[], $13::text[]) AS u(a, b, c, d, e, f, g, h, i, j, k, l, m)`,
        columns(batch.map((b) => b.message)),
      );
      if (attachments.length) {
        await client.query(
          `${INSERT_ATTACHMENT} SELECT a, b, c, d, 'application/pdf', 1000, e, f, g FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(a, b, c, d, e, f, g)`,
          columns(attachments),
        );
      }
      await client.query('COMMIT');
      done += n;
    }
    await client.query('VACUUM ANALYZE');
  } finally {
    await client.end();
  }
  return (performance.now() - t0) / 1000;
}

const QUERIES = [
  { form: 'common word', q: 'w1z' },
  { form: 'rare word', q: 'w4900z' },
  { form: 'two words', q: 'w3z w40z' },
  { form: 'phrase', q: '"w2z w3z"' },
  { form: 'prefix', q: 'w49' },
  { form: 'from:', q: 'from:sender5' },
  { form: 'word -word', q: 'w10z -w1z' },
  { form: 'subject:', q: 'subject:w7z' },
  { form: 'filename:', q: 'filename:contract' },
  { form: 'has:attachment before:', q: `has:attachment before:${new Date(Date.now() - 180 * 86_400_000).toISOString().slice(0, 10)}` },
];

/**
 * Each query form `requests` times, one at a time, after 5 warm-up requests: latency, and the CPU
 * time the server (and the database's processes, `postmaster`) spent per request — on a machine
 * other work shares, the steadier of the two.
 */
async function measure(m: Mailroom, inbox: string, requests: number, postmaster?: number): Promise<SizeResult['stats']> {
  const out = [];
  // A fresh server compiles as it goes: every form first, so the first one measured is not the slowest.
  for (let round = 0; round < 10; round++) {
    for (const { q } of QUERIES) await (await fetch(`${m.url}/inboxes/${inbox}/messages?limit=20&q=${encodeURIComponent(q)}`, { headers: { authorization: `Bearer ${m.key}` } })).text();
  }
  const cpuNow = () => (cpuMsOf(m.pid) ?? NaN) + (postmaster === undefined ? 0 : (treeCpuMsOf(postmaster) ?? NaN));
  for (const { q } of QUERIES) {
    const url = `${m.url}/inboxes/${inbox}/messages?limit=20&q=${encodeURIComponent(q)}`;
    const headers = { authorization: `Bearer ${m.key}` };
    let total = 0;
    let capped = false;
    for (let i = 0; i < 5; i++) await (await fetch(url, { headers })).text();
    const samples: number[] = [];
    const cpu0 = cpuNow();
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now();
      const res = await fetch(url, { headers });
      const body = (await res.json()) as { total: number; totalIsLowerBound?: boolean };
      samples.push(performance.now() - t0);
      if (res.status !== 200) throw new Error(`${q}: ${res.status}`);
      total = body.total;
      capped = body.totalIsLowerBound === true;
    }
    const cpu = round((cpuNow() - cpu0) / requests, 2);
    const s = summarize(samples);
    log(`${q}: p50 ${s.p50} ms, p99 ${s.p99} ms, CPU ${cpu} ms, ${total}${capped ? '+' : ''} matches`);
    out.push({ p50: s.p50, p99: s.p99, cpu, total, capped });
  }
  return out;
}

interface SizeResult {
  engine: 'SQLite' | 'PostgreSQL';
  size: number;
  seedSeconds: number;
  stats: Array<{ p50: number; p99: number; cpu: number; total: number; capped: boolean }>;
}

const requestsAt = (size: number) => (size > 100_000 ? 40 : size > 10_000 ? 100 : 200);

/** One engine at every size: a fresh server, stopped, the corpus loaded, started again, measured. */
async function runEngine(env: { dns: TestDns }, engine: SizeResult['engine'], sizes: number[], cluster?: PgCluster): Promise<SizeResult[]> {
  const results: SizeResult[] = [];
  for (const size of sizes) {
    const name = `search-${engine === 'SQLite' ? '' : 'pg-'}${size}`;
    const url = cluster ? await cluster.createDatabase(`bench_search_${size}_${Date.now()}`) : undefined;
    const config = url ? { database: { url } } : {};
    const first = await startMailroom(name, { dns: env.dns.server, config });
    const inbox = await createInbox(first);
    await first.stop();
    log(`${engine}: seeding ${size} messages (with the full-text index)`);
    const seedSeconds = url ? await seedPostgres(url, await accountOf(url, inbox.id), inbox.id, size) : seedSqlite(first.dataDir, accountOfInbox(first.dataDir, inbox.id), inbox.id, size);
    log(`${engine}: seeded ${size} in ${round(seedSeconds, 1)} s (load ${load().join(' ')})`);
    const m = await startMailroom(name, { dns: env.dns.server, reuseDir: first.dir, key: first.key, config });
    try {
      const postmaster = cluster ? Number(readFileSync(join(cluster.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]) : undefined;
      results.push({ engine, size, seedSeconds, stats: await measure(m, inbox.id, requestsAt(size), postmaster) });
    } finally {
      await m.stop();
    }
  }
  return results;
}

async function accountOf(url: string, inboxId: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query('SELECT account_id FROM inboxes WHERE id = $1', [inboxId])).rows[0].account_id;
  } finally {
    await client.end();
  }
}

export async function search(env: { dns: TestDns }): Promise<ScenarioResult> {
  const results = await runEngine(env, 'SQLite', SIZES);
  const pgSkipped = PG_SIZES.length === 0 ? 'BENCH_SEARCH_PG_MAX=0' : postgresMissing();
  if (!pgSkipped) {
    const cluster = await startCluster({ durable: false });
    try {
      results.push(...(await runEngine(env, 'PostgreSQL', PG_SIZES, cluster)));
    } finally {
      cluster.stop();
    }
  }
  const rows: Row[] = results.flatMap(({ engine, size, stats }) => {
    const base = results.find((r) => r.engine === engine && r.size === 1_000);
    return QUERIES.map((qf, i): Row => {
      const baseline = base && size > 1_000 ? base.stats[i].p50 : undefined;
      const target = baseline !== undefined && size === 1_000_000 ? judge('scale', stats[i].p50, baseline) : {};
      return {
        metric: `${engine}: q=${qf.q} (${qf.form}) at ${size.toLocaleString('en-US')} messages, p50`,
        unit: 'ms',
        mailroom: stats[i].p50,
        ...(baseline !== undefined ? { baselines: [{ name: 'same at 1,000', value: baseline }] } : {}),
        ...target,
        note: `p99 ${stats[i].p99} ms; CPU ${stats[i].cpu} ms per request${base && size > 1_000 ? ` (${round(stats[i].cpu / base.stats[i].cpu, 1)}× 1,000's)` : ''}; ${stats[i].total.toLocaleString('en-US')}${stats[i].capped ? '+' : ''} matches`,
      };
    });
  });
  return {
    id: 'search',
    title: '(k) Search: q on a 10³, 10⁴ and 10⁶ message inbox (SQLite), 10³ to 10⁵ (PostgreSQL)',
    status: 'ok',
    setup: `one inbox of ${SIZES.map((s) => s.toLocaleString('en-US')).join(', ')} messages (SQLite) and ${PG_SIZES.map((s) => s.toLocaleString('en-US')).join(', ')} (PostgreSQL, a private cluster, fsync off for the load${pgSkipped ? `: skipped, ${pgSkipped}` : ''}) bulk-inserted with the full-text index kept during the load (${results.map((r) => `${r.engine} ${r.size.toLocaleString('en-US')}: ${round(r.seedSeconds)} s`).join(', ')}); 20-word bodies over a 5,000-word skewed vocabulary, an attachment on one message in ten; GET /inboxes/{id}/messages?limit=20&q=…, one request at a time (200 / 100 / 40 per form at ≤10⁴ / ≤10⁵ / 10⁶ after 5 warm-up); CPU per request: the server process, and on PostgreSQL the cluster's processes too (load at the end: ${load().join(' ')})`,
    rows,
    details: { results },
  };
}
