// (a) Durable SMTP ingest and (f) memory: Postfix's smtp-source drives 50 parallel sessions,
// each reusing its connection (-d), of 10 KB messages into mailroom (every 250 = on disk),
// then into smtp-sink and a bare smtp-server that both discard. Mailroom's count of stored
// messages is checked afterwards; RSS is read from /proc while idle and at peak.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestDns } from '../../test/support/dns.ts';
import { createInbox, startMailroom } from '../mailroom.ts';
import { judge } from '../targets.ts';
import { postfixMaildir } from '../postfix.ts';
import {
  SMTP_SINK,
  ROOT,
  SMTP_SOURCE,
  WORK,
  cpuMsOf,
  ensurePostfixTools,
  freePort,
  log,
  memoryOf,
  round,
  runBounded,
  sleep,
  startBaseline,
  stopChild,
  track,
  waitFor,
  type ScenarioResult,
} from '../support.ts';

export const SESSIONS = 50;
export const MESSAGE_BYTES = 10_240;
const COUNT = Number(process.env.BENCH_SMTP_COUNT ?? 10_000);
const WARMUP = 500;
const LIMIT_MS = 150_000;

interface Blast {
  msgPerSec: number;
  seconds: number;
  sent: number;
  timedOut: boolean;
  /** CPU time of the receiving process (all its threads) per message, in ms. */
  cpuMsPerMsg?: number;
  error?: string;
}

/** One smtp-source run: `count` messages over `sessions` reused connections. */
export async function blast(port: number, to: string, count: number, sessions = SESSIONS, pid?: number): Promise<Blast> {
  const cpuBefore = pid === undefined ? undefined : cpuMsOf(pid);
  const args = ['-d', '-s', String(sessions), '-m', String(count), '-l', String(MESSAGE_BYTES), '-f', 'load@source.bench', '-t', to, '-S', 'bench message', '-M', 'source.bench', `127.0.0.1:${port}`];
  const res = await runBounded(SMTP_SOURCE, args, LIMIT_MS);
  const seconds = res.ms / 1000;
  const error = res.code !== 0 ? (res.stderr.trim().split('\n').pop() ?? `exit ${res.code}`) : undefined;
  const cpuAfter = pid === undefined ? undefined : cpuMsOf(pid);
  const cpuMsPerMsg = cpuBefore !== undefined && cpuAfter !== undefined ? round((cpuAfter - cpuBefore) / count, 3) : undefined;
  return { msgPerSec: round(count / seconds), seconds: round(seconds, 2), sent: count, timedOut: res.timedOut, cpuMsPerMsg, error };
}

const HARAKA_DIR = join(ROOT, 'bench', 'baselines', 'haraka');
const HARAKA_BIN = join(HARAKA_DIR, 'node_modules', '.bin', 'haraka');

/**
 * Haraka 3.3 (Node, the issue's reference MTA) with its discard queue: installed on first use
 * from bench/baselines/haraka's lockfile; an instance directory in bench/work/haraka accepts
 * any recipient of bare.bench, logs errors only and discards every message.
 */
async function startHaraka(): Promise<{ child: ChildProcess; port: number } | { skipped: string }> {
  if (!existsSync(HARAKA_BIN)) {
    log('installing Haraka for the baseline (bench/baselines/haraka, npm ci)');
    const res = await runBounded('npm', ['ci', '--prefix', HARAKA_DIR, '--no-audit', '--no-fund'], 300_000);
    if (res.code !== 0 || !existsSync(HARAKA_BIN)) return { skipped: `Haraka could not be installed: ${res.stderr.trim().split('\n').pop()}` };
  }
  const inst = join(WORK, 'haraka');
  const port = await freePort();
  // `haraka -i` writes an instance with the default config files; then ours replace five.
  if (!existsSync(join(inst, 'config', 'connection.ini'))) {
    rmSync(inst, { recursive: true, force: true });
    const made = await runBounded(HARAKA_BIN, ['-i', inst], 60_000);
    if (made.code !== 0) return { skipped: `haraka -i failed: ${made.stderr.trim().split('\n').pop()}` };
  }
  const files: Record<string, string> = {
    'smtp.ini': `listen=127.0.0.1:${port}\nnodes=0\n`,
    plugins: 'rcpt_to.in_host_list\nqueue/discard\n',
    host_list: 'bare.bench\n',
    'log.ini': '[main]\nlevel=error\n',
    me: 'haraka.bench\n',
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(inst, 'config', name), text);
  // queue/discard only discards when told to, by this variable.
  const child = track(spawn(HARAKA_BIN, ['-c', inst], { stdio: 'ignore', env: { ...process.env, YES_REALLY_DO_DISCARD: '1' } }));
  await waitFor('Haraka to listen', async () => (await runBounded(SMTP_SOURCE, ['-m', '1', '-t', 'x@bare.bench', `127.0.0.1:${port}`], 5000)).code === 0, 30_000, 200);
  return { child, port };
}

export async function smtpIngest(env: { dns: TestDns }): Promise<ScenarioResult[]> {
  ensurePostfixTools();
  const setup = `smtp-source -d (connection reuse), ${SESSIONS} parallel sessions, ${COUNT} messages of ${MESSAGE_BYTES} bytes body, 1 recipient each; ${WARMUP} warm-up messages first`;

  // ---- mailroom ----
  const m = await startMailroom('smtp', { dns: env.dns.server });
  let idleRss: number | undefined;
  let mailroom: Blast;
  let stored = 0;
  let processedSeconds = 0;
  let peak = 0;
  let peakSampled = 0;
  /** CPU of the server (all threads) from the first message to the last one visible, per message. */
  let endToEndCpuMs: number | undefined;
  try {
    const inbox = await createInbox(m);
    await sleep(3000);
    idleRss = memoryOf(m.pid)?.rssMb;
    log(`mailroom idle RSS ${idleRss} MB; warm-up`);
    await blast(m.smtpPort, inbox.address, WARMUP, 10);
    log(`mailroom: ${COUNT} messages, ${SESSIONS} sessions`);
    const sampler = setInterval(() => {
      const mem = memoryOf(m.pid);
      if (mem) peakSampled = Math.max(peakSampled, mem.rssMb);
    }, 100);
    const t0 = performance.now();
    const cpu0 = cpuMsOf(m.pid);
    mailroom = await blast(m.smtpPort, inbox.address, COUNT, SESSIONS, m.pid);
    // Mail spooled under the burst is processed after its 250: wait until every message is
    // visible in the API (bounded), and report that rate too.
    const visible = async () => ((await m.api('GET', `/inboxes/${inbox.id}/messages?limit=1`)).body?.total ?? 0) - WARMUP;
    const deadline = performance.now() + LIMIT_MS;
    while ((stored = await visible()) < COUNT && performance.now() < deadline) await sleep(100);
    processedSeconds = (performance.now() - t0) / 1000;
    const cpu1 = cpuMsOf(m.pid);
    if (cpu0 !== undefined && cpu1 !== undefined && stored > 0) endToEndCpuMs = round((cpu1 - cpu0) / stored, 3);
    clearInterval(sampler);
    peak = memoryOf(m.pid)?.peakMb ?? peakSampled;
    if (stored < COUNT) log(`mailroom: only ${stored} of ${COUNT} messages visible after ${round(processedSeconds)} s`);
  } finally {
    await m.stop();
  }
  log(
    `mailroom ${mailroom.msgPerSec} msg/s accepted, all ${stored} visible after ${round(processedSeconds, 2)} s, ${mailroom.cpuMsPerMsg} ms CPU/msg accepting, ${endToEndCpuMs} ms CPU/msg accepted and processed`,
  );

  // ---- smtp-sink (Postfix's discard server, C) ----
  const sinkPort = await freePort();
  const sink = track(spawn(SMTP_SINK, ['-u', 'nobody', `127.0.0.1:${sinkPort}`, '1024'], { stdio: 'ignore' }));
  let sinkRun: Blast;
  try {
    await waitFor('smtp-sink', async () => (await runBounded(SMTP_SOURCE, ['-m', '1', `127.0.0.1:${sinkPort}`], 5000)).code === 0, 5000, 100);
    await blast(sinkPort, 'x@sink.bench', WARMUP, 10);
    sinkRun = await blast(sinkPort, 'x@sink.bench', COUNT, SESSIONS, sink.pid);
  } finally {
    await stopChild(sink);
  }
  log(`smtp-sink ${sinkRun.msgPerSec} msg/s, ${sinkRun.cpuMsPerMsg} ms CPU/msg`);

  // ---- bare smtp-server, discarding ----
  const bare = await startBaseline('smtp-discard.ts');
  let bareRun: Blast;
  try {
    await blast(bare.port, 'x@bare.bench', WARMUP, 10);
    bareRun = await blast(bare.port, 'x@bare.bench', COUNT, SESSIONS, bare.child.pid);
  } finally {
    await stopChild(bare.child);
  }
  log(`bare smtp-server ${bareRun.msgPerSec} msg/s, ${bareRun.cpuMsPerMsg} ms CPU/msg`);

  // ---- Haraka with its discard queue ----
  let harakaRun: Blast | undefined;
  const haraka = await startHaraka();
  if ('skipped' in haraka) {
    log(`Haraka baseline skipped: ${haraka.skipped}`);
  } else {
    try {
      await blast(haraka.port, 'x@bare.bench', WARMUP, 10);
      harakaRun = await blast(haraka.port, 'x@bare.bench', COUNT, SESSIONS, haraka.child.pid);
    } finally {
      await stopChild(haraka.child);
    }
    log(`Haraka ${harakaRun.msgPerSec} msg/s, ${harakaRun.cpuMsPerMsg} ms CPU/msg${harakaRun.error ? ` (${harakaRun.error})` : ''}`);
  }
  const harakaRate = harakaRun && !harakaRun.error ? harakaRun.msgPerSec : null;

  // ---- Postfix into Maildir: the durable baseline ----
  const postfix = await postfixMaildir(COUNT, SESSIONS, WARMUP);
  if (typeof postfix === 'string') log(`Postfix → Maildir baseline skipped: ${postfix}`);
  const pf = typeof postfix === 'string' ? undefined : postfix;
  const endToEnd = round(stored / processedSeconds);

  const ingest: ScenarioResult = {
    id: 'smtp',
    title: '(a) SMTP ingest, durable, 10 KB messages',
    status: stored < COUNT ? 'failed' : 'ok',
    reason: mailroom.error,
    setup,
    rows: [
      {
        metric: 'messages accepted per second (250 = on disk)',
        unit: 'msg/s',
        mailroom: mailroom.msgPerSec,
        baselines: [
          { name: 'smtp-sink (discard)', value: sinkRun.msgPerSec },
          { name: 'bare smtp-server (discard)', value: bareRun.msgPerSec },
          { name: 'Haraka 3.3 (discard queue)', value: harakaRate },
          { name: 'Postfix (fsynced queue, then Maildir)', value: pf?.acceptPerSecond ?? null },
        ],
        ...judge('smtpAccept', mailroom.msgPerSec, sinkRun.msgPerSec, !mailroom.error),
        note: `${COUNT} answered 250 in ${mailroom.seconds} s${mailroom.timedOut ? ' (time limit hit)' : ''}${mailroom.error ? `; ${mailroom.error}` : ''}`,
      },
      {
        metric: 'end to end: first message sent → last visible in the API',
        unit: 'msg/s',
        mailroom: endToEnd,
        baselines: [{ name: 'Postfix → Maildir (last file in new/)', value: pf?.deliveredPerSecond ?? null }],
        ...judge('endToEndVsPostfix', endToEnd, pf?.deliveredPerSecond, stored >= COUNT),
        note: `${stored} of ${COUNT} visible ${round(processedSeconds, 2)} s after the first was sent (spooled mail is processed after its 250)${pf ? `; Postfix ${pf.version}: ${pf.delivered} in the Maildir after ${pf.deliveredSeconds} s` : `; Postfix: ${postfix}`}`,
      },
      {
        metric: 'CPU time per message (all threads)',
        unit: 'ms',
        mailroom: mailroom.cpuMsPerMsg ?? null,
        baselines: [
          { name: 'smtp-sink (discard)', value: sinkRun.cpuMsPerMsg ?? null },
          { name: 'bare smtp-server (discard)', value: bareRun.cpuMsPerMsg ?? null },
          { name: 'Haraka 3.3 (discard queue)', value: harakaRun?.cpuMsPerMsg ?? null },
        ],
        note: 'from /proc while smtp-source ran; spooled mail processed after that is not included',
      },
      {
        metric: 'CPU time per message, accepted and processed (all threads)',
        unit: 'ms',
        mailroom: endToEndCpuMs ?? null,
        baselines: [{ name: 'Postfix → Maildir (all its processes)', value: pf?.cpuMsPerMsg ?? null }],
        note: 'from /proc, from the first message sent until the last is visible in the API: what each message costs in all',
      },
    ],
    details: { mailroom, sink: sinkRun, bare: bareRun, haraka: harakaRun ?? ('skipped' in haraka ? haraka.skipped : null), postfix, stored },
  };
  const memory: ScenarioResult = {
    id: 'memory',
    title: '(f) Memory',
    status: idleRss === undefined ? 'failed' : 'ok',
    setup: 'RSS of the mailroom process of (a) (the esbuild bundle run by node) from /proc: idle 3 s after start with one inbox; peak (VmHWM) at the end of (a), spool processing included',
    rows: [
      // The target applies to the appliance as shipped: build/mailroom's idle RSS is in (g).
      { metric: 'idle RSS (esbuild bundle under node)', unit: 'MB', mailroom: idleRss ?? null, note: 'the single executable as shipped: see (g)' },
      { metric: 'peak RSS under (a)', unit: 'MB', mailroom: peak || null, note: `highest 100 ms sample ${peakSampled} MB` },
    ],
  };
  return [ingest, memory];
}
