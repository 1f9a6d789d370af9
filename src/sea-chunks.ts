// Inside the single executable: the packages only some work needs (mail parsing and
// authentication, tar) travel as separate scripts (SEA assets, see build/build.ts) and are
// compiled the first time the code imports one of them, not at every start.
import { getAsset } from 'node:sea';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';

const loaded = new Map<string, Record<string, unknown>>();

/** The attachment text worker's script (src/domain/mail/text-worker.mjs bundled), run with eval. */
export const TEXT_WORKER_ASSET = 'text-worker.js';

/** Asset names of a chunk; build/build.ts writes them under the same names. */
export const chunkAssets = (chunk: string) => ({ source: `chunk-${chunk}.js`, cache: `chunk-${chunk}.cache` });

/**
 * The exports of `specifier` from the chunk `chunk`. The chunk's script is a CommonJS module
 * wrapped in a function expression; its V8 code cache was made by the same Node at build time
 * (a rejected cache, e.g. under other V8 flags, only means compiling from source).
 */
export function loadChunk(chunk: string, specifier: string): unknown {
  let exports = loaded.get(chunk);
  if (!exports) {
    const assets = chunkAssets(chunk);
    const script = new Script(getAsset(assets.source, 'utf8'), {
      filename: `mailroom:${assets.source}`,
      cachedData: Buffer.from(getAsset(assets.cache)),
    });
    const wrapper = script.runInThisContext() as (exports: object, require: NodeRequire, module: object, filename: string, dirname: string) => void;
    const module = { exports: {} as Record<string, unknown> };
    // Bundled chunks require nothing but Node's built-in modules; the file names are the ones
    // the main script gets inside a single executable.
    wrapper(module.exports, createRequire(process.execPath), module, process.execPath, dirname(process.execPath));
    exports = module.exports;
    loaded.set(chunk, exports);
  }
  if (!(specifier in exports)) throw new Error(`${specifier} is not in the ${chunk} chunk`);
  return exports[specifier];
}
