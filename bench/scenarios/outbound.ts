// (c) Outbound: N sends through POST /inboxes/{id}/messages, delivered with DKIM (the shared
// domain's key) to smtp-sink found as the MX of the recipient domain through a local DNS
// server; the clock runs from the first POST until every message reads `sent`. Baselines: a
// bare nodemailer pool to the same sink with the same connection count, with and without DKIM.
// BENCH_ENGINE=postgres runs mailroom on a private durable PostgreSQL cluster (fsync on)
// instead of embedded SQLite. The CPU the server (and the cluster) used per send is reported
// too: unlike the rate, it stays comparable when other work competes for the machine.
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { chmodSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { configFrom } from '../../src/config.ts';
import type { TestDns } from '../../test/support/dns.ts';
import { postgresMissing, startCluster, type PgCluster } from '../../test/support/postgres.ts';
import { createInbox, startMailroom } from '../mailroom.ts';
import { judge } from '../targets.ts';
import {
  SMTP_SINK,
  SMTP_SOURCE,
  SkipError,
  WORK,
  autocannon,
  cpuMsOf,
  ensurePostfixTools,
  freePort,
  log,
  machineBusyMs,
  round,
  runBounded,
  sleep,
  stopChild,
  track,
  treeCpuMsOf,
  waitFor,
  type ScenarioResult,
} from '../support.ts';

const COUNT = Number(process.env.BENCH_OUTBOUND_COUNT ?? 3000);
const POSTERS = 20;
const DEFAULTS = configFrom({});
/** mailroom's default outbound.concurrency_per_domain; the baseline pool gets the same. */
const CONNECTIONS = DEFAULTS.outbound.concurrency_per_domain;
const BODY = 'Outbound benchmark message. '.repeat(36);
const POSTGRES = process.env.BENCH_ENGINE === 'postgres';

async function startSink(port: number, dumpDir?: string): Promise<ChildProcess> {
  const args = ['-u', 'nobody', ...(dumpDir ? ['-d', `${dumpDir}/%M.`] : []), `127.0.0.1:${port}`, '1024'];
  const sink = track(spawn(SMTP_SINK, args, { stdio: 'ignore' }));
  await waitFor('smtp-sink', async () => (await runBounded(SMTP_SOURCE, ['-m', '1', `127.0.0.1:${port}`], 5000)).code === 0, 5000, 100);
  return sink;
}

async function nodemailerPool(port: number, dkim: boolean): Promise<number> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: CONNECTIONS,
    maxMessages: Infinity,
    ...(dkim ? { dkim: { domainName: 'agents.bench', keySelector: 'bench', privateKey } } : {}),
  });
  const mail = (i: number) => ({ from: 'bench@agents.bench', to: 'rcpt@sink.bench', subject: `bench ${i}`, text: BODY });
  await Promise.all(Array.from({ length: 100 }, (_, i) => transport.sendMail(mail(i))));
  const t0 = performance.now();
  await Promise.all(Array.from({ length: COUNT }, (_, i) => transport.sendMail(mail(i))));
  const rate = COUNT / ((performance.now() - t0) / 1000);
  transport.close();
  return round(rate);
}

export async function outbound(env: { dns: TestDns }): Promise<ScenarioResult> {
  ensurePostfixTools();
  if (!POSTGRES) return measure(env);
  const missing = postgresMissing();
  if (missing) throw new SkipError(missing);
  const cluster = await startCluster({ durable: true });
  try {
    return await measure(env, cluster);
  } finally {
    cluster.stop();
  }
}

/** The postmaster's pid: the first line of postmaster.pid in the cluster's data directory. */
const postmasterOf = (cluster: PgCluster): number => Number(readFileSync(join(cluster.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);

async function measure(env: { dns: TestDns }, cluster?: PgCluster): Promise<ScenarioResult> {
  const sinkPort = await freePort();
  env.dns.set('sink.bench', [{ type: 'MX', exchange: 'mx.sink.bench', priority: 10 }]);
  env.dns.set('mx.sink.bench', [{ type: 'A', address: '127.0.0.1' }]);
  const database = cluster ? { database: { url: await cluster.createDatabase('bench_outbound') } } : {};
  const m = await startMailroom('outbound', { dns: env.dns.server, config: { outbound: { mode: 'email', mx_port: sinkPort }, ...database } });
  const postmaster = cluster && postmasterOf(cluster);
  /** CPU ms so far: the server process, the cluster, the whole machine. */
  const cpuNow = () => ({ server: cpuMsOf(m.pid) ?? NaN, database: postmaster ? (treeCpuMsOf(postmaster) ?? NaN) : 0, machine: machineBusyMs() });
  let sink: ChildProcess | undefined;
  let rate: number;
  let acceptRate: number;
  let dkimSeen: boolean;
  let failed = 0;
  let cpu: { server: number; database: number; machine: number; wall: number };
  try {
    const inbox = await createInbox(m);
    const send = { to: ['rcpt@sink.bench'], subject: 'bench', bodyText: BODY };
    const countOf = async (status: string) => (await m.api('GET', `/inboxes/${inbox.id}/messages?status=${status}&limit=1`)).body?.total as number;
    // Warm-up into a sink that keeps what it gets, to check the mail arrives DKIM-signed.
    const dump = join(WORK, 'outbound', 'sink');
    mkdirSync(dump, { recursive: true });
    chmodSync(dump, 0o777);
    sink = await startSink(sinkPort, dump);
    const probe = await m.api('POST', `/inboxes/${inbox.id}/messages`, send);
    if (probe.status === 404 && probe.body?.error?.code === 'NOT_FOUND') throw new SkipError('sending has not landed (POST /inboxes/{id}/messages is 404)');
    if (probe.status !== 202) throw new Error(`send: ${probe.status} ${JSON.stringify(probe.body)}`);
    for (let i = 0; i < 49; i++) await m.api('POST', `/inboxes/${inbox.id}/messages`, send);
    await waitFor('warm-up sends', async () => (await countOf('sent')) >= 50 || undefined, 60_000, 100);
    const files = readdirSync(dump);
    dkimSeen = files.length > 0 && /^DKIM-Signature:/im.test(readFileSync(join(dump, files[0]), 'utf8'));
    await stopChild(sink);
    sink = await startSink(sinkPort);

    log(`outbound: ${COUNT} sends, ${POSTERS} API connections`);
    const cpu0 = cpuNow();
    const t0 = performance.now();
    const posted = await autocannon(`${m.url}/inboxes/${inbox.id}/messages`, {
      connections: POSTERS,
      seconds: 120,
      amount: COUNT,
      method: 'POST',
      headers: { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(send),
    });
    const accepted = performance.now();
    acceptRate = round(COUNT / ((accepted - t0) / 1000));
    if (posted.non2xx || posted.errors) throw new Error(`sends refused: ${posted.non2xx} non-2xx, ${posted.errors} errors`);
    await waitFor(
      'all sends to be sent',
      async () => {
        failed = await countOf('failed');
        const queued = (await countOf('queued')) + (await countOf('sending'));
        return queued === 0 || undefined;
      },
      180_000,
      50,
    );
    const wall = performance.now() - t0;
    const cpu1 = cpuNow();
    cpu = { server: cpu1.server - cpu0.server, database: cpu1.database - cpu0.database, machine: cpu1.machine - cpu0.machine, wall };
    const sent = (await countOf('sent')) - 50;
    rate = round(sent / (wall / 1000));
    log(
      `outbound ${rate} msg/s end to end (${sent} sent, ${failed} failed); API accepted ${acceptRate}/s; CPU per send: server ${round(cpu.server / COUNT, 2)} ms, database ${round(cpu.database / COUNT, 2)} ms; machine ${round(cpu.machine / wall, 2)} cores busy`,
    );
  } finally {
    await m.stop();
    if (sink) await stopChild(sink);
  }
  await sleep(200);
  sink = await startSink(sinkPort);
  let plain: number;
  let signed: number;
  try {
    plain = await nodemailerPool(sinkPort, false);
    signed = await nodemailerPool(sinkPort, true);
  } finally {
    await stopChild(sink);
  }
  log(`nodemailer pool ${plain} msg/s, with DKIM ${signed} msg/s`);
  const engine = cluster ? 'PostgreSQL (private durable cluster on loopback, fsync on)' : 'embedded SQLite';
  const perSend = (ms: number) => round(ms / COUNT, 2);
  return {
    id: 'outbound',
    title: `(c) Outbound with DKIM to one MX${cluster ? ', on PostgreSQL' : ''}`,
    status: 'ok',
    setup: `mailroom on ${engine}; ${COUNT} sends (after 50 warm-up) POSTed by autocannon over ${POSTERS} connections, one recipient each at a domain whose MX (local DNS) is smtp-sink; mailroom defaults: outbound.concurrency_per_domain ${CONNECTIONS}, jobs.concurrency ${DEFAULTS.jobs.concurrency}; timed from the first POST until no message is queued or sending. DKIM signature ${dkimSeen ? 'checked present' : 'NOT found'} in the warm-up mail. Baselines: nodemailer pool (${CONNECTIONS} connections, reused) sending the same mail straight to the sink`,
    rows: [
      {
        metric: 'sends delivered per second (POST → sent)',
        unit: 'msg/s',
        mailroom: rate,
        baselines: [
          { name: 'nodemailer pool, no DKIM', value: plain },
          { name: 'nodemailer pool, DKIM', value: signed },
        ],
        ...judge('outbound', rate),
        note: failed ? `${failed} failed` : undefined,
      },
      { metric: 'sends accepted by the API per second (202)', unit: 'msg/s', mailroom: acceptRate },
      {
        metric: `CPU per send, POST to sent (server process${cluster ? ' + database' : ''})`,
        unit: 'ms',
        mailroom: perSend(cpu.server + cpu.database),
        note: `${cluster ? `server ${perSend(cpu.server)} ms, database ${perSend(cpu.database)} ms; ` : ''}machine ${round(cpu.machine / cpu.wall, 2)} cores busy meanwhile`,
      },
    ],
  };
}
