// Hands back the memory start-up leaves behind. Loading the modules, migrating and binding the
// listeners allocate ~45 MB, all of it collected by scavenges, for which V8 grows the young
// generation (7.5 MB committed, 0.4 MB of it in use once idle); the copies of the main script
// and its code cache are garbage too. V8's memory reducer, which would give that back when the
// process turns idle, is armed by a full collection, and start-up makes none: an idle server
// kept it for good (its RSS 3 s and 20 s after start the same). One full, memory-reducing
// collection once the start-up passes have run releases it (RSS of the idle executable -9 MB),
// with the bytecode of the functions that ran only to start (-1 MB); see docs/performance.md,
// "Idle memory".
import type { AppContext, Service } from './context.ts';
import { AFTER_START_MS } from './startup.ts';
import { resumeOptimizingTiers } from './startup-tiers.ts';
import { runInNewContext } from 'node:vm';
import { whileV8Flag } from './v8-flags.ts';

/**
 * When the collection runs: after the first background passes (AFTER_START_MS: housekeeping,
 * the domain re-check, the shared DKIM key on a new data dir), whose garbage it takes too, and
 * away from the first requests, which it would hold up for its ~50 ms.
 */
export const COLLECT_AFTER_START_MS = AFTER_START_MS + 500;

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * V8's full collection, as `node --expose-gc` offers it: the flag is set only while a new
 * context is made, which then holds `gc`, and unset again, so that no other code finds a `gc`
 * global and V8's flag hash (which code caches must match: src/sea-chunks.ts) is as before.
 */
function fullCollection(): Collect {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return exposed as Collect;
  return whileV8Flag('expose-gc', () => runInNewContext('gc') as Collect);
}

export function createStartupCollection(_ctx: AppContext): Service {
  let timer: NodeJS.Timeout | undefined;
  return {
    name: 'startup-collection',
    async start() {
      timer = setTimeout(() => {
        timer = undefined;
        // Start-up is over: V8 may optimize what gets hot from now on (src/startup-tiers.ts).
        resumeOptimizingTiers();
        const collect = fullCollection();
        // V8 drops the bytecode of a function that has not run for a few full collections
        // (--bytecode-old-age); this one drops it from every function not running now, which
        // after start-up are mostly the ones that ran only to start (module bodies, migrations,
        // the listeners' set-up). Those that run again are compiled again from the source, as
        // after any flush. Unset after, like --expose-gc, for V8's flag hash; no worker compiles
        // with a code cache meanwhile (src/v8-flags.ts). "last-resort": collects until nothing
        // more is freed, shrinks the young generation back to its first page and returns the
        // freed pages to the system.
        whileV8Flag('stress-flush-code', () => collect({ type: 'major', execution: 'sync', flavor: 'last-resort' }));
      }, COLLECT_AFTER_START_MS);
      timer.unref();
    },
    async stop() {
      clearTimeout(timer);
    },
  };
}
