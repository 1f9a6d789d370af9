// V8's flags belong to the whole process, every worker thread included, and V8 accepts a code
// cache only under the flags it was made with (it compares a hash of them). The main thread
// changes flags for a moment now and then (src/startup-tiers.ts; src/memory.ts, for its
// start-up collection), while a worker may be compiling a chunk with its code cache
// (src/sea-chunks.ts): a worker compiling inside that moment had its cache refused, and said so
// on stderr. One lock, shared by every thread of the process, keeps the two apart.
import { getEnvironmentData, isMainThread, setEnvironmentData } from 'node:worker_threads';

const LOCK_KEY = 'mailroom:v8-flags';

/** 0: free; 1: held. Made by the main thread and handed to every worker it starts. */
const lock: Int32Array = (() => {
  const inherited = isMainThread ? undefined : getEnvironmentData(LOCK_KEY);
  if (inherited instanceof SharedArrayBuffer) return new Int32Array(inherited);
  const made = new Int32Array(new SharedArrayBuffer(4));
  if (isMainThread) setEnvironmentData(LOCK_KEY, made.buffer);
  return made;
})();

/**
 * Runs `fn` with the lock held: no other thread changes V8's flags or compiles with a code cache
 * meanwhile. Holders never wait for anything else, so the wait is the other holder's run: a
 * compile (a few ms) or the start-up collection (50-100 ms, once).
 */
export function holdingV8Flags<T>(fn: () => T): T {
  while (Atomics.compareExchange(lock, 0, 0, 1) !== 0) Atomics.wait(lock, 0, 1);
  try {
    return fn();
  } finally {
    Atomics.store(lock, 0, 0);
    Atomics.notify(lock, 0, 1);
  }
}
