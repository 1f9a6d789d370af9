// The text of an attachment (GET /attachments/{id}/text and the MCP get_attachment tool):
// text/* decoded here; HTML, PDF and DOCX extracted in a process of their own (text-worker.mjs)
// under a memory bound and a deadline, so a hostile file costs at most that process, never the
// server. Extractions wait in a bounded queue served round robin across accounts; a request
// whose client left is dropped, or its process stopped. Results are cached in memory by content
// (SHA-256), the file's own failures included, never failures caused by load.
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { AppContext } from '../../context.ts';
import { findAttachmentRow, type AttachmentRow } from './attachments.ts';
import { AppError, isAppError } from '../errors.ts';
import { screenAttachmentText, type Screening } from '../screening/screen.ts';

export interface AttachmentText {
  text: string;
  /** True when the text was cut at attachments.text_max_chars. */
  truncated: boolean;
  /** The screener's verdict on the text (src/domain/screening/): what an agent is handed of a file is screened as a message body is. */
  screening: Screening;
}

type Kind = 'text' | 'html' | 'pdf' | 'docx';

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
/** Senders often label files application/octet-stream: the filename's extension decides then. */
const BY_EXTENSION: Record<string, Kind> = { pdf: 'pdf', docx: 'docx', txt: 'text', csv: 'text', md: 'text', log: 'text', htm: 'html', html: 'html' };

/** What text is extracted with, from the stored content type (else the extension); null: none. */
export function textKind(contentType: string, filename: string): Kind | null {
  if (contentType === 'application/pdf') return 'pdf';
  if (contentType === DOCX) return 'docx';
  if (contentType === 'text/html' || contentType === 'application/xhtml+xml') return 'html';
  if (contentType.startsWith('text/')) return 'text';
  if (contentType === 'application/octet-stream') return BY_EXTENSION[/\.([a-z0-9]{1,5})$/i.exec(filename)?.[1].toLowerCase() ?? ''] ?? null;
  return null;
}

/**
 * Bytes to text. The charset parameter is not kept with a stored attachment (its Content-Type
 * is stored without parameters), so: a byte order mark decides; else UTF-8 when the bytes are
 * valid UTF-8 (ASCII included); else windows-1252, the superset of Latin-1 that mail clients
 * label "iso-8859-1" (the WHATWG Encoding standard decodes that label as windows-1252 too).
 */
export function decodeText(bytes: Uint8Array): string {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return new TextDecoder('utf-8').decode(bytes.subarray(3));
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes.subarray(2));
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes.subarray(2));
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return decodeWindows1252(bytes);
  }
}

// Node's TextDecoder('windows-1252') decodes as ISO-8859-1 without full ICU (0x80 stays U+0080,
// not €): the 32 code points that differ, by hand. Undefined bytes keep their C1 code point.
const CP1252 = '€\x81‚ƒ„…†‡ˆ‰Š‹Œ\x8dŽ\x8f\x90‘’“”•–—˜™š›œ\x9džŸ';
function decodeWindows1252(bytes: Uint8Array): string {
  const latin1 = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  return latin1.replace(/[\x80-\x9f]/g, (c) => CP1252[c.charCodeAt(0) - 0x80]);
}

// --- the extraction process ---------------------------------------------------------------

/** The environment variable that makes a process the text worker (TEXT_WORKER_ENV in src/sea-chunks.ts). */
const WORKER_ENV = 'MAILROOM_TEXT_WORKER';
/** The shell's exit code when `ulimit` refused the bound (a hard limit below it), before exec. */
const NO_BOUND = 125;

let workerIsExecutable = false;
/** Inside the single executable the worker is the executable itself (src/sea-loader.ts). */
export function useExecutableAsTextWorker(): void {
  workerIsExecutable = true;
}
/** From source: node runs the worker's file (plain JavaScript, no loader needed). */
const workerArgs = () => (workerIsExecutable ? [] : [fileURLToPath(new URL('./text-worker.mjs', import.meta.url))]);

const failed = (why: string) => new AppError('ATTACHMENT_TEXT_FAILED', `no text could be extracted from this attachment: ${why}`);
const busy = (why: string) => new AppError('TEXT_EXTRACTION_BUSY', `text extraction is busy: ${why}; retry later`);
/** Failures that say nothing about the file (load, the machine): never cached as its result. */
const uncached = new WeakSet<object>();
const transient = (err: AppError) => (uncached.add(err), err);

/** Process ids of the extractions running now (tests watch them; a killed one is load, not the file). */
const runningPids = new Set<number>();

/**
 * What Node reserves at start as writable memory that RLIMIT_DATA counts although nothing is
 * in it: Node 26's V8 maps its 512 MiB JIT code range (rwx, not committed) at start, and a
 * limit below it stops the process before it runs a line (measured: it starts with 586 MiB,
 * not with 512 MiB; Node 20 needed no such room). The extraction's own budget comes on top.
 */
const V8_CODE_RANGE = 512 * 1_048_576;

/**
 * One extraction in a fresh process: `ulimit -d` bounds its data address space (RLIMIT_DATA:
 * every heap, ArrayBuffer and malloc of the process, the RSS it can reach) to
 * attachments.text_max_memory before exec, so what a hostile file makes the libraries allocate
 * kills that process, never the server (the reserved code range, V8_CODE_RANGE, is added: it
 * holds no data). Every way it can end becomes a result or an AppError.
 */
function runExtraction(ctx: AppContext, kind: Exclude<Kind, 'text'>, input: Buffer, signal: AbortSignal): Promise<Omit<AttachmentText, 'screening'>> {
  const { text_max_chars: maxChars, text_timeout: timeoutMs, text_max_memory: maxMemory } = ctx.config.attachments;
  const expands = () => failed(`the file expands too much: it needed more than attachments.text_max_memory (${maxMemory} bytes) of memory`);
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    // CPU seconds too (RLIMIT_CPU, twice the deadline: GC threads count): a process the server
    // can no longer kill (it died) still ends.
    const bounds = `ulimit -d ${Math.floor((maxMemory + V8_CODE_RANGE) / 1024)} && ulimit -t ${Math.ceil((2 * timeoutMs) / 1000)} || exit ${NO_BOUND}`;
    const child = spawn('/bin/sh', ['-c', `${bounds}; exec "$0" "$@"`, process.execPath, ...workerArgs()], {
      // stdout and stderr dropped: the libraries' chatter stays out of the server's JSON log.
      stdio: ['pipe', 'ignore', 'ignore', 'pipe'],
      // Nothing of the server's environment (secrets, NODE_OPTIONS loaders) reaches the process
      // that reads hostile files. Half the bound for V8's heap: it collects before the bound
      // is reached, and the other half is left for buffers outside the heap.
      env: { [WORKER_ENV]: JSON.stringify({ kind, maxChars }), NODE_OPTIONS: `--max-old-space-size=${Math.max(16, Math.floor(maxMemory / 2 / 1_048_576))}` },
    });
    const pid = child.pid;
    if (pid) runningPids.add(pid);
    let stopped: 'timeout' | 'cancelled' | undefined;
    const stop = (why: 'timeout' | 'cancelled') => {
      stopped ??= why;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => stop('timeout'), timeoutMs);
    const onAbort = () => stop('cancelled');
    signal.addEventListener('abort', onAbort, { once: true });
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      if (pid) runningPids.delete(pid);
      fn();
    };
    const chunks: Buffer[] = [];
    (child.stdio[3] as Readable).on('data', (c: Buffer) => chunks.push(c)).on('error', () => undefined);
    // The process may die before reading all of it (the bound reached): EPIPE is expected.
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(input);
    child.on('error', (err) => {
      ctx.log.warn('text extraction process not started', { error: err.message });
      settle(() => reject(transient(busy(`no worker process could be started (${err.message})`))));
      child.kill('SIGKILL');
    });
    child.on('close', (code, sig) => {
      settle(() => {
        if (stopped === 'cancelled') return reject(signal.reason);
        if (stopped === 'timeout' || sig === 'SIGXCPU') return reject(failed(`it took longer than attachments.text_timeout (${timeoutMs} ms)`));
        let answer: { ok?: AttachmentText; error?: string; memory?: boolean } | undefined;
        try {
          answer = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          // No answer: the process died (below).
        }
        if (answer?.ok) return resolve(answer.ok);
        if (answer?.memory) return reject(expands());
        if (answer?.error !== undefined) return reject(failed(`the ${kind.toUpperCase()} file could not be read (${answer.error})`));
        if (code === NO_BOUND) {
          ctx.log.error('text extraction: ulimit refused the bounds (a lower hard limit?)', { maxMemory, timeoutMs });
          return reject(transient(failed('the bounds of its worker process (attachments.text_max_memory) could not be set')));
        }
        // Killed from outside (the kernel's OOM killer, an operator, a shutdown): load, not the file.
        if (sig === 'SIGKILL' || sig === 'SIGTERM' || sig === 'SIGINT' || sig === 'SIGHUP') return reject(transient(busy(`its worker process was killed (${sig})`)));
        // Any other death (SIGSEGV, SIGABRT: an allocation the bound refused where JavaScript
        // cannot catch it) is the bound reached.
        reject(expands());
      });
    });
  });
}

// --- the queue ----------------------------------------------------------------------------

type Ending = { ok: AttachmentText } | { error: unknown; cache: boolean };

interface Job {
  queue: AccountQueue;
  /** Key of the job in `jobs`: the account and the cache key. */
  id: string;
  run: (signal: AbortSignal) => Promise<AttachmentText>;
  /** Requests waiting for this job's answer; when the last leaves, the job is dropped or stopped. */
  waiters: number;
  running: boolean;
  controller: AbortController;
  waitTimer?: NodeJS.Timeout;
  done: Promise<Ending>;
  finish: (e: Ending) => void;
}

interface AccountQueue {
  accountId: string;
  waiting: Job[];
  running: number;
  /** When this account last had a job started (a turn number): the least recently served goes next. */
  served: number;
}

/** Accounts with jobs waiting or running. */
const accounts = new Map<string, AccountQueue>();
/** Jobs waiting or running, by account and cache key: one account asking twice shares one job. */
const jobs = new Map<string, Job>();
let running = 0;
let turn = 0;
const counters = { started: 0, dropped: 0, stopped: 0 };

/** What the queue holds now, and what it did (tests observe the queue through this). */
export function textExtractionLoad(): { running: number; waiting: number; pids: number[]; started: number; dropped: number; stopped: number } {
  let waiting = 0;
  for (const q of accounts.values()) waiting += q.waiting.length;
  return { running, waiting, pids: [...runningPids], ...counters };
}

function prune(q: AccountQueue): void {
  if (!q.waiting.length && !q.running) accounts.delete(q.accountId);
}

/** Round robin across accounts: while a worker is free, the next job of the least recently served account with one waiting. */
function dispatch(ctx: AppContext): void {
  while (running < ctx.config.attachments.text_workers) {
    let next: AccountQueue | undefined;
    for (const q of accounts.values()) if (q.waiting.length && (!next || q.served < next.served)) next = q;
    if (!next) return;
    start(ctx, next.waiting.shift()!);
  }
}

function start(ctx: AppContext, job: Job): void {
  clearTimeout(job.waitTimer);
  job.running = true;
  running++;
  job.queue.running++;
  job.queue.served = ++turn;
  counters.started++;
  void job
    .run(job.controller.signal)
    .then(
      (ok): Ending => ({ ok }),
      (error: unknown): Ending => ({ error, cache: !job.controller.signal.aborted && isAppError(error) && error.code === 'ATTACHMENT_TEXT_FAILED' && !uncached.has(error) }),
    )
    .then((ending) => {
      running--;
      job.queue.running--;
      prune(job.queue);
      job.finish(ending);
      dispatch(ctx);
    });
}

/** The last request waiting for a job left: a waiting job is dropped, a running one stopped. */
function abandon(job: Job): void {
  // A request for the same file from now on (a client retrying at once) gets a job of its own.
  jobs.delete(job.id);
  if (job.running) {
    counters.stopped++;
    job.controller.abort(new Error('every request waiting for this extraction left'));
    return;
  }
  counters.dropped++;
  clearTimeout(job.waitTimer);
  job.queue.waiting.splice(job.queue.waiting.indexOf(job), 1);
  prune(job.queue);
  job.finish({ error: new Error('abandoned'), cache: false });
}

/** Waits for a job's answer, or for `signal` (the client left): then it stops waiting, and the job may go. */
function answerOf(job: Job, signal: AbortSignal | undefined): Promise<AttachmentText> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  job.waiters++;
  return new Promise((resolve, reject) => {
    const leave = () => {
      reject(signal!.reason);
      if (--job.waiters === 0) abandon(job);
    };
    signal?.addEventListener('abort', leave, { once: true });
    void job.done.then((ending) => {
      signal?.removeEventListener('abort', leave);
      if ('ok' in ending) resolve(ending.ok);
      else reject(ending.error);
    });
  });
}

/** Queues `run` for the account (or joins its job for the same key); its answer, cached when it says something about the file. */
function enqueue(ctx: AppContext, accountId: string, key: string, run: Job['run'], signal: AbortSignal | undefined): Promise<AttachmentText> {
  // Gone already: no job is made that nobody waits for.
  if (signal?.aborted) return Promise.reject(signal.reason);
  const { text_queue_per_account: cap, text_queue_wait: maxWait } = ctx.config.attachments;
  const id = `${accountId} ${key}`;
  let job = jobs.get(id);
  if (!job) {
    const queue = accounts.get(accountId) ?? { accountId, waiting: [], running: 0, served: 0 };
    // Waiting jobs exist only while every worker is busy: past the cap this one would wait too.
    if (queue.waiting.length >= cap) throw busy(`this account already has ${cap} text extractions waiting (attachments.text_queue_per_account)`);
    accounts.set(accountId, queue);
    let finish!: (e: Ending) => void;
    const done = new Promise<Ending>((r) => (finish = r));
    const created: Job = { queue, id, run, waiters: 0, running: false, controller: new AbortController(), done, finish };
    created.waitTimer = setTimeout(() => {
      if (created.running) return;
      queue.waiting.splice(queue.waiting.indexOf(created), 1);
      prune(queue);
      finish({ error: busy(`it waited attachments.text_queue_wait (${maxWait} ms) for a free worker`), cache: false });
    }, maxWait);
    void done.then((ending) => {
      if (jobs.get(id) === created) jobs.delete(id);
      if ('ok' in ending) remember(key, { ok: ending.ok });
      else if (ending.cache) remember(key, { error: ending.error as AppError });
    });
    jobs.set(id, created);
    queue.waiting.push(created);
    job = created;
    dispatch(ctx);
  }
  return answerOf(job, signal);
}

// --- the cache ----------------------------------------------------------------------------

/** Characters of text (and failures) kept, least recently used dropped first: ~64 MB at most. */
const CACHE_CHARS = 32_000_000;
type Outcome = { ok: AttachmentText } | { error: AppError };
const cache = new Map<string, Outcome>();
let cachedChars = 0;

const sizeOf = (o: Outcome) => ('ok' in o ? o.ok.text.length : o.error.message.length) + 100;

function remember(key: string, outcome: Outcome): void {
  cache.set(key, outcome);
  cachedChars += sizeOf(outcome);
  for (const [k, v] of cache) {
    if (cachedChars <= CACHE_CHARS) break;
    cache.delete(k);
    cachedChars -= sizeOf(v);
  }
}

function recall(key: string): Outcome | undefined {
  const hit = cache.get(key);
  if (hit) {
    // Map order is insertion order: moving the entry to the end makes the cache LRU.
    cache.delete(key);
    cache.set(key, hit);
  }
  return hit;
}

async function extract(ctx: AppContext, row: AttachmentRow, kind: Exclude<Kind, 'text'>, signal: AbortSignal): Promise<AttachmentText> {
  const bytes = await readFile(ctx, row);
  const input = kind === 'html' ? Buffer.from(decodeText(bytes), 'utf8') : bytes;
  return screened(await runExtraction(ctx, kind, input, signal));
}

/** The text with its screening (computed once per file: the outcome is cached with it). */
const screened = (t: Omit<AttachmentText, 'screening'>): AttachmentText => ({ ...t, screening: screenAttachmentText(t.text) });

async function readFile(ctx: AppContext, row: AttachmentRow): Promise<Buffer> {
  try {
    return await ctx.blobs.read(row.storagePath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new AppError('ATTACHMENT_NOT_FOUND', `the file of attachment ${row.id} is no longer stored`);
    throw err;
  }
}

/**
 * The text of an attachment of the account: text/* decoded (see decodeText), HTML as text,
 * PDF and DOCX extracted. 404 ATTACHMENT_NOT_FOUND as for GET /attachments/{id}; 415
 * UNSUPPORTED_MEDIA_TYPE for other types; 422 ATTACHMENT_TEXT_FAILED for a file that is too
 * large, broken, hostile, expands too much or too slow; 503 TEXT_EXTRACTION_BUSY when the
 * account's queue is full or the wait too long. `signal` fires when the caller leaves: its
 * extraction is dropped (or stopped) unless another request waits for it. The MCP
 * get_attachment tool calls this too.
 */
export async function attachmentText(ctx: AppContext, accountId: string, attachmentId: string, signal?: AbortSignal): Promise<AttachmentText> {
  const row = await findAttachmentRow(ctx, accountId, attachmentId);
  const kind = textKind(row.contentType, row.filename);
  if (!kind) throw new AppError('UNSUPPORTED_MEDIA_TYPE', `no text is extracted from ${row.contentType} attachments; text/*, PDF and DOCX are supported`);
  const { text_max_bytes: maxBytes, text_max_chars: maxChars, text_max_memory: maxMemory } = ctx.config.attachments;
  if (row.size > maxBytes) throw failed(`it is larger than attachments.text_max_bytes (${row.size} > ${maxBytes} bytes)`);
  // Files are content-addressed: the same bytes give the same text whoever asks.
  const key = `${row.sha256}:${kind}:${maxChars}:${maxMemory}`;
  const hit = recall(key);
  if (hit) {
    if ('error' in hit) throw hit.error;
    return hit.ok;
  }
  if (kind === 'text') {
    // Decoded here: no library, no expansion, no worker.
    const text = decodeText(await readFile(ctx, row));
    const ok = screened(text.length > maxChars ? { text: text.slice(0, maxChars), truncated: true } : { text, truncated: false });
    remember(key, { ok });
    return ok;
  }
  return enqueue(ctx, accountId, key, (s) => extract(ctx, row, kind, s), signal);
}
