// V8's optimizing compilers (Maglev, TurboFan) are off while the single executable's main script
// loads its modules and `serve` starts. Start-up code runs once, yet a few dozen of its
// functions (esbuild's helpers, zod's constructors, path normalisation) got hot enough to be
// optimized, and the first optimization maps the compilers' own code: 2.8 MB of the
// executable's pages that then stayed in an idle server's RSS (docs/performance.md, "Idle
// memory"). The entry (src/sea-loader.ts) turns them off once it has compiled the main script
// and before it runs it (turned off by the main script's first module, they were still mapped);
// they are on again once start-up is over (src/memory.ts), at once for the other commands
// (src/sea.ts), and before anything else compiles with a code cache, since the flags are part
// of V8's flag hash, which a cache must match (the chunks, src/sea-chunks.ts; the analysis
// workers' "mail" chunk, src/sea.ts).
import { isSea } from 'node:sea';
import { setFlagsFromString } from 'node:v8';
import { holdingV8Flags } from './v8-flags.ts';

const TIERS = ['maglev', 'turbofan'];

// In the single executable the entry has turned them off before this module runs (in the build's
// start that makes the main script's cache, which has no entry, turning them on is a no-op).
let paused = isSea();

/** Turns the optimizing compilers off (src/sea-loader.ts, before it runs the main script). */
export function pauseOptimizingTiers(): void {
  holdingV8Flags(() => TIERS.forEach((tier) => setFlagsFromString(`--no-${tier}`)));
  paused = true;
}

/** Turns the optimizing compilers on again, if they are off. */
export function resumeOptimizingTiers(): void {
  if (!paused) return;
  paused = false;
  holdingV8Flags(() => TIERS.forEach((tier) => setFlagsFromString(`--${tier}`)));
}
