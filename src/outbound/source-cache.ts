// The signed source of a message just queued, kept in memory for its first delivery attempt:
// the send job would otherwise read back the file written (and fsynced) a few milliseconds
// earlier, four file system calls per send (bench/ scenario (c)). Only a cache: the stored file
// stays the source of truth, and a job that finds nothing here (another node, a retry, a
// restart, an evicted entry) reads the file as before.
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

/** Keeps `raw`, stored at blob `path`, for the first attempt to deliver it. */
export function keepSource(ctx: AppContext, path: string, raw: Buffer): void {
  if (raw.length > MAX_ENTRY_BYTES) return;
  const c = cacheOf(ctx);
  const now = Date.now();
  drop(c, path);
  for (const [oldest, e] of c.entries) {
    if (c.bytes + raw.length <= BUDGET_BYTES && now - e.at <= MAX_AGE_MS) break;
    drop(c, oldest);
  }
  c.entries.set(path, { raw, at: now });
  c.bytes += raw.length;
}

/** The source stored at `path`: from memory the first time after it was kept, else from the file. */
export async function readSource(ctx: AppContext, path: string): Promise<Buffer> {
  const c = cacheOf(ctx);
  const e = c.entries.get(path);
  if (!e) return ctx.blobs.read(path);
  drop(c, path);
  return e.raw;
}
