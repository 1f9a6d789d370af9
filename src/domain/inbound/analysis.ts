// Analysis of a received message (parse, SPF/DKIM/DMARC) on worker threads. Most of what a
// message costs before its rows are written is this CPU work; on the main thread it competed
// with the SMTP sessions, the HTTP API and the commits for one core. `smtp.analysis_workers`
// threads (default: one per core beyond the first) take it; the main thread keeps socket I/O,
// the files and the transaction. With 0 workers, or when none can start, the same functions
// run on the main thread: the outcome is the same either way, only where the CPU is spent moves.
import type { ParsedMail } from 'mailparser';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { AppContext } from '../../context.ts';
import { errorFields } from '../../log.ts';
import { countInboundAnalysed } from '../../metrics.ts';
import type { AnalysisTask, LookupAnswer, WorkerMessage } from './analysis-worker.ts';
import { authenticateMessage, cachedLookup, type AuthenticationResults } from './authentication.ts';
import { parseMessage } from './inbound-parse.ts';

export interface Analysis {
  parsed: ParsedMail;
  /** Null when not asked for (a local delivery has no remote sender). */
  authentication: AuthenticationResults | null;
}

/** Who sent the message, for SPF/DKIM/DMARC. */
export interface SenderOfMessage {
  mailFrom: string;
  remoteAddress?: string;
  heloName?: string;
}

/** The worker count `smtp.analysis_workers = -1` means: the cores beyond the first, at most four. */
export const defaultAnalysisWorkers = (): number => Math.min(4, Math.max(1, availableParallelism() - 1));

let workerSource: (() => string) | undefined;
/** Inside the single executable the worker is a bundled asset run with eval (src/sea.ts). */
export function setAnalysisWorkerSource(code: () => string): void {
  workerSource = code;
}

/**
 * How to start the worker: the single executable's asset; else `analysis-worker.mjs` beside the
 * running bundle (bench/ builds one); else, from source under tsx, the TypeScript file itself
 * with tsx registered inside the worker (a worker does not inherit the main thread's loader).
 */
function startWorker(): Worker {
  const options = { resourceLimits: { maxOldGenerationSizeMb: 512, stackSizeMb: 4 } };
  if (workerSource) return new Worker(workerSource(), { ...options, eval: true });
  const bundled = new URL('./analysis-worker.mjs', import.meta.url);
  if (existsSync(fileURLToPath(bundled))) return new Worker(bundled, options);
  const source = new URL('./analysis-worker.ts', import.meta.url);
  if (!existsSync(fileURLToPath(source))) throw new Error('the analysis worker script is missing');
  return new Worker(`import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(source.href)}); })`, { ...options, eval: true });
}

interface Pending {
  resolve(a: Analysis): void;
  reject(err: Error): void;
}
interface PoolWorker {
  worker: Worker;
  tasks: Set<number>;
}

const workers: PoolWorker[] = [];
const pending = new Map<number, Pending>();
let nextTask = 0;
/** Workers that died or would not start since the last task one finished; past a few the pool gives up and the main thread analyses. */
let failures = 0;
const MAX_FAILURES = 5;

// Several servers (AppContexts) may share the process (tests do): each task names its server,
// whose resolver answers the worker's lookups and whose log gets its lines.
const serverIds = new WeakMap<AppContext, number>();
const servers = new Map<number, WeakRef<AppContext>>();
function serverOf(ctx: AppContext): number {
  let id = serverIds.get(ctx);
  if (id === undefined) {
    serverIds.set(ctx, (id = servers.size + 1));
    servers.set(id, new WeakRef(ctx));
  }
  return id;
}

function onMessage(pw: PoolWorker, m: WorkerMessage): void {
  if ('lookup' in m) {
    const ctx = servers.get(m.server)?.deref();
    const reply = (a: Omit<LookupAnswer, 'lookup'>) => pw.worker.postMessage({ lookup: m.lookup, ...a } satisfies LookupAnswer);
    if (!ctx) return reply({ error: { code: 'ESERVFAIL', message: 'the server asking is gone' } });
    // Through the server's own answer cache: every worker (and the main thread) shares it.
    cachedLookup(ctx)(m.name, m.rrtype).then(
      (answer) => reply({ answer }),
      (err: NodeJS.ErrnoException) => reply({ error: { code: err?.code, message: err?.message ?? String(err) } }),
    );
    return;
  }
  if ('log' in m) {
    servers.get(m.server)?.deref()?.log[m.log](m.msg, m.fields);
    return;
  }
  const p = pending.get(m.task);
  if (!p) return;
  pending.delete(m.task);
  pw.tasks.delete(m.task);
  if ('error' in m) return p.reject(new Error(m.error));
  failures = 0;
  p.resolve({ parsed: revive(m.parsed), authentication: m.authentication });
}

/**
 * A parsed message crosses threads by structured clone, which turns Buffers into plain
 * Uint8Arrays: attachment contents become Buffers again (views, no copy).
 */
function revive(parsed: unknown): ParsedMail {
  const mail = parsed as ParsedMail;
  for (const a of mail.attachments ?? []) {
    const c = a.content as unknown as Uint8Array;
    if (c && !Buffer.isBuffer(c)) a.content = Buffer.from(c.buffer, c.byteOffset, c.byteLength);
  }
  return mail;
}

function spawn(): PoolWorker | undefined {
  let worker: Worker;
  try {
    worker = startWorker();
  } catch {
    failures = MAX_FAILURES;
    return undefined;
  }
  const pw: PoolWorker = { worker, tasks: new Set() };
  worker.on('message', (m: WorkerMessage) => onMessage(pw, m));
  const lost = (why: Error) => {
    const i = workers.indexOf(pw);
    if (i === -1) return;
    workers.splice(i, 1);
    failures++;
    // Its tasks are not lost: each one fails over to the main thread (see analyseMessage).
    for (const task of pw.tasks) {
      const p = pending.get(task);
      pending.delete(task);
      p?.reject(Object.assign(why, { workerLost: true }));
    }
    pw.tasks.clear();
  };
  worker.on('error', lost);
  worker.on('exit', (code) => lost(new Error(`the analysis worker stopped (exit code ${code})`)));
  // An idle pool does not keep the process alive; a server stopping leaves it to exit.
  worker.unref();
  workers.push(pw);
  return pw;
}

/** The least busy worker, starting workers up to the configured count; undefined: analyse here. */
function pick(ctx: AppContext): PoolWorker | undefined {
  const wanted = ctx.config.smtp.analysis_workers < 0 ? defaultAnalysisWorkers() : ctx.config.smtp.analysis_workers;
  if (wanted === 0 || failures >= MAX_FAILURES) return undefined;
  // Another thread only once every one running is busy.
  const idle = workers.find((pw) => pw.tasks.size === 0);
  if (idle) return idle;
  if (workers.length < wanted) {
    const fresh = spawn();
    if (fresh) return fresh;
  }
  let best: PoolWorker | undefined;
  for (const pw of workers) if (!best || pw.tasks.size < best.tasks.size) best = pw;
  return best;
}

function analyseHere(ctx: AppContext, raw: Buffer, sender: SenderOfMessage | null): Promise<Analysis> {
  countInboundAnalysed(ctx, 'main');
  return Promise.all([parseMessage(raw), sender ? authenticateMessage(ctx, { raw, ...sender }) : null]).then(([parsed, authentication]) => ({ parsed, authentication }));
}

/**
 * Parses `raw` and, with `sender`, evaluates SPF/DKIM/DMARC for it: on a worker thread when
 * there is one, else here. A worker that dies (a message that exhausts its memory, say) takes
 * no message with it: its tasks are analysed again on the main thread.
 */
export function analyseMessage(ctx: AppContext, raw: Buffer, sender: SenderOfMessage | null): Promise<Analysis> {
  const pw = pick(ctx);
  if (!pw) return analyseHere(ctx, raw, sender);
  const task = ++nextTask;
  const message: AnalysisTask = {
    task,
    server: serverOf(ctx),
    raw,
    auth: sender ? { ...sender, hostname: ctx.config.hostname, dnsTimeout: ctx.config.dns.timeout } : undefined,
  };
  return new Promise<Analysis>((resolve, reject) => {
    pending.set(task, { resolve, reject });
    pw.tasks.add(task);
    pw.worker.postMessage(message);
  }).then((a) => {
    countInboundAnalysed(ctx, 'worker');
    return a;
  }).catch((err: Error & { workerLost?: boolean }) => {
    ctx.log.warn('message analysed on the main thread', { reason: err.workerLost ? 'worker lost' : 'worker failed', ...errorFields(err) });
    return analyseHere(ctx, raw, sender);
  });
}

/** Worker threads running now (metrics, tests). */
export const analysisWorkerCount = (): number => workers.length;

/**
 * Stops every analysis thread at once, as a crash would: what they were analysing is analysed
 * again on the main thread, and the next message starts a fresh thread. Tests use it to show
 * that no message is lost with its thread.
 */
export async function killAnalysisWorkers(): Promise<void> {
  await Promise.all([...workers].map((pw) => pw.worker.terminate()));
}
