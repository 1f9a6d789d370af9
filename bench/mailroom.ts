// The server under test: `mailroom serve` from an esbuild bundle of cli/mailroom.ts (the same
// code the single executable carries), as a child process on loopback ports with a bench
// config, a fresh data dir and its bootstrap key.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build, type BuildOptions, type Plugin } from 'esbuild';
import { stringify } from 'smol-toml';
import { ROOT, WORK, freshDir, stopChild, track, waitFor } from './support.ts';

// bench/work/mailroom.mjs: src/store/migrate-sqlite.ts finds migrations/ at '../../migrations' relative
// to the module, which from bench/work/ is the repository's migrations/ folder.
const BUNDLE = join(WORK, 'mailroom.mjs');
let bundled = false;

/**
 * Packages bundled in rather than imported from node_modules. Node 26's ESM loader reads and
 * parses the nearest package.json anew for each module file it resolves: drizzle-orm's is
 * 179 KB and it has hundreds of files, so importing it left ~150 MB of garbage strings and the
 * bundle's idle RSS at 325 MB (binary, where everything is bundled: 80 MB). Bundled, a package's
 * package.json is read once, at build time.
 */
const BUNDLED_PACKAGES = /^(drizzle-orm|zod|@modelcontextprotocol\/sdk)(\/|$)/;

/** Every other bare import stays external (resolved from node_modules at run time). */
const externalPackages: Plugin = {
  name: 'external-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => (args.kind === 'entry-point' || BUNDLED_PACKAGES.test(args.path) ? undefined : { path: args.path, external: true }));
  },
};

/** Bundles cli/mailroom.ts once per run; npm packages but BUNDLED_PACKAGES stay external. */
export async function bundleMailroom(): Promise<string> {
  if (bundled && existsSync(BUNDLE)) return BUNDLE;
  const options: BuildOptions = { bundle: true, platform: 'node', format: 'esm', target: 'node26', plugins: [externalPackages], logLevel: 'warning' };
  await build({ ...options, entryPoints: [join(ROOT, 'cli', 'mailroom.ts')], outfile: BUNDLE });
  // The analysis worker's script, where src/domain/inbound/analysis.ts looks for it: beside the bundle.
  await build({ ...options, entryPoints: [join(ROOT, 'src', 'domain', 'inbound', 'analysis-worker.ts')], outfile: join(WORK, 'analysis-worker.mjs') });
  // The search worker's, where src/store/search-reader.ts looks for it: beside the bundle too.
  await build({ ...options, entryPoints: [join(ROOT, 'src', 'store', 'search-worker.mjs')], outfile: join(WORK, 'search-worker.mjs') });
  bundled = true;
  return BUNDLE;
}

export interface Mailroom {
  url: string;
  smtpPort: number;
  key: string;
  pid: number;
  child: ChildProcess;
  dir: string;
  dataDir: string;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

type Toml = Record<string, any>;

function merge(base: Toml, over: Toml): Toml {
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && typeof base[k] === 'object' ? merge(base[k], v) : v;
  }
  return out;
}

export function benchConfig(dataDir: string, dnsServer: string, overrides: Toml = {}): Toml {
  return merge(
    {
      data_dir: dataDir,
      hostname: 'mx.bench.localhost',
      shared_domain: 'agents.bench',
      http: { listen: '127.0.0.1:0', public_url: 'http://127.0.0.1:3000' },
      smtp: { listen: '127.0.0.1:0', max_connections: 1000, max_connections_per_ip: 1000 },
      // The API rate limit would cap every HTTP scenario; the bench measures the server, not it.
      // The same for the inbox quota: (b) creates thousands of inboxes with POST /inboxes; and
      // for the daily send limits, per inbox and per account: (c) sends thousands.
      limits: { requests_per_minute: 100_000_000, daily_send_limit: 10_000_000, account_daily_send_limit: 10_000_000, inboxes_per_account: 10_000_000 },
      dns: { servers: [dnsServer], timeout: '2s' },
      webhooks: { allow_insecure_targets: true },
    },
    overrides,
  );
}

/**
 * Starts `mailroom serve` in `bench/work/<name>` (kept: data dir, server.log) and waits for its
 * "started" log line and bootstrap key. `reuseDir` restarts on an existing data dir (pass the
 * key printed by the first start).
 */
export async function startMailroom(name: string, opts: { dns: string; config?: Toml; reuseDir?: string; nodeArgs?: string[]; key?: string }): Promise<Mailroom> {
  const bundle = await bundleMailroom();
  const dir = opts.reuseDir ?? freshDir(name);
  const dataDir = join(dir, 'data');
  const config = benchConfig(dataDir, opts.dns, opts.config);
  const configFile = join(dir, 'mailroom.toml');
  writeFileSync(configFile, stringify(config));
  const logFile = join(dir, 'server.log');
  const errFile = join(dir, 'server.err');
  const out = openSync(logFile, 'a');
  const err = openSync(errFile, 'a');
  const logStart = existsSync(logFile) ? readFileSync(logFile).length : 0;
  const errStart = existsSync(errFile) ? readFileSync(errFile).length : 0;
  // BENCH_PROFILE=1: a V8 CPU profile per server process in <dir>/profile (see bench/profile.ts).
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${join(dir, 'profile')}`] : [];
  // BENCH_NODE_ARGS: more options for the server's Node, space-separated (a V8 flag to try).
  const tried = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = track(spawn(process.execPath, [...profile, ...tried, ...(opts.nodeArgs ?? []), bundle, 'serve', '--config', configFile], { stdio: ['ignore', out, err], cwd: dir }));
  closeSync(out);
  closeSync(err);
  const readNew = (file: string, from: number) => readFileSync(file, 'utf8').slice(from);
  const started = await waitFor(
    `mailroom (${name}) to start`,
    () => {
      if (child.exitCode !== null) throw new Error(`mailroom exited with ${child.exitCode}: ${readNew(errFile, errStart).slice(-1000)}`);
      const lines = readNew(logFile, logStart).split('\n');
      const s = lines.find((l) => l.includes('"msg":"started"'));
      const smtp = lines.find((l) => l.includes('"msg":"smtp listening"'));
      return s ? { http: JSON.parse(s).http as string, smtpPort: smtp ? (JSON.parse(smtp).port as number) : 0 } : undefined;
    },
    60_000,
  );
  let key = opts.key;
  if (!key) {
    key = await waitFor('bootstrap key', () => /mr_live_[A-Za-z0-9]+/.exec(readNew(errFile, errStart))?.[0], 10_000);
  }
  const k = key;
  const api: Mailroom['api'] = async (method, path, body) => {
    const res = await fetch(started.http + path, {
      method,
      headers: { authorization: `Bearer ${k}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  return {
    url: started.http,
    smtpPort: started.smtpPort,
    key: k,
    pid: child.pid!,
    child,
    dir,
    dataDir,
    api,
    stop: () => stopChild(child, 15_000),
  };
}

/** POST /inboxes, failing loudly: every scenario needs one. */
export async function createInbox(m: Mailroom, body: Record<string, unknown> = {}): Promise<{ id: string; address: string }> {
  const res = await m.api('POST', '/inboxes', body);
  if (res.status !== 201) throw new Error(`POST /inboxes: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
