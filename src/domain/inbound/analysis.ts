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
import { parseMessage, unparsedMessage } from './inbound-parse.ts';
import { screenParsed, type ScreenFor, type Screening } from '../screening/screen.ts';
import { isStaged, parseStaged, readStaged, type StagedMessage } from './inbound-large.ts';
import { removeStaged } from '../../store/blobs/staging.ts';

export interface Analysis {
  parsed: ParsedMail;
  /** Null when not asked for (a local delivery has no remote sender). */
  authentication: AuthenticationResults | null;
  /** The screener's verdict (src/domain/screening/): null when not asked for, or the message could not be analysed. */
  screening: Screening | null;
  /** Staged attachment files of a large message (inbound-large.ts), for the caller to remove once stored. */
  files?: string[];
}

/** Who sent the message, for SPF/DKIM/DMARC. */
export interface SenderOfMessage {
  mailFrom: string;
  remoteAddress?: string;
  heloName?: string;
}

// Asked for every message: availableParallelism() is a system call each time (0.6% of the main
// thread's samples in a profile of bench (o)), and the cores a process may use hardly change.
let defaultWorkers: number | undefined;
/** The worker count `smtp.analysis_workers = -1` means: the cores beyond the first, at most four. */
export const defaultAnalysisWorkers = (): number => (defaultWorkers ??= Math.min(4, Math.max(1, availableParallelism() - 1)));

let workerSource: (() => string) | undefined;
/** Inside the single executable the worker is a bundled asset run with eval (src/sea.ts). */
export function setAnalysisWorkerSource(code: () => string): void {
  workerSource = code;
}

/**
 * How to start the worker: the single executable's asset; else `analysis-worker.mjs` beside the
 * running bundle (bench/ builds one); else, from source, the TypeScript file itself (Node strips
 * its types, in a worker as in the main thread).
 */
function startWorker(): Worker {
  // The young generation bounded (V8 gave a worker 96 MB): parsing a large message from its file
  // makes short-lived garbage at disk speed, and eight 25 MB messages at once peaked 40-70 MB
  // higher with the default (test/e2e/data-stream.test.ts).
  const options = { resourceLimits: { maxOldGenerationSizeMb: 512, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 } };
  if (workerSource) return new Worker(workerSource(), { ...options, eval: true });
  const bundled = new URL('./analysis-worker.mjs', import.meta.url);
  if (existsSync(fileURLToPath(bundled))) return new Worker(bundled, options);
  const source = new URL('./analysis-worker.ts', import.meta.url);
  if (!existsSync(fileURLToPath(source))) throw new Error('the analysis worker script is missing');
  return new Worker(source, options);
}

/** One message being analysed. */
interface Task {
  id: number;
  ctx: AppContext;
  /** The message, or a staged one's first bytes. */
  raw: Buffer;
  staged?: StagedMessage;
  message: AnalysisTask;
  sender: SenderOfMessage | null;
  screen?: ScreenFor;
  /** Worker threads that died (or were stopped) while holding it. */
  losses: number;
  worker?: PoolWorker;
  deadline: NodeJS.Timeout;
  done(a: Analysis): void;
}
interface PoolWorker {
  worker: Worker;
  tasks: Set<Task>;
  /** A message on it ran past its deadline: it takes no new task, and is stopped once its others end. */
  draining?: boolean;
}

const workers: PoolWorker[] = [];
const tasks = new Map<number, Task>();
/** Tasks waiting for a thread while the pool restarts after a death. */
const waiting: Task[] = [];
let nextTask = 0;
/**
 * A message on a thread that died is tried once more on another thread (the death may have been
 * another message's); one that was on two dying threads is taken to be what kills them, and is
 * stored unanalysed. It never runs on the main thread, where it would take the process down.
 */
const MAX_LOSSES = 2;
/** Threads lost since a task last completed on one: the next starts after a backoff (100 ms, doubling, at most 10 s), never given up for good. */
let deaths = 0;
let restartAt = 0;
let restartTimer: NodeJS.Timeout | undefined;
const RESTART_BASE_MS = 100;
const RESTART_MAX_MS = 10_000;
/** No thread can start at all (the worker script is missing): the main thread analyses, as with 0 workers. */
let unavailable = false;

/** Authentication of a message that could not be analysed: it cannot be judged. */
const UNANALYSED: AuthenticationResults = { spf: 'permerror', dkim: 'permerror', dmarc: 'permerror' };

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
  const task = tasks.get(m.task);
  if (!task || task.worker !== pw) {
    // An answer no task waits for any more (stored unanalysed meanwhile): its staged files go.
    if ('files' in m && m.files?.length) void removeStaged(m.files);
    return;
  }
  if ('error' in m) return unanalysed(task, `the analysis failed: ${m.error}`);
  deaths = 0;
  restartAt = 0;
  finish(task);
  countInboundAnalysed(task.ctx, 'worker');
  task.done({ parsed: revive(m.parsed), authentication: m.authentication, screening: m.screening, files: m.files });
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

function finish(task: Task): void {
  clearTimeout(task.deadline);
  tasks.delete(task.id);
  const pw = task.worker;
  pw?.tasks.delete(task);
  if (pw?.draining && pw.tasks.size === 0) void pw.worker.terminate();
  task.worker = undefined;
  const i = waiting.indexOf(task);
  if (i !== -1) waiting.splice(i, 1);
}

/** Ends a task without an analysis: the message is stored with its raw source and subject, authentication `permerror`. */
function unanalysed(task: Task, reason: string): void {
  finish(task);
  task.ctx.log.warn('message stored unanalysed', { reason, losses: task.losses });
  task.done({ parsed: unparsedMessage(task.raw), authentication: task.sender ? UNANALYSED : null, screening: null });
}

function spawn(): PoolWorker | undefined {
  let worker: Worker;
  try {
    worker = startWorker();
  } catch {
    unavailable = true;
    return undefined;
  }
  const pw: PoolWorker = { worker, tasks: new Set() };
  worker.on('message', (m: WorkerMessage) => onMessage(pw, m));
  const lost = (why: Error) => {
    const i = workers.indexOf(pw);
    if (i === -1) return;
    workers.splice(i, 1);
    deaths++;
    restartAt = Date.now() + Math.min(RESTART_MAX_MS, RESTART_BASE_MS * 2 ** (deaths - 1));
    const held = [...pw.tasks];
    pw.tasks.clear();
    for (const task of held) {
      task.worker = undefined;
      task.losses++;
      if (task.losses >= MAX_LOSSES) unanalysed(task, `${task.losses} analysis threads stopped while holding it: ${why.message}`);
      else dispatch(task);
    }
  };
  worker.on('error', lost);
  worker.on('exit', (code) => lost(new Error(`the analysis worker stopped (exit code ${code})`)));
  // An idle pool does not keep the process alive; a server stopping leaves it to exit.
  worker.unref();
  workers.push(pw);
  return pw;
}

/**
 * The least busy worker, starting workers up to the configured count (after a death, once its
 * backoff is over); 'main' when the main thread analyses (0 workers, or none can start);
 * undefined when the task must wait for a thread to restart.
 */
function pick(ctx: AppContext): PoolWorker | 'main' | undefined {
  const wanted = ctx.config.smtp.analysis_workers < 0 ? defaultAnalysisWorkers() : ctx.config.smtp.analysis_workers;
  if (wanted === 0 || unavailable) return 'main';
  const usable = workers.filter((pw) => !pw.draining);
  // Another thread only once every one running is busy.
  const idle = usable.find((pw) => pw.tasks.size === 0);
  if (idle) return idle;
  if (usable.length < wanted && Date.now() >= restartAt) {
    const fresh = spawn();
    if (fresh) return fresh;
    if (unavailable) return 'main';
  }
  let best: PoolWorker | undefined;
  for (const pw of usable) if (!best || pw.tasks.size < best.tasks.size) best = pw;
  return best;
}

function dispatch(task: Task): void {
  const pw = pick(task.ctx);
  if (pw === 'main') {
    // A message that was on a dying thread is never tried here.
    if (task.losses > 0) return unanalysed(task, 'no analysis thread can start');
    finish(task);
    analyseHere(task.ctx, task.staged ?? task.raw, task.sender, task.screen).then(task.done, (err: unknown) => {
      task.ctx.log.error('message analysis failed', errorFields(err));
      unanalysed(task, (err as Error)?.message ?? String(err));
    });
    return;
  }
  if (!pw) {
    waiting.push(task);
    if (!restartTimer) {
      restartTimer = setTimeout(
        () => {
          restartTimer = undefined;
          for (const t of waiting.splice(0)) dispatch(t);
        },
        Math.max(0, restartAt - Date.now()),
      );
      restartTimer.unref();
    }
    return;
  }
  task.worker = pw;
  pw.tasks.add(task);
  pw.worker.postMessage(task.message);
}

async function analyseHere(ctx: AppContext, raw: Buffer | StagedMessage, sender: SenderOfMessage | null, screen?: ScreenFor): Promise<Analysis> {
  countInboundAnalysed(ctx, 'main');
  if (isStaged(raw)) {
    const whole = () => readStaged(raw.path, raw);
    const [{ parsed, files }, authentication] = await Promise.all([parseStaged(ctx, raw), sender ? authenticateMessage(ctx, { raw: raw.head, whole, ...sender }) : null]);
    return { parsed, authentication, screening: screenParsed(parsed, authentication, screen), files };
  }
  const [parsed, authentication] = await Promise.all([parseMessage(raw), sender ? authenticateMessage(ctx, { raw, ...sender }) : null]);
  return { parsed, authentication, screening: screenParsed(parsed, authentication, screen) };
}

/**
 * Parses `raw` and, with `sender`, evaluates SPF/DKIM/DMARC for it: on a worker thread when
 * there are any (else here). Never rejects for a thread's sake, so a message answered 250 is
 * always stored: a message whose analysis runs past `smtp.analysis_timeout` (its thread is
 * stopped: it may be spinning), fails on its thread, or was on two threads that died, is stored
 * unanalysed. Other messages on a thread that died are analysed again on another thread.
 */
export function analyseMessage(ctx: AppContext, message: Buffer | StagedMessage, sender: SenderOfMessage | null, screen?: ScreenFor): Promise<Analysis> {
  if (pick(ctx) === 'main') return analyseHere(ctx, message, sender, screen);
  // A large message is read from its file by the worker; only its first bytes cross threads.
  const staged = isStaged(message) ? message : undefined;
  const raw = isStaged(message) ? message.head : message;
  return new Promise<Analysis>((done) => {
    const id = ++nextTask;
    const task: Task = {
      id,
      ctx,
      raw,
      sender,
      screen,
      losses: 0,
      staged,
      message: {
        task: id,
        server: serverOf(ctx),
        raw,
        staged: staged && { path: staged.path, traceLength: staged.traceLength, dataDir: ctx.config.data_dir },
        auth: sender ? { ...sender, hostname: ctx.config.hostname, dnsTimeout: ctx.config.dns.timeout } : undefined,
        screen,
      },
      deadline: setTimeout(() => {
        // Its thread may be stuck in it: it takes no new message, and is stopped once the others
        // it holds end (each within its own deadline), so their analysis is not thrown away.
        if (task.worker) task.worker.draining = true;
        unanalysed(task, `the analysis ran past smtp.analysis_timeout (${ctx.config.smtp.analysis_timeout} ms)`);
      }, ctx.config.smtp.analysis_timeout),
      done,
    };
    tasks.set(id, task);
    dispatch(task);
  });
}

/** Messages being analysed on a thread right now (tests: to stop a thread while it holds one). */
export const analysisTasksOnThreads = (): number => [...tasks.values()].filter((t) => t.worker).length;

/** Worker threads running now (metrics, tests). */
export const analysisWorkerCount = (): number => workers.length;

/**
 * Stops every analysis thread at once, as a crash would: what they were analysing is analysed
 * again on another thread (or stored unanalysed, on its second loss), and the next message
 * starts a fresh thread once the backoff is over. Tests use it to show that no message is lost
 * with its thread.
 */
export async function killAnalysisWorkers(): Promise<void> {
  await Promise.all([...workers].map((pw) => pw.worker.terminate()));
}
