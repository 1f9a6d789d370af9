// A private PostgreSQL server for tests and benchmarks, from Debian's `postgresql` package:
// `initdb` into a temporary directory and `pg_ctl start` on a free loopback port. PostgreSQL
// refuses to run as root, so under root the cluster belongs to the `postgres` system user the
// package creates (`runuser`); otherwise to the current user. One cluster per process; each
// caller gets its own database in it, so suites never see each other's rows. Under `npm test`
// the runner's global setup runs initdb once (global-setup.ts) and each cluster starts from a
// copy of that data directory.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { connectPostgres } from '../../src/store/postgres.ts';
import { migratePostgres } from '../../src/store/migrate.ts';
import { freePort } from './ports.ts';

const PG_ROOT = '/usr/lib/postgresql';

/** The newest installed server's bin directory, or null when the package is missing. */
function binDir(): string | null {
  if (!existsSync(PG_ROOT)) return null;
  const versions = readdirSync(PG_ROOT)
    .filter((v) => existsSync(join(PG_ROOT, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length ? join(PG_ROOT, versions[0]!, 'bin') : null;
}

export const postgresMissing = (): string | false => (binDir() ? false : 'postgresql is not installed (apt-get install postgresql; .ci/install-system installs it)');

export interface PgCluster {
  port: number;
  dir: string;
  /** A connection URL for `database` (default: the cluster's own `postgres` database). */
  url(database?: string): string;
  /** Creates an empty database and answers its URL. */
  createDatabase(name?: string): Promise<string>;
  /**
   * A database with every migration applied, for a test server: a copy of the template's when
   * the cluster was copied from it (far cheaper than migrating: about 200 ms of the server's start
   * on PostgreSQL); otherwise an empty one, which the server migrates as it starts.
   */
  createMigratedDatabase(): Promise<string>;
  stop(): void;
}

/** The template's database with every migration applied (initTemplate). */
const MIGRATED = 'migrated';

let shared: Promise<PgCluster> | null = null;

/** The process's cluster, started on first use and stopped when the process exits. */
export function pgCluster(): Promise<PgCluster> {
  shared ??= startCluster({ durable: false }).then((c) => {
    process.once('exit', () => c.stop());
    return c;
  });
  return shared;
}

let databases = 0;

/** A new temporary directory the cluster's user owns, and a runner of the server's programs as that user. */
function clusterHome(prefix: string): { dir: string; run: (cmd: string, args: string[]) => void } {
  const bin = binDir();
  if (!bin) throw new Error('postgresql is not installed');
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? pgUser() : null;
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const run = (cmd: string, args: string[]) => {
    const argv = asRoot ? ['-u', 'postgres', '--', join(bin, cmd), ...args] : args;
    const r = spawnSync(asRoot ? 'runuser' : join(bin, cmd), argv, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${cmd} failed (${r.status}): ${r.stderr || r.stdout}`);
  };
  return { dir, run };
}

// Locale C: text sorts by bytes, as in SQLite, so ids and cursors order the same on both.
const initdb = (run: (cmd: string, args: string[]) => void, data: string) =>
  run('initdb', ['-D', data, '-U', 'mailroom', '--auth=trust', '--locale=C', '-E', 'UTF8', '--no-sync', '--no-instructions']);

/** A data directory made by initdb that clusters copy instead of running it again (global-setup.ts). */
export const TEMPLATE_ENV = 'MAILROOM_TEST_PG_TEMPLATE';

/**
 * Runs initdb into a directory of its own, and there creates the database test servers' are
 * copied from, with every migration applied (by the code a server runs); answers the data directory, for TEMPLATE_ENV.
 */
export async function initTemplate(): Promise<string> {
  const { dir, run } = clusterHome('mailroom-pg-template-');
  const data = join(dir, 'data');
  initdb(run, data);
  const cluster = await serve(dir, data, run, { durable: false, remove: false });
  try {
    const pool = connectPostgres(await cluster.createDatabase(MIGRATED), { max: 1 });
    try {
      await migratePostgres(pool);
    } finally {
      await pool.end();
    }
  } finally {
    cluster.stop();
  }
  return data;
}

/**
 * Starts a cluster. `durable: false` turns fsync off (tests: the server is never killed, only
 * the nodes are); benchmarks pass `durable: true` to measure what an operator would run.
 * `statements`: pg_stat_statements loaded, nested statements (triggers') counted too.
 */
export async function startCluster(opts: { durable: boolean; statements?: boolean }): Promise<PgCluster> {
  const { dir, run } = clusterHome('mailroom-pg-');
  const data = join(dir, 'data');
  const template = process.env[TEMPLATE_ENV];
  if (template) {
    // cp -a keeps the owner and the modes (the server refuses a data directory others can read).
    const r = spawnSync('cp', ['-a', template, data], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`copying ${template} failed (${r.status}): ${r.stderr}`);
  } else initdb(run, data);
  return serve(dir, data, run, { durable: opts.durable, statements: opts.statements, remove: true, migrated: Boolean(template) });
}

/** Runs the server on `data` until stop(), which removes `dir` too when `remove`. */
async function serve(dir: string, data: string, run: (cmd: string, args: string[]) => void, opts: { durable: boolean; statements?: boolean; remove: boolean; migrated?: boolean }): Promise<PgCluster> {
  const port = await freePort();
  const settings = [
    `-p ${port}`,
    `-k ${dir}`,
    "-c listen_addresses='127.0.0.1'",
    '-c max_connections=200',
    ...(opts.durable ? [] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off']),
    ...(opts.statements ? ['-c shared_preload_libraries=pg_stat_statements', '-c pg_stat_statements.track=all'] : []),
  ].join(' ');
  run('pg_ctl', ['start', '-w', '-s', '-D', data, '-l', join(dir, 'server.log'), '-o', settings]);
  const url = (database = 'postgres') => `postgres://mailroom@127.0.0.1:${port}/${database}`;
  const create = async (name: string, from?: string) => {
    const admin = new pg.Client({ connectionString: url() });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE "${name}"${from ? ` TEMPLATE "${from}"` : ''}`);
    } finally {
      await admin.end();
    }
    return url(name);
  };
  let stopped = false;
  return {
    port,
    dir,
    url,
    createDatabase: (name = `t${process.pid}_${++databases}`) => create(name),
    createMigratedDatabase: () => create(`t${process.pid}_${++databases}`, opts.migrated ? MIGRATED : undefined),
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        // A template is stopped cleanly, so its copies start without recovery.
        run('pg_ctl', ['stop', '-s', '-m', opts.remove ? 'immediate' : 'fast', '-D', data]);
      } catch {
        // already gone
      }
      if (opts.remove) rmSync(dir, { recursive: true, force: true });
    },
  };
}

function pgUser(): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}
