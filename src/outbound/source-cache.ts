// The signed source of a message just queued, kept in memory for its first delivery attempt:
// the send job would otherwise read back the source stored a few milliseconds earlier (its rows,
// or its file: four file system calls per send; bench/ scenario (c)). Only a cache: the stored
// source stays the truth, and a job that finds nothing here (another node, a retry, a restart,
// an evicted entry) reads it from the blob store.
import { Readable } from 'node:stream';
import type { AppContext } from '../context.ts';

/** Most bytes kept; beyond, the oldest entries go (a burst of sends waiting for slow MX hosts). */
const BUDGET_BYTES = 8 * 1024 * 1024;
/** Larger sources are not kept: a few would fill the budget, and their read is not what costs. */
const MAX_ENTRY_BYTES = 256 * 1024;
/** An entry no attempt took within this time is not coming back soon (a deferred domain). */
const MAX_AGE_MS = 60_000;

interface Cache {
  /** By blob path, oldest first (a Map keeps insertion order). */
  entries: Map<string, { raw: Buffer; at: number }>;
  bytes: number;
  /** Drops entries no attempt took (their job ran on another node, say) while any are kept. */
  sweep?: NodeJS.Timeout;
}

const caches = new WeakMap<AppContext, Cache>();

function cacheOf(ctx: AppContext): Cache {
  let c = caches.get(ctx);
  if (!c) caches.set(ctx, (c = { entries: new Map(), bytes: 0 }));
  return c;
}

function drop(c: Cache, path: string): void {
  const e = c.entries.get(path);
  if (!e) return;
  c.entries.delete(path);
  c.bytes -= e.raw.length;
}

/** Drops the oldest entries while they are too old, or while `room` more bytes would not fit. */
function evict(c: Cache, now: number, room = 0): void {
  for (const [oldest, e] of c.entries) {
    if (c.bytes + room <= BUDGET_BYTES && now - e.at <= MAX_AGE_MS) break;
    drop(c, oldest);
  }
}

function armSweep(c: Cache): void {
  if (c.sweep || !c.entries.size) return;
  c.sweep = setTimeout(() => {
    c.sweep = undefined;
    evict(c, Date.now());
    armSweep(c);
  }, MAX_AGE_MS);
  c.sweep.unref();
}

/** Keeps `raw`, stored at blob `path`, for the first attempt to deliver it. */
export function keepSource(ctx: AppContext, path: string, raw: Buffer): void {
  // A dry run's attempt never reads the source.
  if (raw.length > MAX_ENTRY_BYTES || ctx.config.outbound.mode === 'dry-run') return;
  const c = cacheOf(ctx);
  drop(c, path);
  evict(c, Date.now(), raw.length);
  c.entries.set(path, { raw, at: Date.now() });
  c.bytes += raw.length;
  armSweep(c);
}

/** The source stored at `path`: from memory the first time after it was kept, else from the file. */
export async function readSource(ctx: AppContext, path: string): Promise<Buffer> {
  const c = cacheOf(ctx);
  const e = c.entries.get(path);
  if (!e) return ctx.blobs.read(path);
  drop(c, path);
  return e.raw;
}

/** What a delivery attempt sends: the source in memory, or a new read of the stored one for each attempt. */
export type Source = Buffer | (() => Readable);

/**
 * Past this, an outbound source is never held whole: it is composed and signed into a staged
 * file (renderSource, its attachments and bodies counted), and streamed from storage to the
 * remote server at each attempt (sourceForDelivery).
 */
export const STREAMED_SOURCE_BYTES = 1024 * 1024;

/** The source of a message of `size` bytes for its delivery attempts (readSource, or a stream past STREAMED_SOURCE_BYTES). */
export async function sourceForDelivery(ctx: AppContext, path: string, size: number): Promise<Source> {
  if (size <= STREAMED_SOURCE_BYTES) return readSource(ctx, path);
  // Opened only when the attempt reads it: an attempt that fails before DATA leaves no file open.
  return () =>
    Readable.from(
      (async function* () {
        yield* ctx.blobs.stream(path);
      })(),
    );
}
