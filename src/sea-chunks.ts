// Inside the single executable, code travels as scripts compiled with a V8 code cache that the
// build made after running them (SEA assets, see build/build.ts): the main script, which the
// executable's own entry (src/sea-loader.ts) runs, and the packages only some work needs (mail
// parsing and authentication, tar, the MCP SDK), compiled the first time the code imports one
// of them, not at every start.
import { getRawAsset } from 'node:sea';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';
import { holdingV8Flags } from './v8-flags.ts';

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
 * Every asset travels in this one node:sea asset: a header (its length in 10 digits, then the
 * JSON of name → [offset, length] in the pack) and the assets' bytes. node:sea reads the name of
 * each of its assets at the first use, a page or more of the executable each (with the kernel's
 * read-around, 60-120 KB), and those pages stayed in the RSS: one asset, one name.
 */
export const PACK_ASSET = 'mailroom.pack';

/**
 * The executable ends with where the pack lies in the file (10 digits) and this; build/build.ts
 * appends both after the last ELF segment, which is not loaded.
 */
export const PACK_TRAILER_MAGIC = 'MAILROOM-PACK-OFFSET';

/** The header of a pack of `assets` (name → bytes), the offsets counted from the pack's start. */
export function packHeader(assets: Array<[string, number]>): Buffer {
  // The offsets depend on the header's length, which depends on the offsets' digits: settle it.
  let length = 0;
  for (;;) {
    const index: Record<string, [number, number]> = {};
    let at = length;
    for (const [name, size] of assets) {
      index[name] = [at, size];
      at += size;
    }
    const json = JSON.stringify(index);
    const header = Buffer.from(String(json.length).padStart(10, '0') + json, 'latin1');
    if (header.length === length) return header;
    length = header.length;
  }
}

interface Pack {
  index: Record<string, [number, number]>;
  /** Where the pack starts in the executable file, when the file can be read and agrees. */
  fileOffset?: number;
}

let pack: Pack | undefined;

/**
 * The pack as node:sea maps it (no copy; pages touched as read). Not kept: V8 counts the whole
 * mapping (19 MB) as external memory for as long as the ArrayBuffer lives, which would bring
 * full collections closer under load.
 */
const mappedPack = (): Buffer => Buffer.from(getRawAsset(PACK_ASSET) as ArrayBuffer);

function openPack(): Pack {
  if (pack) return pack;
  const mapped = mappedPack();
  const header = Buffer.from(mapped.subarray(0, 10 + Number(mapped.subarray(0, 10).toString('latin1'))));
  pack = { index: JSON.parse(header.subarray(10).toString('latin1')) as Record<string, [number, number]> };
  let fd: number | undefined;
  try {
    fd = openSync(process.execPath, 'r');
    const size = fstatSync(fd).size;
    const tail = Buffer.alloc(10 + PACK_TRAILER_MAGIC.length);
    readSync(fd, tail, 0, tail.length, size - tail.length);
    if (tail.subarray(10).toString('latin1') === PACK_TRAILER_MAGIC) {
      const at = Number(tail.subarray(0, 10).toString('latin1'));
      // The same header at that offset: the file is the executable that runs.
      const there = Buffer.alloc(header.length);
      if (readSync(fd, there, 0, there.length, at) === there.length && there.equals(header)) pack.fileOffset = at;
    }
  } catch {
    // An executable that may be run but not read (mode 0711): the assets come from the mapping.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  return pack;
}

/** Whether the executable carries asset `name`. */
export function hasAsset(name: string): boolean {
  return name in openPack().index;
}

/**
 * The bytes of an asset (a script, a code cache, the migrations, the SQLite addon), read from
 * the executable file rather than through the mapping: a script is read once to make its string
 * and a code cache once to compile, but pages of the mapping, once touched, stay in the
 * process's RSS for good (the main script and its cache were 3.9 MB of an idle server's). Read
 * like this they are in the page cache (shared, dropped under pressure) and the buffer is
 * garbage once used. An unreadable executable or a pack not found in it: the mapping.
 */
export function assetBytes(name: string): Buffer {
  const p = openPack();
  const entry = p.index[name];
  if (!entry) throw new Error(`the executable carries no asset ${name}`);
  const [at, length] = entry;
  if (p.fileOffset !== undefined) {
    let fd: number | undefined;
    try {
      fd = openSync(process.execPath, 'r');
      const bytes = Buffer.allocUnsafeSlow(length);
      if (readSync(fd, bytes, 0, length, p.fileOffset + at) === length) return bytes;
    } catch {
      // the mapping below
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
  return mappedPack().subarray(at, at + length);
}

/** An asset as text (what node:sea's getAsset(name, 'utf8') gave), read as assetBytes does. */
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
export function runScriptAsset(assets: { source: string; cache: string }, require: NodeRequire, beforeRun?: () => void): Record<string, unknown> {
  const source = assetText(assets.source);
  const cachedData = hasAsset(assets.cache) ? assetBytes(assets.cache) : undefined;
  // Not while another thread changes V8's flags, which the cache must match (src/v8-flags.ts).
  const script = holdingV8Flags(() => new Script(source, { filename: `mailroom:${assets.source}`, cachedData }));
  // Only a build that made the cache under other flags gets here without NODE_OPTIONS; it
  // still works, but slower, so it says so (the binary's tests require an empty stderr).
  if (script.cachedDataRejected && !process.env.NODE_OPTIONS) process.stderr.write(`mailroom: warning: V8 refused the code cache of ${assets.source}\n`);
  const module = { exports: {} as Record<string, unknown> };
  beforeRun?.();
  (script.runInThisContext() as ModuleWrapper)(module.exports, require, module, process.execPath, dirname(process.execPath));
  return module.exports;
}

/** Runs a bundled CommonJS script asset that has no code cache (the text worker). */
export function runPlainScriptAsset(asset: string, require: NodeRequire): void {
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${assetText(asset)}\n})`, { filename: `mailroom:${asset}` });
  const module = { exports: {} };
  (script.runInThisContext() as ModuleWrapper)(module.exports, require, module, process.execPath, dirname(process.execPath));
}

let beforeCompile: () => void = () => {};

/** Runs `hook` before a chunk is compiled (src/sea.ts: V8's optimizing compilers on, src/startup-tiers.ts). */
export function beforeChunkCompile(hook: () => void): void {
  beforeCompile = hook;
}

/** The exports of `specifier` from the chunk `chunk`. */
export function loadChunk(chunk: string, specifier: string): unknown {
  let exports = loaded.get(chunk);
  if (!exports) {
    beforeCompile();
    // Bundled chunks require nothing but Node's built-in modules.
    exports = runScriptAsset(chunkAssets(chunk), createRequire(process.execPath));
    loaded.set(chunk, exports);
  }
  if (!(specifier in exports)) throw new Error(`${specifier} is not in the ${chunk} chunk`);
  return exports[specifier];
}
