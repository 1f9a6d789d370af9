// Failure paths a code review found (issue 27): each test fails on the code before its fix.
// Deleted webhooks' queued retries, control characters decoded from encoded words, and the
// storage/job/database failure paths below.
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { startReceiver } from '../support/receiver.ts';
import { onEngine, startTestServer, testDatabaseUrl, TEST_ENGINE } from '../support/server.ts';
import { existsSync, mkdtempSync, promises as fsp, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createNetServer, type Socket } from 'node:net';
import { rawRows, rawRun } from '../../src/store/store.ts';
import type { Logger, LogFields } from '../../src/log.ts';
import { emitEvent } from '../support/events.ts';
import { guard, until } from '../support/wait.ts';
import { enqueueJob, getJob, listJobs, retry } from '../../src/jobs/table.ts';
import { createJobRunner, type JobHandler } from '../../src/jobs/runner.ts';
import { configFrom } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { silentLogger } from '../../src/log.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { startOutboundRig } from '../support/outbound.ts';
import { startTestDns } from '../support/dns.ts';
import { analysisTasksOnThreads, analysisWorkerCount, killAnalysisWorkers } from '../../src/domain/inbound/analysis.ts';

const b64 = (s: string) => `=?UTF-8?B?${Buffer.from(s, 'utf8').toString('base64')}?=`;
const storedId = (text: string) => /stored as (msg_\S+)/.exec(text)?.[1];

/** One message over raw SMTP (exact bytes); returns the 250 reply's message id. */
async function sendRaw(port: number, to: string, raw: string, from = 'sender@example.org'): Promise<string> {
  const { client, greeting } = await SmtpClient.open(port);
  assert.equal(greeting.code, 220);
  assert.equal((await client.cmd('EHLO mta.example.org')).code, 250);
  const r = await client.send(from, [to], Buffer.from(raw, 'utf8'));
  await client.quit();
  assert.equal(r.code, 250, r.text);
  return storedId(r.text)!;
}

test('a deleted webhook receives no queued retry: the retry is dropped and logged with the reason', async () => {
  const rx = await startReceiver(200);
  const t = await startTestServer({ webhooks: { allow_insecure_targets: true, retry_schedule: ['200ms', '200ms'], timeout: '2s' } });
  try {
    const w = (await t.api('POST', '/webhooks', { url: `${rx.url}/gone` })).body;
    rx.script(503);
    await emitEvent(t.server.ctx, t.accountId, 'message.delivered', { id: 'msg_before_delete' });
    await rx.waitFor(1);
    assert.equal((await t.api('DELETE', `/webhooks/${w.id}`)).status, 204);
    const logs = await until('the retry to be dropped', async () => {
      const l = (await t.api('GET', `/webhooks/logs?webhookId=${w.id}`)).body.data as any[];
      return l.length === 2 ? l : undefined;
    });
    assert.deepEqual(
      logs.map((e) => [e.attempt, e.status, e.httpStatus, e.error]),
      [
        [2, 'failed', null, 'webhook deleted: delivery dropped'],
        [1, 'failed', 503, 'HTTP 503'],
      ],
    );
    assert.equal((await listJobs(t.server.ctx, ['queued', 'running'])).length, 0, 'no retry left queued');
    assert.equal(rx.received.length, 1, 'the receiver got nothing after the deletion');
  } finally {
    await t.close();
    await rx.close();
  }
});

test('CR, LF and other controls decoded from RFC 2047 encoded words are not stored in the subject or the sender name', async () => {
  const t = await startTestServer();
  try {
    const inbox = (await t.api('POST', '/inboxes', { address: 'ctl' })).body;
    const raw =
      `From: ${b64('Eve\r\nX-Injected: 1')} <eve@example.org>\r\nTo: ${inbox.address}\r\n` +
      `Subject: ${b64('Invoice\r\nBcc: victim@example.org\u0000\u2028end')}\r\nMessage-ID: <ctl@example.org>\r\n\r\nbody\r\n`;
    const id = await sendRaw(t.server.smtpPort, inbox.address, raw);
    const got = await t.api('GET', `/messages/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.body.subject, 'Invoice Bcc: victim@example.org end');
    assert.equal(got.body.fromName, 'Eve X-Injected: 1');
    const listed = (await t.api('GET', `/inboxes/${inbox.id}/messages`)).body.data[0];
    assert.equal(listed.subject, 'Invoice Bcc: victim@example.org end');
  } finally {
    await t.close();
  }
});

test('a job attempt has a deadline: a tarpitting MX is cut off at jobs.attempt_timeout, the recipient deferred and retried', async () => {
  const rig = await startOutboundRig();
  // outbound.timeout (the socket's) far above the deadline: only the attempt's deadline can end it.
  const t = await rig.start({ overrides: { outbound: { mode: 'email', mx_port: rig.mx.port, retry_schedule: ['200ms'], timeout: '10m' }, jobs: { attempt_timeout: '1s' } } });
  try {
    const inbox = (await t.api('POST', '/inboxes', { address: 'tarpit-sender' })).body;
    // The MX holds the first attempt's RCPT reply for ever; the second attempt is answered 250.
    rig.mx.script('slow@remote.test', ['hold', '250']);
    const sent = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['slow@remote.test'], subject: 'tarpit', bodyText: 'hello' });
    assert.equal(sent.status, 202, sent.text);
    await rig.mx.held('slow@remote.test');
    const done = await until(
      'the send to finish after the deadline cut the tarpit',
      async () => {
        const m = (await t.api('GET', `/messages/${sent.body.id}`)).body;
        return m.status === 'sent' ? m : undefined;
      },
      20_000,
    );
    assert.equal(done.recipients[0].status, 'sent');
    assert.equal(rig.mx.attempts('slow@remote.test'), 2);
    const [job] = (await listJobs(t.server.ctx, ['done'])).filter((j) => j.kind === 'send');
    assert.equal(job.attempts, 2);
    assert.match(job.lastError ?? '', /^1 recipient\(s\) deferred: attempt ran past jobs\.attempt_timeout \(1000 ms\); connection closed/);
  } finally {
    await t.close();
    await rig.close();
  }
});

/**
 * A server whose analysis threads wait on DNS for `silent.example` (never answered within the
 * test), so a message from there is held on a thread until it is stopped; example.org passes SPF.
 */
async function analysisServer(smtp: Record<string, unknown>) {
  const dns = await startTestDns();
  dns.blackhole('silent.example');
  dns.blackhole('_dmarc.silent.example');
  dns.set('example.org', [{ type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 -all' }]);
  const t = await startTestServer({ smtp: { analysis_workers: 1, ...smtp }, dns: { servers: [dns.server], timeout: '60s' } });
  const inbox = (await t.api('POST', '/inboxes', { address: 'analysed' })).body;
  const send = (from: string, subject: string) =>
    sendRaw(t.server.smtpPort, inbox.address, `From: ${from}\r\nTo: ${inbox.address}\r\nSubject: ${subject}\r\nMessage-ID: <${subject.replace(/\W/g, '-')}@x>\r\n\r\nthe body of ${subject}\r\n`, from);
  const read = async (id: string) => (await t.api('GET', `/messages/${id}`)).body;
  const close = async () => {
    await t.close();
    await dns.close();
  };
  return { t, send, read, close };
}

const heldOnThread = () => until('a message held on an analysis thread', () => (analysisTasksOnThreads() > 0 ? true : undefined), 20_000);

test('a message on two analysis threads that died is stored unanalysed, never analysed on the main thread', async () => {
  const s = await analysisServer({});
  try {
    const sending = s.send('x@silent.example', 'poison');
    await heldOnThread();
    await killAnalysisWorkers();
    // Tried once more, on a fresh thread (the death may have been another message's).
    await heldOnThread();
    await killAnalysisWorkers();
    const m = await s.read(await sending);
    assert.equal(m.subject, 'poison');
    assert.equal(m.bodyText, null, 'not parsed: the main thread did not analyse it');
    assert.deepEqual(m.authentication, { spf: 'permerror', dkim: 'permerror', dmarc: 'permerror' });
    const raw = await s.t.api('GET', `/messages/${m.id}/raw`);
    assert.match(raw.text, /the body of poison/);
  } finally {
    await s.close();
  }
});

test('smtp.analysis_timeout: a message whose analysis runs past it is stored unanalysed, and the next is analysed on a thread', async () => {
  const s = await analysisServer({ analysis_timeout: '5s' });
  try {
    const m = await s.read(await s.send('x@silent.example', 'too slow'));
    assert.equal(m.subject, 'too slow');
    assert.equal(m.bodyText, null);
    assert.deepEqual(m.authentication, { spf: 'permerror', dkim: 'permerror', dmarc: 'permerror' });
    // The next one only has to be analysed, on the thread that replaces the stopped one: its
    // deadline is raised, since that thread's start (it loads the parsers) can take more than
    // 5 s on a loaded machine. The first one's never-answered lookup ran past any deadline.
    s.t.config.smtp.analysis_timeout = guard(60_000);
    const next = await s.read(await s.send('bob@example.org', 'quick one'));
    assert.equal(next.bodyText, 'the body of quick one');
    assert.equal(next.authentication.spf, 'pass');
  } finally {
    await s.close();
  }
});

test('the analysis pool restarts threads after any number of deaths (with backoff) instead of giving up', async () => {
  const s = await analysisServer({ analysis_timeout: '20s' });
  try {
    // The pool used to give up for good after five deaths in a row.
    const held: Promise<string>[] = [];
    for (let i = 0; i < 6; i++) {
      held.push(s.send('x@silent.example', `held ${i}`));
      await heldOnThread();
      await killAnalysisWorkers();
    }
    const m = await s.read(await s.send('bob@example.org', 'after six deaths'));
    assert.equal(m.bodyText, 'the body of after six deaths');
    assert.equal(m.authentication.spf, 'pass');
    assert.ok(analysisWorkerCount() >= 1, 'analysed on a thread again');
    // Every message answered 250 is stored.
    for (const id of await Promise.all(held)) assert.equal((await s.t.api('GET', `/messages/${id}`)).status, 200);
  } finally {
    await s.close();
  }
});

/** A logger that keeps its lines (level, message, fields) for assertions. */
function keptLog(): Logger & { lines: Array<{ level: string; msg: string; fields?: LogFields }> } {
  const lines: Array<{ level: string; msg: string; fields?: LogFields }> = [];
  return {
    lines,
    info: (msg, fields) => void lines.push({ level: 'info', msg, fields }),
    warn: (msg, fields) => void lines.push({ level: 'warn', msg, fields }),
    error: (msg, fields) => void lines.push({ level: 'error', msg, fields }),
  };
}

test('database.connect_timeout: a PostgreSQL server that accepts and never answers fails the start instead of hanging it', async () => {
  const sockets = new Set<Socket>();
  const silent = createNetServer((s) => void sockets.add(s));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const port = (silent.address() as { port: number }).port;
  try {
    const starting = startTestServer({ database: { url: `postgres://mailroom:x@127.0.0.1:${port}/mailroom`, connect_timeout: '1s' } });
    // Only a guard against a hang (the old behaviour); the start fails long before it.
    const hang = new Promise((_, reject) => setTimeout(() => reject(new Error('the start still hangs')), 30_000).unref());
    await assert.rejects(Promise.race([starting, hang]), /timeout/i);
  } finally {
    for (const s of sockets) s.destroy();
    silent.close();
  }
});

onEngine('postgres').test('PostgreSQL: statement and idle-in-transaction timeouts reach the server, a long statement fails clearly, a lost connection is logged', async () => {
  const log = keptLog();
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-pg-limits-'));
  const url = await testDatabaseUrl(dataDir);
  const t = await startTestServer({ database: { url, statement_timeout: '1500ms', idle_in_transaction_timeout: '7s', keepalive: '15s' } }, { log, dataDir });
  try {
    const db = t.server.ctx.db;
    assert.deepEqual(await rawRows(db, 'SHOW statement_timeout'), [['1500ms']]);
    assert.deepEqual(await rawRows(db, 'SHOW idle_in_transaction_session_timeout'), [['7s']]);
    await assert.rejects(rawRows(db, 'SELECT pg_sleep(10)'), (err: any) => (err.code ?? err.cause?.code) === '57014' && /statement timeout/.test(err.message ?? err.cause?.message));
    // Two pooled connections, then the server ends every other session (a restart, a failover).
    await Promise.all([rawRows(db, 'SELECT pg_sleep(0.2)'), rawRows(db, 'SELECT pg_sleep(0.2)')]);
    await rawRows(db, 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
    await until('the lost connection to be logged', () => log.lines.find((l) => l.level === 'warn' && l.msg === 'database connection lost'));
    assert.deepEqual(await rawRows(db, 'SELECT 1'), [[1]], 'the pool opens a new connection');
  } finally {
    await t.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

onEngine('postgres').test('PostgreSQL: a request whose statement runs past database.statement_timeout answers 503 SERVICE_UNAVAILABLE with Retry-After, not 500', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-pg-503-'));
  const url = await testDatabaseUrl(dataDir);
  const t = await startTestServer({ database: { url, statement_timeout: '1s' } }, { dataDir });
  const { default: pg } = await import('pg');
  const side = new pg.Client({ connectionString: url });
  await side.connect();
  try {
    const inbox = (await t.api('POST', '/inboxes', { address: 'locked' })).body;
    // Another session holds the table: the server's read waits on the lock until its statement is cancelled.
    await side.query('BEGIN');
    await side.query('LOCK TABLE inboxes IN ACCESS EXCLUSIVE MODE');
    const res = await t.api('GET', `/inboxes/${inbox.id}`);
    assert.equal(res.status, 503, res.text);
    assert.equal(res.body.error.code, 'SERVICE_UNAVAILABLE');
    assert.equal(res.headers.get('retry-after'), '5');
    await side.query('ROLLBACK');
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}`)).status, 200);
  } finally {
    await side.end();
    await t.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

onEngine('postgres').test('PostgreSQL: a transaction ended by a deadlock is run again, and both transactions commit', async () => {
  const t = await startTestServer();
  try {
    const { store, db } = t.server.ctx;
    await rawRun(db, 'CREATE TABLE deadlock_probe (id integer PRIMARY KEY, v integer NOT NULL)');
    await rawRun(db, 'INSERT INTO deadlock_probe VALUES (1, 0), (2, 0)');
    // Each locks one row, waits until the other holds its row, then asks for the other's: a deadlock.
    let holding = 0;
    let bothHold!: () => void;
    const both = new Promise<void>((r) => (bothHold = r));
    let runs = 0;
    const crosswise = (first: number, second: number) =>
      store.transaction(async (tx) => {
        runs++;
        await rawRun(tx, 'UPDATE deadlock_probe SET v = v + 1 WHERE id = ?', [first]);
        if (++holding === 2) bothHold();
        await both;
        await rawRun(tx, 'UPDATE deadlock_probe SET v = v + 1 WHERE id = ?', [second]);
      });
    await Promise.all([crosswise(1, 2), crosswise(2, 1)]);
    assert.equal(runs, 3, 'the deadlock victim ran once more');
    assert.deepEqual(await rawRows(db, 'SELECT v FROM deadlock_probe ORDER BY id'), [[2], [2]]);
  } finally {
    await t.close();
  }
});

test('a stored message is answered 250 even when removing its staged file fails afterwards', async () => {
  const t = await startTestServer();
  const staged = join(t.dataDir, 'tmp');
  const realRm = fsp.rm;
  // Removing anything under data_dir/tmp fails (EIO, EBUSY on a flaky disk): only cleanup is hit.
  const rm = mock.method(fsp, 'rm', async (path: string, opts?: object) => {
    if (String(path).startsWith(staged)) throw Object.assign(new Error(`EIO: i/o error, rm '${path}'`), { code: 'EIO' });
    return realRm(path, opts);
  });
  try {
    const inbox = (await t.api('POST', '/inboxes', { address: 'staged' })).body;
    // Past LARGE_MESSAGE_BYTES (1 MiB): staged on disk as it arrives, its staged file discarded after the commit.
    const big = 'x'.repeat(76) + '\r\n';
    const body = big.repeat(Math.ceil(1_300_000 / big.length));
    const id = await sendRaw(t.server.smtpPort, inbox.address, `From: a@example.org\r\nTo: ${inbox.address}\r\nSubject: big staged\r\nMessage-ID: <staged@example.org>\r\n\r\n${body}`);
    assert.ok(
      rm.mock.calls.some((c) => String(c.arguments[0]).startsWith(staged)),
      'the cleanup was attempted (and failed)',
    );
    const m = await t.api('GET', `/messages/${id}`);
    assert.equal(m.status, 200, m.text);
    assert.equal(m.body.subject, 'big staged');
  } finally {
    mock.restoreAll();
    await t.close();
  }
});

// The embedded engine's files.
onEngine('sqlite').test('after DELETE /messages/{id} its body is in neither mailroom.db nor mailroom.db-wal (FTS index included), while the server runs', async () => {
  const t = await startTestServer();
  try {
    const inbox = (await t.api('POST', '/inboxes', { address: 'shredded' })).body;
    // One search token each (the FTS index keeps terms, prefix-compressed: the tail is looked for too).
    const doomed = `zq${randomBytes(16).toString('hex')}`;
    const kept = `zk${randomBytes(16).toString('hex')}`;
    const id = await sendRaw(t.server.smtpPort, inbox.address, `From: a@example.org\r\nTo: ${inbox.address}\r\nSubject: doomed\r\nMessage-ID: <doomed@x>\r\n\r\nthe secret is ${doomed} indeed\r\n`);
    await sendRaw(t.server.smtpPort, inbox.address, `From: a@example.org\r\nTo: ${inbox.address}\r\nSubject: kept\r\nMessage-ID: <kept@x>\r\n\r\nthe other is ${kept} indeed\r\n`);
    const files = ['mailroom.db', 'mailroom.db-wal'].map((f) => join(t.dataDir, f));
    const holding = (token: string) => files.filter((f) => existsSync(f) && [token, token.slice(-20)].some((n) => readFileSync(f).includes(Buffer.from(n))));
    assert.notDeepEqual(holding(doomed), [], 'the scan sees the body before the deletion');
    assert.equal((await t.api('GET', `/messages?q=${doomed}`)).status, 200);

    assert.equal((await t.api('DELETE', `/messages/${id}`)).status, 204);
    assert.deepEqual(holding(doomed), [], 'no byte of the deleted body in the database or its log');
    assert.notDeepEqual(holding(kept), [], 'the other message is still there (the scan can see)');
    assert.equal((await t.api('GET', `/messages?q=${kept}`)).body.data.length, 1, 'search still finds the other message');
  } finally {
    await t.close();
  }
});

test('jobs.attempt_timeout: a handler that honours its signal returns its own outcome; one that ignores it is abandoned as a retry', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-deadline-'));
  const database = TEST_ENGINE === 'postgres' ? { url: await testDatabaseUrl(dir) } : {};
  const ctx = await createContext(configFrom({ data_dir: dir, database, jobs: { attempt_timeout: '1s' } }), silentLogger);
  const aborted: string[] = [];
  const handler: JobHandler = {
    kind: 'stuck',
    schedule: () => [3_600_000],
    run: (_c, job, signal) =>
      new Promise((resolve) =>
        signal.addEventListener('abort', () => {
          aborted.push(job.payload);
          // "polite" stops and says why; "deaf" never settles.
          if (job.payload.includes('polite')) resolve(retry(`stopped: ${(signal.reason as Error).message}`));
        }),
      ),
  };
  const runner = createJobRunner(ctx, [handler]);
  await runner.start();
  try {
    const enqueue = (mode: string) => ctx.store.transaction((tx) => enqueueJob(tx, new Date(), { kind: 'stuck', payload: { mode }, maxAttempts: 2 }));
    const polite = await enqueue('polite');
    const deaf = await enqueue('deaf');
    ctx.notify('jobs');
    // Back in the queue after its first attempt, with the reason of its end.
    const settled = async (id: string) => {
      const job = (await getJob(ctx, id))!;
      return job.status === 'queued' && job.attempts === 1 && job.lastError ? job : undefined;
    };
    const p = await until('the polite job requeued', () => settled(polite), 20_000);
    assert.equal(p.lastError, 'stopped: attempt ran past jobs.attempt_timeout (1000 ms)');
    const d = await until('the deaf job abandoned', () => settled(deaf), 30_000);
    assert.equal(d.lastError, 'attempt ran past jobs.attempt_timeout (1000 ms); abandoned');
    assert.equal(aborted.length, 2, 'both handlers saw their signal abort');
  } finally {
    await runner.stop(100);
    await closeContext(ctx);
    rmSync(dir, { recursive: true, force: true });
  }
});
