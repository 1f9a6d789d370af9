// The text of an attachment (GET /attachments/{id}/text and the MCP get_attachment tool):
// text/* decoded here, HTML, PDF and DOCX extracted in a worker thread with a memory limit and
// a deadline, so a hostile file costs at most one worker, never the server. Results are
// cached in memory by content (SHA-256), failures included.
import { Worker } from 'node:worker_threads';
import type { AppContext } from '../../context.ts';
import { findAttachmentRow, type AttachmentRow } from './attachments.ts';
import { AppError } from '../errors.ts';

export interface AttachmentText {
  text: string;
  /** True when the text was cut at attachments.text_max_chars. */
  truncated: boolean;
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

// --- the worker ---------------------------------------------------------------------------

/** Heap of one extraction worker. pdf.js and mammoth need tens of MB for ordinary files. */
const WORKER_HEAP_MB = 256;
/** Extractions running at once; more wait their turn (the machine's cores serve mail first). */
const MAX_WORKERS = 2;

let workerSource: (() => string) | undefined;
/** Inside the single executable the worker's code is a bundled asset run with eval (src/sea.ts). */
export function setTextWorkerSource(code: () => string): void {
  workerSource = code;
}

let running = 0;
const waiting: Array<() => void> = [];
async function withWorkerSlot<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= MAX_WORKERS) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await fn();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

const failed = (why: string) => new AppError('ATTACHMENT_TEXT_FAILED', `no text could be extracted from this attachment: ${why}`);

/** Runs one extraction in a fresh worker; every way it can end becomes a result or a 422. */
function runWorker(kind: Exclude<Kind, 'text'>, input: Uint8Array | string, maxChars: number, timeoutMs: number): Promise<AttachmentText> {
  return new Promise((resolve, reject) => {
    const options = {
      workerData: { kind, input, maxChars },
      transferList: typeof input === 'string' ? [] : [input.buffer as ArrayBuffer],
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
      stdout: true,
      stderr: true,
    };
    const worker = workerSource ? new Worker(workerSource(), { ...options, eval: true }) : new Worker(new URL('./text-worker.mjs', import.meta.url), options);
    // Whatever the libraries print is dropped, not mixed into the server's JSON log.
    worker.stdout.resume();
    worker.stderr.resume();
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
      void worker.terminate();
    };
    const timer = setTimeout(() => settle(() => reject(failed(`it took longer than attachments.text_timeout (${timeoutMs} ms)`))), timeoutMs);
    worker.on('message', (msg: { ok?: AttachmentText; error?: string }) =>
      settle(() => (msg.ok ? resolve(msg.ok) : reject(failed(`the ${kind.toUpperCase()} file could not be read (${msg.error ?? 'unknown error'})`)))),
    );
    worker.on('error', (err: NodeJS.ErrnoException) =>
      settle(() => reject(failed(err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? `it needed more than ${WORKER_HEAP_MB} MB of memory` : `the ${kind.toUpperCase()} file could not be read (${err.message.slice(0, 200)})`))),
    );
    worker.on('exit', () => settle(() => reject(failed('the extraction stopped without an answer'))));
  });
}

// --- the cache ----------------------------------------------------------------------------

/** Characters of text (and failures) kept, least recently used dropped first: ~64 MB at most. */
const CACHE_CHARS = 32_000_000;
type Outcome = { ok: AttachmentText } | { error: AppError };
const cache = new Map<string, Outcome>();
let cachedChars = 0;
const inFlight = new Map<string, Promise<Outcome>>();

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

async function extract(ctx: AppContext, row: AttachmentRow, kind: Kind): Promise<AttachmentText> {
  const { text_max_chars: maxChars, text_timeout: timeout } = ctx.config.attachments;
  let bytes: Buffer;
  try {
    bytes = await ctx.blobs.read(row.storagePath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new AppError('ATTACHMENT_NOT_FOUND', `the file of attachment ${row.id} is no longer stored`);
    throw err;
  }
  if (kind === 'text') {
    const text = decodeText(bytes);
    return text.length > maxChars ? { text: text.slice(0, maxChars), truncated: true } : { text, truncated: false };
  }
  const input = kind === 'html' ? decodeText(bytes) : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return withWorkerSlot(() => runWorker(kind, input, maxChars, timeout));
}

/**
 * The text of an attachment of the account: text/* decoded (see decodeText), HTML as text,
 * PDF and DOCX extracted. 404 ATTACHMENT_NOT_FOUND as for GET /attachments/{id}; 415
 * UNSUPPORTED_MEDIA_TYPE for other types; 422 ATTACHMENT_TEXT_FAILED for a file that is too
 * large, broken, hostile or too slow. The MCP get_attachment tool calls this too.
 */
export async function attachmentText(ctx: AppContext, accountId: string, attachmentId: string): Promise<AttachmentText> {
  const row = await findAttachmentRow(ctx, accountId, attachmentId);
  const kind = textKind(row.contentType, row.filename);
  if (!kind) throw new AppError('UNSUPPORTED_MEDIA_TYPE', `no text is extracted from ${row.contentType} attachments; text/*, PDF and DOCX are supported`);
  const maxBytes = ctx.config.attachments.text_max_bytes;
  if (row.size > maxBytes) throw failed(`it is larger than attachments.text_max_bytes (${row.size} > ${maxBytes} bytes)`);
  // Files are content-addressed: the same bytes give the same text whoever asks.
  const key = `${row.sha256}:${kind}:${ctx.config.attachments.text_max_chars}`;
  let outcome = recall(key);
  if (!outcome) {
    let pending = inFlight.get(key);
    if (!pending) {
      pending = extract(ctx, row, kind).then(
        (ok) => ({ ok }),
        (error: unknown) => {
          if (!(error instanceof AppError) || error.code !== 'ATTACHMENT_TEXT_FAILED') throw error;
          return { error };
        },
      );
      inFlight.set(key, pending);
      void pending.then((o) => remember(key, o), () => {}).finally(() => inFlight.delete(key));
    }
    outcome = await pending;
  }
  if ('error' in outcome) throw outcome.error;
  return outcome.ok;
}
