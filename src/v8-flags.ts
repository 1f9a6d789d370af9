// V8's flags belong to the whole process, every worker thread included, and V8 accepts a code
// cache only under the flags it was made with (it compares a hash of them). The main thread
// changes flags for a moment now and then (src/startup-tiers.ts; src/memory.ts, for its
// start-up collection), while a worker may be compiling a chunk with its code cache
// (src/sea-chunks.ts): a worker compiling inside that moment had its cache refused, and said so
// on stderr. One lock, shared by every thread of the process, keeps the two apart.
import { setFlagsFromString } from 'node:v8';
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
 * How long a thread waits for the lock before it goes on without it: a worker terminated while
 * holding it (its `finally` never runs) must not stop the main thread's next compile for good.
 */
const STALE_MS = 5_000;

/**
 * Runs `fn` with the lock held: no other thread changes V8's flags or compiles with a code cache
 * meanwhile. Holders never wait for anything else, so the wait is the other holder's run: a
 * compile (a few ms) or the start-up collection (50-100 ms, once). Past `staleMs` the holder is
 * taken for gone, and `fn` runs anyway: at worst a cache is refused, as without the lock.
 */
export function holdingV8Flags<T>(fn: () => T, staleMs = STALE_MS): T {
  const giveUp = Date.now() + staleMs;
  while (Atomics.compareExchange(lock, 0, 0, 1) !== 0) {
    const left = giveUp - Date.now();
    if (left <= 0) break;
    Atomics.wait(lock, 0, 1, left);
  }
  try {
    return fn();
  } finally {
    Atomics.store(lock, 0, 0);
    Atomics.notify(lock, 0, 1);
  }
}

/** Runs `fn` with V8's `--flag` set, unset again after, under the lock. */
export function whileV8Flag<T>(flag: string, fn: () => T): T {
  return holdingV8Flags(() => {
    setFlagsFromString(`--${flag}`);
    try {
      return fn();
    } finally {
      setFlagsFromString(`--no-${flag}`);
    }
  });
}
