// (k) Search: `q` on the message list of one inbox holding 10⁴ and 10⁶ messages, bulk-inserted
// with the server stopped (the FTS5 index is filled by its triggers during the load, so the
// load time includes indexing). Bodies are 20 words drawn from a 5,000-word vocabulary with a
// Zipf-like skew (common words match many messages, rare ones few); one message in ten has an
// attachment. Each query form is asked sequentially (one connection): p50 and p99 per form.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import type { TestDns } from '../../test/support/dns.ts';
import { newId } from '../../src/ids.ts';
import { createInbox, startMailroom, type Mailroom } from '../mailroom.ts';
import { accountOfInbox } from '../seed.ts';
import { log, round, summarize, type Row, type ScenarioResult } from '../support.ts';

const SIZES = [...new Set([10_000, Number(process.env.BENCH_SEARCH_MAX ?? 1_000_000)])];
const VOCABULARY = 5_000;
const BATCH = 50_000;
const FILES = ['report', 'invoice', 'contract', 'minutes', 'budget', 'photo', 'scan', 'notes'];

/** Word w<k>z: k drawn so that w1z is in many bodies and w4999z in very few (x² skew); the z keeps w1z from being a prefix of w10z. */
const word = (r: number) => `w${Math.floor(r * r * VOCABULARY)}z`;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}

/** Inserts `count` received messages with varied words, and attachments on one in ten. */
function seedSearchCorpus(dataDir: string, accountId: string, inboxId: string, count: number): number {
  const t0 = performance.now();
  const db = new Database(join(dataDir, 'mailroom.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -262144');
  const insertThread = db.prepare('INSERT INTO threads (id, account_id, inbox_id, subject, message_count, last_message_at, created_at) VALUES (?, ?, ?, ?, 1, ?, ?)');
  const insertMessage = db.prepare(
    `INSERT INTO messages (id, account_id, inbox_id, thread_id, direction, from_address, from_name, to_addresses, subject,
       body_text, status, message_id_header, raw_path, size, created_at, updated_at)
     VALUES (?, ?, ?, ?, 'inbound', ?, ?, ?, ?, ?, 'received', ?, NULL, ?, ?, ?)`,
  );
  const insertAttachment = db.prepare(
    `INSERT INTO attachments (id, account_id, message_id, filename, content_type, size, sha256, storage_path, created_at) VALUES (?, ?, ?, ?, 'application/pdf', 1000, ?, ?, ?)`,
  );
  const to = JSON.stringify([(db.prepare('SELECT address FROM inboxes WHERE id = ?').get(inboxId) as { address: string }).address]);
  const random = lcg(count);
  const start = Date.now() - 365 * 86_400_000;
  const step = Math.max(1, Math.floor((365 * 86_400_000) / count));
  for (let done = 0; done < count; ) {
    const n = Math.min(BATCH, count - done);
    db.transaction(() => {
      for (let i = done; i < done + n; i++) {
        const ms = start + i * step;
        const at = new Date(ms).toISOString();
        const threadId = newId('thr', ms);
        const id = newId('msg', ms);
        const subject = Array.from({ length: 4 }, () => word(random())).join(' ');
        const body = Array.from({ length: 20 }, () => word(random())).join(' ');
        insertThread.run(threadId, accountId, inboxId, subject, at, at);
        insertMessage.run(id, accountId, inboxId, threadId, `sender${i % 97}@example.org`, `Sender ${i % 97}`, to, subject, body, `<${id}@example.org>`, body.length + 400, at, at);
        if (i % 10 === 0) insertAttachment.run(newId('att', ms), accountId, id, `${FILES[i % FILES.length]}-${i}.pdf`, '0'.repeat(64), `attachments/none/${id}`, at);
      }
    })();
    done += n;
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
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

async function measure(m: Mailroom, inbox: string, requests: number): Promise<Array<{ p50: number; p99: number; total: number }>> {
  const out = [];
  for (const { q } of QUERIES) {
    const url = `${m.url}/inboxes/${inbox}/messages?limit=20&q=${encodeURIComponent(q)}`;
    const headers = { authorization: `Bearer ${m.key}` };
    let total = 0;
    for (let i = 0; i < 3; i++) await (await fetch(url, { headers })).text();
    const samples: number[] = [];
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now();
      const res = await fetch(url, { headers });
      const body = (await res.json()) as { total: number };
      samples.push(performance.now() - t0);
      if (res.status !== 200) throw new Error(`${q}: ${res.status}`);
      total = body.total;
    }
    const s = summarize(samples);
    log(`${q}: p50 ${s.p50} ms, p99 ${s.p99} ms, ${total} matches`);
    out.push({ p50: s.p50, p99: s.p99, total });
  }
  return out;
}

export async function search(env: { dns: TestDns }): Promise<ScenarioResult> {
  const results: Array<{ size: number; seedSeconds: number; stats: Array<{ p50: number; p99: number; total: number }> }> = [];
  for (const size of SIZES) {
    const first = await startMailroom(`search-${size}`, { dns: env.dns.server });
    const inbox = await createInbox(first);
    await first.stop();
    log(`seeding ${size} messages (with the FTS index)`);
    const seedSeconds = seedSearchCorpus(first.dataDir, accountOfInbox(first.dataDir, inbox.id), inbox.id, size);
    log(`seeded ${size} in ${round(seedSeconds, 1)} s`);
    const m = await startMailroom(`search-${size}`, { dns: env.dns.server, reuseDir: first.dir, key: first.key });
    try {
      results.push({ size, seedSeconds, stats: await measure(m, inbox.id, size > 100_000 ? 40 : 200) });
    } finally {
      await m.stop();
    }
  }
  const rows: Row[] = results.flatMap(({ size, stats }) =>
    QUERIES.map((qf, i) => ({
      metric: `q=${qf.q} (${qf.form}) at ${size.toLocaleString('en-US')} messages, p50`,
      unit: 'ms',
      mailroom: stats[i].p50,
      note: `p99 ${stats[i].p99} ms; ${stats[i].total.toLocaleString('en-US')} matches`,
    })),
  );
  return {
    id: 'search',
    title: '(k) Search: q on a 10⁴ and a 10⁶ message inbox',
    status: 'ok',
    setup: `one inbox of ${SIZES.map((s) => s.toLocaleString('en-US')).join(' or ')} messages bulk-inserted with the FTS index kept by its triggers (${results.map((r) => `${r.size.toLocaleString('en-US')}: ${round(r.seedSeconds)} s`).join(', ')}); 20-word bodies over a 5,000-word skewed vocabulary, an attachment on one message in ten; GET /inboxes/{id}/messages?limit=20&q=…, one request at a time (${results.map((r) => (r.size > 100_000 ? 40 : 200)).join(' / ')} per form after 3 warm-up)`,
    rows,
    details: { results },
  };
}
