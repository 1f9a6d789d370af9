// Shared pieces of the benchmark: where things live, child processes with bounded lifetimes,
// free loopback ports, /proc memory readings, percentiles, and the load generators
// (autocannon for HTTP, Postfix's smtp-source for SMTP) run as separate processes.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpus, loadavg, release, totalmem } from 'node:os';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const WORK = join(ROOT, 'bench', 'work');
export const RESULTS = join(ROOT, 'bench', 'results');
export const SMTP_SOURCE = '/usr/sbin/smtp-source';
export const SMTP_SINK = '/usr/sbin/smtp-sink';

/** Thrown by a scenario that cannot run here; the report records "skipped: <reason>". */
export class SkipError extends Error {}

export interface Row {
  /** What is measured, e.g. "GET /inboxes/{id}". */
  metric: string;
  unit: string;
  mailroom: number | null;
  /** Baselines measured in the same run; the ratio is mailroom ÷ baseline. */
  baselines?: Array<{ name: string; value: number | null }>;
  /** Human-readable target, e.g. "≥ 1500". */
  target?: string;
  met?: boolean;
  note?: string;
}

export interface ScenarioResult {
  id: string;
  title: string;
  status: 'ok' | 'skipped' | 'failed';
  reason?: string;
  /** How the load was generated: sessions/connections, reuse, counts, durations. */
  setup: string;
  rows: Row[];
  /** Raw measurements kept in latest.json only. */
  details?: Record<string, unknown>;
  seconds?: number;
  /** When and where this scenario ran, and the machine's load average (1, 5, 15 min) before and after: a partial run keeps other scenarios' results, so each carries its own. */
  measuredAt?: string;
  machine?: Machine;
  loadBefore?: number[];
  loadAfter?: number[];
}

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGb: number;
  node: string;
  os: string;
}

export function machine(): Machine {
  return { cpus: cpus().length, cpuModel: cpus()[0]?.model.trim() ?? '?', memoryGb: Math.round(totalmem() / 2 ** 30), node: process.version, os: `linux ${release()}` };
}

export function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

export function freshDir(name: string): string {
  const dir = join(WORK, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function load(): number[] {
  return loadavg().map((x) => Math.round(x * 100) / 100);
}

/** A loopback port that was free a moment ago (for tools that need a port on the command line). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function waitFor<T>(what: string, fn: () => T | undefined | Promise<T | undefined>, timeoutMs: number, everyMs = 20): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== null && (v as unknown) !== false) return v as T;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** VmRSS and VmHWM (peak resident set) of a process, in MB. */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
    return { rssMb: round(kb('VmRSS') / 1024, 1), peakMb: round(kb('VmHWM') / 1024, 1) };
  } catch {
    return undefined;
  }
}

/**
 * CPU time (user + system, all threads) a process has used so far, in ms, from /proc. The
 * difference over a run divided by the work done is a cost per operation that, unlike
 * throughput, stays comparable when other processes compete for this 2-core machine.
 */
export function cpuMsOf(pid: number, opts: { reapedChildren?: boolean } = {}): number | undefined {
  const rest = statFields(pid);
  if (!rest) return undefined;
  // utime and stime; with reapedChildren also cutime and cstime, the time of its children
  // that have exited (a PostgreSQL backend whose connection closed, say).
  const fields = opts.reapedChildren ? [11, 12, 13, 14] : [11, 12];
  return (fields.reduce((sum, f) => sum + Number(rest[f]), 0) * 1000) / CLOCK_TICKS;
}

/** CPU ms of each thread of `pid` by thread name (/proc/<pid>/task/<tid>/comm; threads of one name summed). */
export function threadCpuMs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const rest = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ').pop()!.split(' ');
      out.set(name, (out.get(name) ?? 0) + ((Number(rest[11]) + Number(rest[12])) * 1000) / CLOCK_TICKS);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

/**
 * Where a run's CPU went, by thread name (main thread, analysis workers, libuv pool, GC helpers):
 * ms per operation of each thread of `pid` since `before` (threadCpuMs), largest first, threads
 * under 0.01 ms left out.
 */
export function threadCpuPer(pid: number, before: Map<string, number>, count: number): Record<string, number> {
  return Object.fromEntries(
    [...threadCpuMs(pid)]
      .map(([name, ms]) => [name, round((ms - (before.get(name) ?? 0)) / count, 3)] as const)
      .filter(([, ms]) => ms >= 0.01)
      .sort((a, b) => b[1] - a[1]),
  );
}

/** The fields of /proc/<pid>/stat after the parenthesised command name (state first, then ppid). */
function statFields(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').pop()!.split(' ');
  } catch {
    return undefined;
  }
}

/**
 * CPU time of a process and all its children, live or exited, in ms: how a server made of
 * processes (PostgreSQL's postmaster and its backends) is charged. Children of children are
 * not searched for; the postmaster's are all direct.
 */
export function treeCpuMsOf(pid: number): number | undefined {
  const own = cpuMsOf(pid, { reapedChildren: true });
  if (own === undefined) return undefined;
  let children = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || statFields(Number(entry))?.[1] !== String(pid)) continue;
    children += cpuMsOf(Number(entry), { reapedChildren: true }) ?? 0;
  }
  return own + children;
}
/** The pid of a PostgreSQL cluster's postmaster: the first line of postmaster.pid in its data directory. */
export const postmasterOf = (cluster: { dir: string }): number => Number(readFileSync(join(cluster.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);

/**
 * CPU time every process on the machine has used so far (all cores, from /proc/stat), in ms:
 * over a run, what the processes measured one by one leave over is the load generators' and
 * everyone else's work on this shared machine.
 */
export function machineBusyMs(): number {
  // cpu user nice system idle iowait irq softirq steal …: everything but idle and iowait.
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return ((user! + nice! + system! + irq! + softirq! + (steal ?? 0)) * 1000) / CLOCK_TICKS;
}
/** USER_HZ: 100 on every Linux this runs on (getconf CLK_TCK). */
const CLOCK_TICKS = 100;

export function round(x: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function summarize(samples: number[]): { n: number; p50: number; p90: number; p99: number; max: number } {
  const s = [...samples].sort((a, b) => a - b);
  return { n: s.length, p50: round(percentile(s, 50), 2), p90: round(percentile(s, 90), 2), p99: round(percentile(s, 99), 2), max: round(s[s.length - 1] ?? NaN, 2) };
}

/** A child process that is always killed when the benchmark ends, however it ends. */
const children = new Set<ChildProcess>();
export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}
export function killChildren(): void {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
}

export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(t);
}

/** Runs a command to completion with a hard time limit; resolves with its output and wall time. */
export function runBounded(
  cmd: string,
  args: string[],
  timeoutMs: number,
  opts: { env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number | null; stdout: string; stderr: string; ms: number; timedOut: boolean }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env }));
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-20_000)));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - t0, timedOut });
    });
  });
}

/** Starts a bench/baselines/*.ts server as a child process; resolves once it prints its port. */
export async function startBaseline(file: string, args: string[] = []): Promise<{ child: ChildProcess; port: number; extra: string[] }> {
  // BENCH_PROFILE=1: a V8 CPU profile of the baseline too, in bench/work/profile-<file>/ (bench/profile.ts reads it).
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${join(WORK, `profile-${file.replace(/\.ts$/, '')}`)}`] : [];
  const child = track(spawn(process.execPath, [...profile, join(ROOT, 'bench', 'baselines', file), ...args], { stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT }));
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const line = await waitFor(
    `${file} to listen`,
    () => {
      if (child.exitCode !== null) throw new Error(`${file} exited with ${child.exitCode}`);
      return /listening (\d+)(.*)\n/.exec(out) ?? undefined;
    },
    20_000,
  );
  return { child, port: Number(line[1]), extra: line[2].trim().split(' ').filter(Boolean) };
}

/**
 * A webhook receiver on loopback answering 204: `onEvent` gets each POSTed JSON body and the
 * time (performance.now()) it was read in full; bodies that do not parse are ignored.
 */
export async function startReceiver(onEvent: (event: any, at: number) => void): Promise<{ url: string; close(): void; readonly connections: number }> {
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      res.writeHead(204).end();
      let event: unknown;
      try {
        event = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return; // not an event
      }
      onEvent(event, at);
    });
  });
  // Connections accepted: how well the sender's keep-alive pool holds (src/jobs/handlers/webhook.ts).
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
    close: () => server.close(),
    get connections() {
      return connections;
    },
  };
}

// ---- Tools -------------------------------------------------------------------------------

/**
 * smtp-source and smtp-sink come with Debian's postfix package. Installed when missing, with a
 * policy-rc.d that forbids starting the daemon (the bench needs the tools, not a mail server on
 * port 25); a daemon that started anyway is stopped again.
 */
export function ensurePostfixTools(): void {
  if (existsSync(SMTP_SOURCE) && existsSync(SMTP_SINK)) return;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    throw new SkipError('smtp-source/smtp-sink missing and cannot install postfix here (needs root and apt-get)');
  }
  log('installing postfix for smtp-source/smtp-sink (daemon not started)');
  const policy = '/usr/sbin/policy-rc.d';
  const hadPolicy = existsSync(policy);
  if (!hadPolicy) writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    // "No configuration": postfix installs its tools without writing a main.cf that would start it.
    spawnSync('debconf-set-selections', { input: 'postfix postfix/main_mailer_type select No configuration\n', env });
    let res = spawnSync('apt-get', ['install', '-y', '-qq', 'postfix'], { env, encoding: 'utf8', timeout: 300_000 });
    if (res.status !== 0) {
      spawnSync('apt-get', ['update', '-qq'], { env, timeout: 300_000 });
      res = spawnSync('apt-get', ['install', '-y', '-qq', 'postfix'], { env, encoding: 'utf8', timeout: 300_000 });
    }
    if (res.status !== 0) throw new SkipError(`apt-get install postfix failed: ${(res.stderr || res.stdout).trim().split('\n').pop()}`);
  } finally {
    if (!hadPolicy) rmSync(policy, { force: true });
  }
  const status = spawnSync('/usr/sbin/postfix', ['status'], { encoding: 'utf8' });
  if (status.status === 0) spawnSync('/usr/sbin/postfix', ['stop']);
  if (!existsSync(SMTP_SOURCE) || !existsSync(SMTP_SINK)) throw new SkipError('postfix installed but smtp-source/smtp-sink are not in /usr/sbin');
}

/** The autocannon CLI script (pinned devDependency). */
export function autocannonBin(): string {
  try {
    return join(createRequire(import.meta.url).resolve('autocannon/package.json'), '..', 'autocannon.js');
  } catch {
    throw new SkipError('autocannon is not installed (run npm install)');
  }
}

export interface HttpLoad {
  reqPerSec: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
}

/** One autocannon run in its own process (so the load generator does not share our event loop). */
export async function autocannon(
  url: string,
  opts: { connections: number; seconds: number; method?: string; headers?: Record<string, string>; body?: string; pipelining?: number; amount?: number },
): Promise<HttpLoad> {
  const args = [autocannonBin(), '-j', '-c', String(opts.connections), '-d', String(opts.seconds), '-p', String(opts.pipelining ?? 1)];
  if (opts.amount) args.push('-a', String(opts.amount));
  if (opts.method) args.push('-m', opts.method);
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push('-H', `${k}=${v}`);
  if (opts.body !== undefined) args.push('-b', opts.body);
  args.push(url);
  const res = await runBounded(process.execPath, args, (opts.seconds + 30) * 1000);
  if (res.code !== 0) throw new Error(`autocannon failed (${res.code}): ${res.stderr.slice(-500)}`);
  const j = JSON.parse(res.stdout) as {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  };
  return { reqPerSec: round(j.requests.average), p50: j.latency.p50, p99: j.latency.p99, requests: j.requests.total, non2xx: j.non2xx, errors: j.errors + j.timeouts };
}
