// Noisy neighbour: tenant A runs every attack of issue 27 at once (hostile searches, streams that
// never read, long-polls past the cap, large mails, hostile documents sent to text extraction,
// list pages of large mails, idle sockets from one address) while tenant B, on another account
// and another client address, reads its inbox and receives mail. The figures compare B's
// GET /inboxes/{id} latency and SMTP ingest with the same measure taken in the same run without
// the attack; the server's peak RSS is read from /proc; every message B was answered 250 for
// must be stored exactly once. Used by `npm run test:reliability` (long) and by
// test/e2e/noisy-neighbour.test.ts (short, both engines).
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { createAccount } from '../../src/domain/accounts/accounts.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { silentLogger } from '../../src/log.ts';
import { prepareInstance, startChild, stopChild, type ChildServer, type Instance } from '../support/child-server.ts';
import { docxBomb } from '../support/documents.ts';
import { LoadSession, type ScenarioResult } from './crash.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The attacker's client address: Linux routes all of 127/8 on lo, so A and B differ by address. */
const ATTACKER = '127.0.0.2';
/** The attacker's idle sockets come from a third address: they take its per-address budget, not the one A's requests use. */
const IDLER = '127.0.0.3';

interface Reply {
  status: number;
  body: string;
}

/** One HTTP request from `localAddress`, the body read whole (callers only read small answers); `open` holds it while it runs. */
function call(base: string, key: string, method: string, path: string, body?: unknown, localAddress = '127.0.0.1', timeoutMs = 60_000, open?: Set<ClientRequest>): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    const data = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
    const req = request(
      url,
      {
        method,
        localAddress,
        agent: false,
        headers: { authorization: `Bearer ${key}`, ...(data && !Buffer.isBuffer(body) ? { 'content-type': 'application/json' } : {}) },
        timeout: timeoutMs,
      },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    open?.add(req);
    req.on('close', () => open?.delete(req));
    req.end(data);
  });
}

/** A multipart upload of one file (POST /attachments). */
function upload(base: string, key: string, filename: string, contentType: string, file: Buffer): Promise<Reply> {
  const boundary = 'noisy' + Math.random().toString(16).slice(2);
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: ${contentType}\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return new Promise((resolve, reject) => {
    const req = request(
      new URL('/attachments', base),
      { method: 'POST', localAddress: ATTACKER, agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': body.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Peak and current resident memory of a process, in MB (VmHWM, VmRSS). */
function memoryOf(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { peak: Math.round(kb('VmHWM') / 1024), now: Math.round(kb('VmRSS') / 1024) };
}

const quantile = (sorted: number[], q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN);

interface Tenant {
  key: string;
  inboxId: string;
  address: string;
}

async function makeTenants(inst: Instance): Promise<{ a: Tenant; b: Tenant }> {
  const ctx = await createContext(loadConfig(inst.configFile), silentLogger);
  let keyB: string;
  try {
    const account = await createAccount(ctx, 'neighbour');
    keyB = (await createApiKey(ctx, account.id, { name: 'neighbour' })).key;
  } finally {
    await closeContext(ctx);
  }
  const inbox = async (key: string, address: string): Promise<Tenant> => {
    const r = await call(inst.httpUrl, key, 'POST', '/inboxes', { address });
    if (r.status !== 201) throw new Error(`POST /inboxes: ${r.status} ${r.body}`);
    return { key, inboxId: JSON.parse(r.body).id, address };
  };
  return { a: await inbox(inst.key, 'attacker@agents.test'), b: await inbox(keyB, 'neighbour@agents.test') };
}

interface Measure {
  p50: number;
  p99: number;
  probes: number;
  /** Messages answered 250 per second while the phase ran. */
  ingestRate: number;
  accepted: string[];
  refused: number;
}

/**
 * B's view for `seconds`: GET /inboxes/{id} one after another (latency of each), and SMTP mail
 * to B's inbox over two connections, paced so that it does not itself saturate the box.
 */
async function measureB(inst: Instance, b: Tenant, seconds: number, tag: string): Promise<Measure> {
  const until = Date.now() + seconds * 1000;
  const latencies: number[] = [];
  const accepted: string[] = [];
  let refused = 0;
  const probe = (async () => {
    while (Date.now() < until) {
      const t0 = performance.now();
      const r = await call(inst.httpUrl, b.key, 'GET', `/inboxes/${b.inboxId}`);
      latencies.push(performance.now() - t0);
      if (r.status !== 200) throw new Error(`B's GET /inboxes/{id} answered ${r.status}: ${r.body.slice(0, 200)}`);
      // 60 ms apart: B's probes of a 15 s run (warm-up and both phases) stay under the default
      // 600 requests a minute of its account.
      await sleep(60);
    }
  })();
  const started = performance.now();
  const ingest = Promise.all(
    [0, 1].map(async (c) => {
      const session = await LoadSession.open(inst.smtpPort);
      let n = 0;
      try {
        while (Date.now() < until) {
          const id = `${tag}-${c}-${n++}@neighbour.test`;
          const body = [`From: friend@example.org`, `To: ${b.address}`, `Subject: ${id}`, `Message-ID: <${id}>`, '', `hello ${id}`].join('\r\n');
          const code = await session.message(b.address, body, { sent: false });
          if (code === 250) accepted.push(id);
          else refused++;
          await sleep(10);
        }
      } finally {
        session.close();
      }
    }),
  );
  await Promise.all([probe, ingest]);
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((x, y) => x - y);
  return { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), probes: latencies.length, ingestRate: accepted.length / elapsed, accepted, refused };
}

/** Everything tenant A throws at the box until `stop` is set; answers the status codes it saw. */
function attack(inst: Instance, a: Tenant, stop: { now: boolean }, seen: Map<string, number>): { done: Promise<void>; sockets: Socket[]; requests: Set<ClientRequest>; ready: Promise<unknown> } {
  const note = (what: string, status: number | string) => seen.set(`${what} ${status}`, (seen.get(`${what} ${status}`) ?? 0) + 1);
  const sockets: Socket[] = [];
  const requests = new Set<ClientRequest>();
  const skip = new Set((process.env.NOISY_SKIP ?? '').split(',').filter(Boolean));
  const loop = async (what: string, fn: () => Promise<number | string>) => {
    if (skip.has(what)) return;
    await ready;
    while (!stop.now) {
      try {
        const status = await fn();
        note(what, status);
        // A refused request is tried again after a pause, as a client told Retry-After would:
        // the attacks measured are the costly requests, not a flood of cheap refusals.
        if (typeof status === 'number' && status >= 400) await sleep(50);
      } catch (err) {
        if (stop.now) return; // cut off at the end of the attack
        note(what, (err as Error).message.slice(0, 60));
        await sleep(50);
      }
    }
  };
  const get = (path: string) => call(inst.httpUrl, a.key, 'GET', path, undefined, ATTACKER, undefined, requests).then((r) => r.status);
  const hostile = Array.from({ length: 500 }, (_v, i) => String.fromCharCode(97 + (i % 26))).join(' ');
  const heavy = Array.from({ length: 32 }, (_v, i) => `w${i}`).join(' ');

  const jobs: Array<Promise<void>> = [];
  // Idle sockets from one address: more than the per-address budget allows.
  for (let i = 0; i < 150; i++) {
    const s = connect({ port: Number(new URL(inst.httpUrl).port), host: '127.0.0.1', localAddress: IDLER });
    s.on('error', () => {});
    sockets.push(s);
  }
  // Streams that never read, past the per-account cap.
  for (let i = 0; i < 30; i++) {
    const s = connect({ port: Number(new URL(inst.httpUrl).port), host: '127.0.0.1', localAddress: ATTACKER });
    s.on('error', () => {});
    s.on('connect', () => {
      s.write(`GET /events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.key}\r\nAccept: text/event-stream\r\n\r\n`);
      s.pause();
    });
    sockets.push(s);
  }
  // One 14 MB mail to A's inbox, as in the finding, while A's streams do not read: sent first;
  // A's other attacks start, and B's window opens, once it is stored (`ready`). Its intake is a
  // legitimate message's cost (parse, store, index), not an attack on a budget; what the attack
  // bounds is what the streams that never read, and the list pages of it below, may hold. (Taken
  // in with A's searches already running, it took 20 to 40 s on PostgreSQL instead of 3.)
  let ready: Promise<unknown> = Promise.resolve();
  if (!skip.has('large-mail')) {
    ready = (async () => {
      const session = await LoadSession.open(inst.smtpPort);
      try {
        const big = 'x'.repeat(76) + '\r\n';
        const body = [`From: big@example.org`, `To: ${a.address}`, `Subject: big ${Date.now()}`, '', big.repeat(Math.floor((14 * 1_048_576) / big.length))].join('\r\n');
        note('large-mail', await session.message(a.address, body, { sent: false }));
      } finally {
        session.close();
      }
      // Stored and announced: the streams' frames of it are written (or held) by now.
      for (let i = 0; i < 600 && !stop.now; i++) {
        const r = await call(inst.httpUrl, a.key, 'GET', `/inboxes/${a.inboxId}/messages?limit=1`, undefined, ATTACKER);
        if (r.status === 200 && JSON.parse(r.body).total > 0) return;
        await sleep(100);
      }
    })();
  }
  // Long-polls with a query, past the cap.
  for (let i = 0; i < 4; i++) jobs.push(loop('long-poll', () => get(`/inboxes/${a.inboxId}/messages?wait=30&q=${encodeURIComponent('nothing matches this')}`)));
  // Hostile and heavy searches, on messages and threads.
  for (let i = 0; i < 3; i++) {
    jobs.push(loop('search-500-terms', () => get(`/messages?q=${encodeURIComponent(hostile)}`)));
    jobs.push(loop('threads-32-terms', () => get(`/threads?q=${encodeURIComponent(heavy)}`)));
  }
  jobs.push(loop('list-large', () => get(`/inboxes/${a.inboxId}/messages?limit=100`)));
  // Hostile documents sent to text extraction.
  jobs.push(
    (async () => {
      await ready;
      let r: Reply;
      try {
        r = await upload(inst.httpUrl, a.key, 'bomb.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', docxBomb(400));
      } catch (err) {
        note('upload-bomb', (err as Error).message.slice(0, 60));
        return;
      }
      note('upload-bomb', r.status);
      if (r.status !== 201) return;
      const id = JSON.parse(r.body).id as string;
      await Promise.all([0, 1, 2, 3].map(() => loop('text-bomb', () => get(`/attachments/${id}/text`))));
    })(),
  );
  return { done: Promise.all([...jobs, ready]).then(() => undefined), sockets, requests, ready };
}

export interface NoisyOptions {
  /** Seconds of each phase (baseline, then attack). */
  seconds: number;
  /** A PostgreSQL URL; without it the embedded SQLite engine. */
  databaseUrl?: string;
}

export interface NoisyFigures {
  baselineP50: number;
  baselineP99: number;
  attackP50: number;
  attackP99: number;
  p99Ratio: number;
  baselineIngest: number;
  attackIngest: number;
  ingestRatio: number;
  peakRssMb: number;
  accepted: number;
  lost: number;
  storedTwice: number;
  refused: number;
}

/** Runs both phases on a fresh server and answers the figures and A's status counts. */
export async function runNoisy(opts: NoisyOptions): Promise<{ figures: NoisyFigures; seen: Map<string, number> }> {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-noisy-'));
  // Default settings throughout (the per-account request rate included: B's probes stay under it).
  const toml = ['[outbound]', 'mode = "dry-run"', ...(opts.databaseUrl ? ['[database]', `url = ${JSON.stringify(opts.databaseUrl)}`] : [])].join('\n');
  let server: ChildServer | undefined;
  try {
    const inst = await prepareInstance(dir, toml);
    server = await startChild(inst);
    const { a, b } = await makeTenants(inst);
    // Warm up (first requests compile routes and fill caches), then the quiet measure.
    await measureB(inst, b, 1, 'warm');
    const quiet = await measureB(inst, b, opts.seconds, 'quiet');
    const stop = { now: false };
    const seen = new Map<string, number>();
    const attacker = attack(inst, a, stop, seen);
    await attacker.ready; // the one-shot part of the attack (the large mail) is done
    await sleep(1000); // the sustained part is under way before B measures
    const loud = await measureB(inst, b, opts.seconds, 'loud');
    stop.now = true;
    // The attack's requests still running are cut off too: a long-poll (wait=30) or a text
    // extraction held the end of every run for up to half a minute, the machine idle.
    for (const s of attacker.sockets) s.destroy();
    for (const r of attacker.requests) r.destroy();
    let cap: NodeJS.Timeout | undefined;
    await Promise.race([attacker.done, new Promise((r) => (cap = setTimeout(r, 65_000)))]);
    clearTimeout(cap); // else it held the process (the test file) open for the rest of the 65 s
    const rss = memoryOf(server.child.pid!);
    // Every message B was answered 250 for is stored once.
    const want = new Set([...quiet.accepted, ...loud.accepted]);
    const counts = new Map<string, number>();
    await waitStored(inst, b, want, counts);
    let lost = 0;
    let storedTwice = 0;
    for (const id of want) {
      const n = counts.get(id) ?? 0;
      if (n === 0) lost++;
      if (n > 1) storedTwice++;
    }
    const figures: NoisyFigures = {
      baselineP50: round(quiet.p50),
      baselineP99: round(quiet.p99),
      attackP50: round(loud.p50),
      attackP99: round(loud.p99),
      p99Ratio: round(loud.p99 / quiet.p99),
      baselineIngest: round(quiet.ingestRate),
      attackIngest: round(loud.ingestRate),
      ingestRatio: round(quiet.ingestRate / loud.ingestRate),
      peakRssMb: rss.peak,
      accepted: want.size,
      lost,
      storedTwice,
      refused: quiet.refused + loud.refused,
    };
    return { figures, seen };
  } finally {
    if (server) await stopChild(server, 'SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (x: number) => Math.round(x * 100) / 100;

/** Counts B's stored messages by subject, waiting (up to 60 s) until every accepted one is visible. */
async function waitStored(inst: Instance, b: Tenant, want: Set<string>, counts: Map<string, number>): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    counts.clear();
    for (let offset = 0; ; offset += 100) {
      const r = await call(inst.httpUrl, b.key, 'GET', `/inboxes/${b.inboxId}/messages?limit=100&offset=${offset}`);
      if (r.status !== 200) throw new Error(`B's list answered ${r.status}`);
      const page = JSON.parse(r.body) as { data: Array<{ subject: string }>; total: number };
      for (const m of page.data) counts.set(m.subject, (counts.get(m.subject) ?? 0) + 1);
      if (page.data.length < 100) break;
    }
    if ([...want].every((id) => counts.has(id)) || Date.now() > deadline) return;
    await sleep(250);
  }
}

/**
 * Below this, a p99 is noise on a shared 2-core machine (one scheduler hiccup), and twice it says
 * nothing: B's p99 under attack must stay within 2× of the quiet one, or under this. It is the
 * HTTP read p99 target of bench (b) (docs/performance.md).
 */
export const P99_FLOOR_MS = 10;

/** What the issue requires of a run (issue 27, noisy-neighbour suite); an empty list when all hold. */
export function noisyViolations(figures: NoisyFigures): string[] {
  const violations: string[] = [];
  if (figures.attackP99 > Math.max(2 * figures.baselineP99, P99_FLOOR_MS))
    violations.push(`B's GET /inboxes/{id} p99 ${figures.attackP99} ms under attack against ${figures.baselineP99} ms without (${figures.p99Ratio}×)`);
  if (figures.ingestRatio > 2) violations.push(`B's SMTP ingest ${figures.attackIngest} msg/s under attack against ${figures.baselineIngest} without (${figures.ingestRatio}× slower)`);
  if (figures.peakRssMb >= 512) violations.push(`peak RSS ${figures.peakRssMb} MB (bound: 512 MB)`);
  if (figures.lost) violations.push(`${figures.lost} of B's messages answered 250 are not stored`);
  if (figures.storedTwice) violations.push(`${figures.storedTwice} of B's messages stored twice`);
  if (figures.accepted === 0) violations.push('B got no message accepted at all');
  return violations;
}

/** The scenario as `npm run test:reliability` runs it: both engines when PostgreSQL is there. */
export async function noisyNeighbour(seconds: number, databaseUrl?: string): Promise<ScenarioResult> {
  const started = Date.now();
  const { figures, seen } = await runNoisy({ seconds, databaseUrl });
  const violations = noisyViolations(figures);
  process.stderr.write(`noisy-neighbour (${databaseUrl ? 'postgres' : 'sqlite'}): attacker saw ${JSON.stringify(Object.fromEntries(seen))}\n`);
  return { name: `noisy-neighbour${databaseUrl ? '-postgres' : ''}`, rounds: 1, seconds: Math.round((Date.now() - started) / 1000), figures: figures as unknown as Record<string, number>, violations };
}
