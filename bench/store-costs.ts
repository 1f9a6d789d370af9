// The storage costs measured when their fixes were made (2026-11-29), reproduced side by side:
// the old and the new form of each, on this machine. `node bench/store-costs.ts` (PostgreSQL
// parts need Debian's postgresql; they start a private cluster as test/support does).
//   1. SQLite search index: one stored copy of a 20 MB text body, triggers indexing the whole
//      body (migration 0008) against the first 262,144 characters (0023).
//   2. SQLite event feed: "events of the account after id X", 13,000 events, with only
//      (account_id, created_at) against with (account_id, id) (0024).
//   3. PostgreSQL mailroom_words() on 10 KB bodies: translate() (pg/0004) against
//      regexp_replace (pg/0019), server CPU from /proc.
//   4. PostgreSQL 10 KB bytea rows: pglz-compressed against stored uncompressed (pg/0020).
//   5. PostgreSQL: what the generated tsvector of a 10 KB body (pg/0004) adds to an INSERT,
//      with the `mailroom` configuration and with `simple`, on 10 KB of varied words.
//   6. PostgreSQL: what a statement costs the client (this process's CPU, 30,000 of them on one
//      connection), awaited one after another and written 2 and 4 at a time in pg's pipeline
//      mode (src/store/postgres.ts), over loopback TCP and over the Unix socket.
//   7. PostgreSQL: the job claim's lock of 8 listed jobs (src/store/repo/jobs.ts, lockFreeJobs)
//      in a jobs table of 3,000 rows each updated twice, its statistics taken at 300 rows (a
//      burst's table before autovacuum comes by): the IN-list as a set-returning function
//      against `= ANY(ARRAY(…))` (src/store/placeholders.ts), its plan and its server time.
//   8. SQLite search index: batches of 20 messages of 9 KB of text added and the oldest one
//      deleted, FTS5 `secure-delete` on for good (0023) against switched by the triggers (0028),
//      a batch's time (its INSERTs, its DELETE and COMMIT) a message as the index grows.
//   9. SQLite search index with and without FTS5's prefix indexes (prefix='2 3', migration
//      0008): 20,000 messages of 6 KB of varied words, the time of their batches (INSERTs and
//      COMMIT) and the index's size a message, and a two-letter prefix query ranked and newest
//      first.
//  10. PostgreSQL: the message INSERT of mailroom's own schema (every migration) with a body of
//      bench (o)'s smtp-source lines, its autocommitted round trip as it is (the trigger of
//      pg/0023 computes the search column), with the column given as mailroom builds it
//      (src/store/search-vector.ts), with the GIN indexes' fastupdate off, without the GIN
//      indexes, without the search columns; then to_tsvector alone on 10 KB (those lines and
//      varied words) against the bare round trip; then searchVector's time on the main thread.
//  11. PostgreSQL 10 KB text rows (varied words, and bench (o)'s lines): compressed with pglz
//      (the default) against lz4 (pg/0024) and uncompressed, insert and read, server CPU.
import Database from 'better-sqlite3';
import pg from 'pg';
import { readdirSync, readFileSync } from 'node:fs';
import { postgresMissing, startCluster } from '../test/support/postgres.ts';
import { migratePostgres } from '../src/store/migrate.ts';
import { searchVector } from '../src/store/search-vector.ts';

/** Part 10's variant whose INSERT gives the search column as mailroom builds it. */
const LITERAL = "the column given (mailroom's literal)";
const ms = (t0: number) => (performance.now() - t0).toFixed(1);
/**
 * Part 7: rows in the jobs table, as in bench (o)'s bursts (the scans auto_explain logged there
 * read 1,283-2,457 rows; from some 10,000 rows on, the planner probes the index either way).
 */
const JOBS = 3_000;
const COLS = '`subject`, `body_text`';

function ftsInsert(cut: boolean): string {
  const db = new Database(':memory:');
  const body = (v: string) => (cut ? `substr(${v}, 1, 262144)` : v);
  db.exec(`CREATE TABLE messages (subject TEXT, body_text TEXT);
    CREATE VIEW content AS SELECT rowid AS r, subject, ${body('body_text')} AS body_text FROM messages;
    CREATE VIRTUAL TABLE messages_fts USING fts5(${COLS}, content='content', content_rowid='r', tokenize='unicode61 remove_diacritics 2', prefix='2 3');
    CREATE TRIGGER i AFTER INSERT ON messages BEGIN INSERT INTO messages_fts(rowid, ${COLS}) VALUES (NEW.rowid, NEW.subject, ${body('NEW.body_text')}); END;`);
  const text = Array.from({ length: 4_000_000 }, (_, i) => `w${((i * 7919) % 50_000).toString(36)}`).join(' ');
  const t0 = performance.now();
  db.prepare('INSERT INTO messages VALUES (?, ?)').run('hello', text);
  return ms(t0);
}

function eventsRead(index: string): string {
  const db = new Database(':memory:');
  db.exec(`CREATE TABLE events (id TEXT PRIMARY KEY, account_id TEXT, type TEXT, data TEXT, created_at TEXT); CREATE INDEX events_account_created ON events (account_id, created_at); ${index}`);
  const insert = db.prepare('INSERT INTO events VALUES (?, ?, ?, ?, ?)');
  for (let i = 0; i < 13_000; i++) insert.run(`evt_${String(i).padStart(8, '0')}`, 'acc_1', 'message.received', '{"id":"msg"}', new Date(1e12 + i).toISOString());
  const read = db.prepare("SELECT id, type, created_at, data FROM events WHERE account_id = ? AND id > ? AND type IN ('message.received') ORDER BY id LIMIT 100");
  for (let i = 0; i < 50; i++) read.all('acc_1', 'evt_00011700');
  const t0 = performance.now();
  for (let i = 0; i < 200; i++) read.all('acc_1', 'evt_00011700');
  return (Number(ms(t0)) / 200).toFixed(3);
}

/** Part 8: a batch's ms a message (its INSERTs, its DELETE and COMMIT), at each 1,000 messages added, up to 8,000. */
function ftsBatches(secureForGood: boolean): string[] {
  const db = new Database(':memory:');
  const mode = (v: number, table = 'messages_fts') =>
    secureForGood ? '' : `INSERT INTO ${table}(${table}, rank) SELECT 'secure-delete', ${v} WHERE (SELECT v FROM ${table}_config WHERE k = 'secure-delete') IS NOT ${v};`;
  db.exec(`CREATE TABLE messages (subject TEXT, body_text TEXT);
    CREATE VIRTUAL TABLE messages_fts USING fts5(${COLS}, content='messages', tokenize='unicode61 remove_diacritics 2', prefix='2 3');
    INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1);
    CREATE TRIGGER i AFTER INSERT ON messages BEGIN ${mode(0)} INSERT INTO messages_fts(rowid, ${COLS}) VALUES (NEW.rowid, NEW.subject, NEW.body_text); END;
    CREATE TRIGGER d AFTER DELETE ON messages BEGIN ${mode(1)} INSERT INTO messages_fts(messages_fts, rowid, ${COLS}) VALUES ('delete', OLD.rowid, OLD.subject, OLD.body_text); END;`);
  const text = ('The quarterly figures are attached; please review the totals before Friday. '.repeat(2) + '\n').repeat(60);
  const insert = db.prepare('INSERT INTO messages VALUES (?, ?)');
  const remove = db.prepare('DELETE FROM messages WHERE rowid = (SELECT min(rowid) FROM messages)');
  const out: string[] = [];
  let spent = 0;
  for (let n = 0; n < 8_000; n += 20) {
    const t0 = performance.now();
    db.exec('BEGIN');
    for (let i = n; i < n + 20; i++) insert.run(`message ${i}`, `${i} ${text}`);
    remove.run();
    db.exec('COMMIT');
    spent += performance.now() - t0;
    if ((n + 20) % 1_000 === 0) {
      out.push((spent / 1_000).toFixed(3));
      spent = 0;
    }
  }
  return out;
}

/**
 * Part 9: FTS5 with `prefix` (or without, ''): ms a message of batches of 20 INSERTs and their
 * COMMIT, index KB a message, and a two-letter prefix query. Contentless (content=''): like the
 * external content of migration 0023, the index writes no copy of the text.
 */
function ftsPrefix(prefix: string): string {
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const vocab = Array.from({ length: 30_000 }, () => Array.from({ length: 2 + Math.floor(rnd() * 9) }, () => String.fromCharCode(97 + Math.floor(rnd() * 26))).join(''));
  // Frequent words first, as in text: a cube of a uniform draw skews the choice towards the start.
  const word = () => vocab[Math.floor(Math.pow(rnd(), 3) * vocab.length)];
  const bodies = Array.from({ length: 2_000 }, () => {
    let s = '';
    while (s.length < 6_000) s += word() + (rnd() < 0.08 ? '. ' : ' ');
    return s;
  });
  const db = new Database(':memory:');
  db.exec(`CREATE VIRTUAL TABLE f USING fts5(${COLS}, content='', tokenize='unicode61 remove_diacritics 2'${prefix ? `, prefix='${prefix}'` : ''})`);
  const insert = db.prepare('INSERT INTO f (rowid, subject, body_text) VALUES (?, ?, ?)');
  const n = 20_000;
  const t0 = performance.now();
  for (let b = 0; b < n; b += 20) {
    db.exec('BEGIN');
    for (let i = b; i < b + 20; i++) insert.run(i + 1, `subject ${word()}`, bodies[i % bodies.length]);
    db.exec('COMMIT');
  }
  const insertMs = (performance.now() - t0) / n;
  const kb = (db.prepare('SELECT sum(length(block)) FROM f_data').pluck().get() as number) / n / 1024;
  const q = `${vocab[0].slice(0, 2)}*`;
  const query = (order: string) => {
    const st = db.prepare(`SELECT rowid FROM f WHERE f MATCH ? ORDER BY ${order} LIMIT 20`);
    st.all(q);
    const t1 = performance.now();
    for (let i = 0; i < 5; i++) st.all(q);
    return ((performance.now() - t1) / 5).toFixed(1);
  };
  return `${prefix ? `prefix='${prefix}'` : 'no prefix index'}: INSERTs and COMMIT ${insertMs.toFixed(3)} ms and ${kb.toFixed(1)} KB of index a message, '${q}' ranked ${query('rank')} ms, newest first ${query('rowid DESC')} ms`;
}

console.log(`1. search index, one copy of a 20 MB body: whole ${ftsInsert(false)} ms, first 262,144 characters ${ftsInsert(true)} ms`);
console.log(`2. event feed read at 13,000 events: (account_id, created_at) ${eventsRead('')} ms, (account_id, id) ${eventsRead('CREATE INDEX events_account_id ON events (account_id, id);')} ms`);
console.log(
  `8. search index, batches of 20 INSERTs, a DELETE and their COMMIT, ms a message at 1,000 … 8,000 added: secure-delete on for good ${ftsBatches(true).join(' ')}; switched by the triggers ${ftsBatches(false).join(' ')}`,
);
console.log(`9. search index at 20,000 messages of 6 KB: ${ftsPrefix('2 3')}; ${ftsPrefix('')}`);

const missing = postgresMissing();
if (missing) {
  console.log(`3-4 skipped: ${missing}`);
} else {
  const serverCpu = () => {
    let t = 0;
    for (const p of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        if (!readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('postgres')) continue;
        const f = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ');
        t += (Number(f[11]) + Number(f[12])) * 10;
      } catch {}
    }
    return t;
  };
  const cluster = await startCluster({ durable: true });
  const client = new pg.Client({ connectionString: cluster.url() });
  try {
    await client.connect();
    const words = Array.from({ length: 3000 }, (_, i) => `w${((i * 7919) % 5000).toString(36)}`);
    const punct = '@._-/:+~=#%&?!*|\\<>[](){},;"\'`^$';
    const body = () => {
      let s = '';
      while (s.length < 10_240) s += words[(Math.random() * words.length) | 0] + (Math.random() < 0.1 ? punct[(Math.random() * punct.length) | 0] : ' ');
      return s;
    };
    const bodies = Array.from({ length: 1000 }, body);
    const perRow = async (sql: string, rows: unknown[]) => {
      const c0 = serverCpu();
      for (const r of rows) await client.query(sql, [r]);
      return ((serverCpu() - c0) / rows.length).toFixed(3);
    };
    const set = punct.replaceAll("'", "''");
    const was = await perRow(`SELECT length(translate($1::text, '${set}', repeat(' ', 32)))`, bodies);
    const now = await perRow(`SELECT length(regexp_replace($1::text, '[@._/:+~=#%&?!*|\\\\<>\\[\\](){},;"''\`^$-]', ' ', 'g'))`, bodies);
    console.log(`3. mailroom_words on a 10 KB body, server CPU: translate() ${was} ms, regexp_replace ${now} ms`);
    const raw = bodies.map((b) => Buffer.from(b));
    for (const storage of ['MAIN', 'EXTERNAL']) {
      await client.query('DROP TABLE IF EXISTS t; CREATE TABLE t (id serial PRIMARY KEY, raw bytea NOT NULL)');
      await client.query(`ALTER TABLE t ALTER COLUMN raw SET STORAGE ${storage}`);
      const insert = await perRow('INSERT INTO t (raw) VALUES ($1)', raw);
      const read = await perRow(
        'SELECT raw FROM t WHERE id = $1',
        raw.map((_, i) => i + 1),
      );
      console.log(`4. 10 KB bytea, ${storage === 'MAIN' ? 'pglz-compressed' : 'uncompressed'}: insert ${insert} ms, read ${read} ms of server CPU`);
    }
    // smtp-source's body lines (a line number and 78 X's), as bench (o) sends them (parts 10 and 11).
    const lines = Array.from({ length: 128 }, (_, i) => `${i + 1}${'X'.repeat(78)}`).join('\n');
    for (const [label, texts] of [
      ['varied words', bodies],
      ["bench (o)'s lines", bodies.map(() => lines)],
    ] as const) {
      const each: string[] = [];
      for (const method of ['pglz', 'lz4', 'none']) {
        await client.query('DROP TABLE IF EXISTS t; CREATE TABLE t (id serial PRIMARY KEY, body text NOT NULL)');
        await client.query(method === 'none' ? 'ALTER TABLE t ALTER COLUMN body SET STORAGE EXTERNAL' : `ALTER TABLE t ALTER COLUMN body SET COMPRESSION ${method}`);
        const insert = await perRow('INSERT INTO t (body) VALUES ($1)', texts);
        const read = await perRow(
          'SELECT body FROM t WHERE id = $1',
          texts.map((_, i) => i + 1),
        );
        const { rows } = await client.query("SELECT pg_total_relation_size('t') AS size");
        each.push(`${method === 'none' ? 'uncompressed' : method} insert ${insert} ms, read ${read} ms, ${(Number(rows[0].size) / texts.length / 1024).toFixed(1)} KiB a row`);
      }
      console.log(`11. 10 KB text of ${label}, server CPU: ${each.join('; ')}`);
    }
    await client.query(`CREATE EXTENSION IF NOT EXISTS unaccent; CREATE TEXT SEARCH CONFIGURATION mailroom (COPY = simple);
      ALTER TEXT SEARCH CONFIGURATION mailroom ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part, numword, numhword, hword_numpart WITH unaccent, simple`);
    const fts: Array<[string, string]> = [
      ['no tsvector', ''],
      ['tsvector (mailroom)', `, fts tsvector GENERATED ALWAYS AS (to_tsvector('mailroom'::regconfig, body_text)) STORED`],
      ['tsvector (simple)', `, fts tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, body_text)) STORED`],
    ];
    const cost: string[] = [];
    for (const [label, column] of fts) {
      await client.query(`DROP TABLE IF EXISTS m; CREATE TABLE m (id serial PRIMARY KEY, body_text text${column})`);
      cost.push(`${label} ${await perRow('INSERT INTO m (body_text) VALUES ($1)', bodies)} ms`);
    }
    console.log(`5. INSERT of a 10 KB body, server CPU: ${cost.join(', ')}`);
    const socket = `postgres://mailroom@localhost/postgres?host=${encodeURIComponent(cluster.dir)}&port=${cluster.port}`;
    for (const [over, url] of [
      ['TCP', cluster.url()],
      ['Unix socket', socket],
    ]) {
      const each: string[] = [];
      for (const together of [1, 2, 4]) {
        const c = new pg.Client({ connectionString: url, pipeline: together > 1 });
        await c.connect();
        const n = 30_000;
        const c0 = process.cpuUsage();
        for (let i = 0; i < n; i += together) {
          await Promise.all(Array.from({ length: together }, (_, k) => c.query({ name: 'one', text: 'SELECT $1::int', values: [i + k], rowMode: 'array' })));
        }
        const used = process.cpuUsage(c0);
        each.push(`${together === 1 ? 'one at a time' : `${together} together`} ${((used.user + used.system) / n).toFixed(1)} µs`);
        await c.end();
      }
      console.log(`6. a statement's client CPU over ${over}: ${each.join(', ')}`);
    }
    await client.query(`CREATE TABLE jobs (id text PRIMARY KEY, status text NOT NULL, payload text NOT NULL, run_at bigint NOT NULL, lease_until bigint) WITH (autovacuum_enabled = false)`);
    const addJobs = (from: number, to: number) => client.query(`INSERT INTO jobs SELECT 'job_' || i, 'queued', repeat('x', 200), i, NULL FROM generate_series(${from}, ${to}) i`);
    await addJobs(1, 300);
    await client.query('ANALYZE jobs');
    await addJobs(301, JOBS);
    for (let k = 0; k < 2; k++) await client.query('UPDATE jobs SET lease_until = run_at + 1');
    const listed = JSON.stringify(Array.from({ length: 8 }, (_, i) => `job_${1 + ((i * 379) % JOBS)}`));
    for (const [label, where] of [
      ['IN (SELECT value FROM json_array_elements_text($1))', 'id IN (SELECT value FROM json_array_elements_text($1))'],
      ['= ANY(ARRAY(SELECT json_array_elements_text($1)))', 'id = ANY(ARRAY(SELECT json_array_elements_text($1)))'],
    ]) {
      const text = `SELECT id FROM jobs WHERE ${where} FOR UPDATE SKIP LOCKED`;
      const times: number[] = [];
      let plan = '';
      for (let i = 0; i < 200; i++) {
        await client.query('BEGIN');
        const [explained] = (await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, [listed])).rows[0]['QUERY PLAN'] as Array<{ 'Execution Time': number; 'Planning Time': number }>;
        plan = JSON.stringify(explained);
        times.push(explained['Planning Time'] + explained['Execution Time']);
        await client.query('ROLLBACK');
      }
      const scan = plan.includes('"Seq Scan"') ? 'scans the table' : plan.includes('jobs_pkey') ? 'probes the primary key' : 'another plan';
      console.log(
        `7. the claim's lock in ${JOBS.toLocaleString('en')} jobs, id ${label}: ${scan}, ${times.sort((a, b) => a - b)[100]!.toFixed(3)} ms of the server's (planning and execution, median of 200)`,
      );
    }
    const insertCosts: string[] = [];
    for (const [label, change] of [
      ['as it is (the trigger computes the search column)', ''],
      [LITERAL, ''],
      ['GIN fastupdate off', 'ALTER INDEX messages_fts SET (fastupdate = off); ALTER INDEX messages_fts_cc SET (fastupdate = off)'],
      ['no GIN indexes', 'DROP INDEX messages_fts; DROP INDEX messages_fts_cc'],
      ['no search columns', 'ALTER TABLE messages DROP COLUMN fts CASCADE; ALTER TABLE messages DROP COLUMN fts_cc'],
    ]) {
      const pool = new pg.Pool({ connectionString: await cluster.createDatabase(), max: 1 });
      try {
        await migratePostgres(pool);
        const c = await pool.connect();
        try {
          if (change) await c.query(change);
          const now = new Date().toISOString();
          await c.query("INSERT INTO accounts (id, name, created_at) VALUES ('acc', 'a', $1)", [now]);
          await c.query("INSERT INTO inboxes (id, account_id, address, daily_send_limit, created_at) VALUES ('inb', 'acc', 'x@example.org', 100, $1)", [now]);
          let spent = 0;
          for (let i = 0; i < 3_000; i++) {
            await c.query("INSERT INTO threads (id, account_id, inbox_id, subject, message_count, last_message_at, created_at) VALUES ($1, 'acc', 'inb', 's', 1, $2, $2)", [`thr${i}`, now]);
            const given = label === LITERAL;
            const t0 = performance.now();
            const vector = given ? searchVector({ subject: `message ${i}`, fromAddress: 'a@example.org', fromName: null, toAddresses: '["x@example.org"]', ccAddresses: '[]', bodyText: lines }) : null;
            await c.query({
              name: given ? 'message with its column' : 'message',
              text: `INSERT INTO messages (id, account_id, inbox_id, thread_id, direction, from_address, to_addresses, subject, body_text, status, message_id_header, size, created_at, updated_at${given ? ', fts' : ''})
                     VALUES ($1, 'acc', 'inb', $2, 'inbound', 'a@example.org', '["x@example.org"]', $3, $4, 'received', $5, 10240, $6, $6${given ? ', $7' : ''})`,
              values: [`msg${i}`, `thr${i}`, `message ${i}`, lines, `<${i}@x>`, now, ...(given ? [vector] : [])],
            });
            spent += performance.now() - t0;
          }
          insertCosts.push(`${label} ${(spent / 3_000).toFixed(2)} ms`);
        } finally {
          c.release();
        }
      } finally {
        await pool.end();
      }
    }
    console.log(`10. the message INSERT, autocommitted round trip, mailroom's schema, 3,000 rows: ${insertCosts.join(', ')}`);
    const parsed: string[] = [];
    for (const [label, body] of [
      ["smtp-source's lines", lines],
      ['varied words', bodies[0]!],
    ]) {
      for (const expr of ['length($1::text)', "length(to_tsvector('simple', $1))", "length(to_tsvector('mailroom', $1))"]) {
        const q = { name: `${label} ${expr}`, text: `SELECT ${expr}`, values: [body] };
        for (let i = 0; i < 50; i++) await client.query(q);
        const t0 = performance.now();
        for (let i = 0; i < 500; i++) await client.query(q);
        parsed.push(`${label}, ${expr}: ${((performance.now() - t0) / 500).toFixed(2)} ms`);
      }
    }
    console.log(`10. round trips on 10 KB: ${parsed.join('; ')}`);
    // What searchVector costs mailroom's main thread, on those lines and on varied words.
    const built: string[] = [];
    for (const [label, body] of [
      ["smtp-source's lines", lines],
      ['10 KB of varied words', bodies[0]!],
      ['64 KiB of varied words', bodies.join(' ').slice(0, 65_000)],
    ]) {
      const f = { subject: 'message', fromAddress: 'a@example.org', fromName: null, toAddresses: '[]', ccAddresses: '[]', bodyText: body };
      if (searchVector(f) === null) throw new Error(`searchVector left ${label} to the server`);
      for (let i = 0; i < 500; i++) searchVector(f);
      // As many calls as fit in a second (at least 200): a 10 KB text takes about 0.1 ms.
      const t0 = performance.now();
      let calls = 0;
      while (calls < 200 || performance.now() - t0 < 1000) (searchVector(f), calls++);
      built.push(`${label} ${((performance.now() - t0) / calls).toFixed(3)} ms`);
    }
    console.log(`10. the search column built by mailroom (searchVector), main thread: ${built.join(', ')}`);
  } finally {
    await client.end();
    cluster.stop();
  }
}
