// Inside the single executable, code travels as scripts compiled with a V8 code cache that the
// build made after running them (SEA assets, see build/build.ts): the main script, which the
// executable's own entry (src/sea-loader.ts) runs, and the packages only some work needs (mail
// parsing and authentication, tar, the MCP SDK), compiled the first time the code imports one
// of them, not at every start.
import { getAssetKeys, getRawAsset } from 'node:sea';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
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
 * The executable ends with this, after the JSON of where its script assets lie in the file
 * (name → [offset, length]) and that JSON's length in 10 digits; build/build.ts appends it.
 */
export const ASSET_INDEX_MAGIC = 'MAILROOM-ASSET-INDEX';

let assetIndex: Record<string, [number, number]> | undefined;

/** The trailer's index of assets in the executable file ({} when it has none or cannot be read). */
function readAssetIndex(): Record<string, [number, number]> {
  if (assetIndex) return assetIndex;
  assetIndex = {};
  let fd: number | undefined;
  try {
    fd = openSync(process.execPath, 'r');
    const size = fstatSync(fd).size;
    const tail = Buffer.alloc(ASSET_INDEX_MAGIC.length + 10);
    readSync(fd, tail, 0, tail.length, size - tail.length);
    if (tail.subarray(10).toString('latin1') !== ASSET_INDEX_MAGIC) return assetIndex;
    const json = Buffer.alloc(Number(tail.subarray(0, 10).toString('latin1')));
    readSync(fd, json, 0, json.length, size - tail.length - json.length);
    assetIndex = JSON.parse(json.toString('latin1')) as Record<string, [number, number]>;
  } catch {
    // An executable only executable, not readable (mode 0711): the assets come from the mapping.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  return assetIndex;
}

/**
 * The bytes of a script asset (a script, a code cache, the migrations), read from the
 * executable file rather than through node:sea. node:sea's assets are pages of the executable
 * mapped into the process, and once touched they stay in its resident set for good, although a
 * script is only read once to make its string and a code cache once to compile: the main script
 * and its cache were 3.9 MB of an idle server's RSS. Read like this, they are in the page cache
 * (shared, dropped under pressure) and the buffer is garbage once used. Checked against the
 * mapped asset's length and ends (a page or two); anything amiss falls back to node:sea.
 */
export function assetBytes(name: string): Buffer {
  const mapped = Buffer.from(getRawAsset(name) as ArrayBuffer);
  const at = readAssetIndex()[name];
  if (at && at[1] === mapped.length) {
    let fd: number | undefined;
    try {
      fd = openSync(process.execPath, 'r');
      const bytes = Buffer.allocUnsafeSlow(at[1]);
      if (readSync(fd, bytes, 0, at[1], at[0]) === at[1]) {
        const ends = Math.min(64, at[1]);
        if (bytes.subarray(0, ends).equals(mapped.subarray(0, ends)) && bytes.subarray(at[1] - ends).equals(mapped.subarray(at[1] - ends))) return bytes;
      }
    } catch {
      // fall back to the mapping below
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
  return mapped;
}

/** A script asset as text (what getAsset(name, 'utf8') gives), read as assetBytes does. */
export function assetText(name: string): string {
  return new TextDecoder('utf-8').decode(assetBytes(name));
}

/**
 * Compiles a script asset (a CommonJS module wrapped in a function expression) with its code
 * cache and runs it; returns its exports. A rejected cache (e.g. other V8 flags through
 * NODE_OPTIONS) only means compiling from source, and so does none: an arm64 build made where
 * no arm64 Node runs has no caches. Source and cache are read from the file (assetBytes); the
 * file names are the ones the main script gets inside a single executable.
 */
export function runScriptAsset(assets: { source: string; cache: string }, require: NodeRequire): Record<string, unknown> {
  const script = new Script(assetText(assets.source), {
    filename: `mailroom:${assets.source}`,
    cachedData: getAssetKeys().includes(assets.cache) ? assetBytes(assets.cache) : undefined,
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
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${assetText(asset)}\n})`, { filename: `mailroom:${asset}` });
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
