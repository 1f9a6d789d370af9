// Inside the single executable, code travels as scripts compiled with a V8 code cache that the
// build made after running them (SEA assets, see build/build.ts): the main script, which the
// executable's own entry (src/sea-loader.ts) runs, and the packages only some work needs (mail
// parsing and authentication, tar, the MCP SDK), compiled the first time the code imports one
// of them, not at every start.
import { getAsset, getAssetKeys, getRawAsset } from 'node:sea';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';

const loaded = new Map<string, Record<string, unknown>>();

/**
 * The attachment text worker's script (src/domain/mail/text-worker.mjs bundled): the executable
 * runs it instead of the CLI when started with TEXT_WORKER_ENV set (src/sea-loader.ts), as the
 * extraction process of src/domain/mail/attachment-text.ts.
 */
export const TEXT_WORKER_ASSET = 'text-worker.js';
/** Set (to the job, as JSON) in the environment of a text extraction process. */
export const TEXT_WORKER_ENV = 'MAILROOM_TEXT_WORKER';

/** The inbound analysis worker's script (src/domain/inbound/analysis-worker.ts bundled), run with eval. */
export const ANALYSIS_WORKER_ASSET = 'analysis-worker.js';

/** The search worker's script (src/store/search-worker.mjs bundled), run with eval. */
export const SEARCH_WORKER_ASSET = 'search-worker.js';

/** Asset names of a chunk; build/build.ts writes them under the same names. */
export const chunkAssets = (chunk: string) => ({ source: `chunk-${chunk}.js`, cache: `chunk-${chunk}.cache` });

/** Asset names of the main script (src/sea.ts bundled). */
export const MAIN_ASSETS = { source: 'main.js', cache: 'main.cache' };

type ModuleWrapper = (exports: object, require: NodeRequire, module: object, filename: string, dirname: string) => void;

/**
 * Compiles a script asset (a CommonJS module wrapped in a function expression) with its code
 * cache and runs it; returns its exports. A rejected cache (e.g. other V8 flags through
 * NODE_OPTIONS) only means compiling from source, and so does none: an arm64 build made where
 * no arm64 Node runs has no caches. The cache is read in place (getRawAsset: no copy); the file
 * names are the ones the main script gets inside a single executable.
 */
export function runScriptAsset(assets: { source: string; cache: string }, require: NodeRequire): Record<string, unknown> {
  const script = new Script(getAsset(assets.source, 'utf8'), {
    filename: `mailroom:${assets.source}`,
    cachedData: getAssetKeys().includes(assets.cache) ? Buffer.from(getRawAsset(assets.cache) as ArrayBuffer) : undefined,
  });
  // Only a build that made the cache under other flags gets here without NODE_OPTIONS; it
  // still works, but slower, so it says so (the binary's tests require an empty stderr).
  if (script.cachedDataRejected && !process.env.NODE_OPTIONS) process.stderr.write(`mailroom: warning: V8 refused the code cache of ${assets.source}\n`);
  const module = { exports: {} as Record<string, unknown> };
  (script.runInThisContext() as ModuleWrapper)(module.exports, require, module, process.execPath, dirname(process.execPath));
  return module.exports;
}

/** Runs a bundled CommonJS script asset that has no code cache (the text worker). */
export function runPlainScriptAsset(asset: string, require: NodeRequire): void {
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${getAsset(asset, 'utf8')}\n})`, { filename: `mailroom:${asset}` });
  const module = { exports: {} };
  (script.runInThisContext() as ModuleWrapper)(module.exports, require, module, process.execPath, dirname(process.execPath));
}

/** The exports of `specifier` from the chunk `chunk`. */
export function loadChunk(chunk: string, specifier: string): unknown {
  let exports = loaded.get(chunk);
  if (!exports) {
    // Bundled chunks require nothing but Node's built-in modules.
    exports = runScriptAsset(chunkAssets(chunk), createRequire(process.execPath));
    loaded.set(chunk, exports);
  }
  if (!(specifier in exports)) throw new Error(`${specifier} is not in the ${chunk} chunk`);
  return exports[specifier];
}
