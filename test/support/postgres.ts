// A private PostgreSQL server for tests and benchmarks, from Debian's `postgresql` package:
// `initdb` into a temporary directory and `pg_ctl start` on a free loopback port. PostgreSQL
// refuses to run as root, so under root the cluster belongs to the `postgres` system user the
// package creates (`runuser`); otherwise to the current user. One cluster per process; each
// caller gets its own database in it, so suites never see each other's rows.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './child-server.ts';

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
  stop(): void;
}

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

/**
 * Starts a cluster. `durable: false` turns fsync off (tests: the server is never killed, only
 * the nodes are); benchmarks pass `durable: true` to measure what an operator would run.
 */
export async function startCluster(opts: { durable: boolean }): Promise<PgCluster> {
  const bin = binDir();
  if (!bin) throw new Error('postgresql is not installed');
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-pg-'));
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? pgUser() : null;
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const run = (cmd: string, args: string[]) => {
    const argv = asRoot ? ['-u', 'postgres', '--', join(bin, cmd), ...args] : args;
    const r = spawnSync(asRoot ? 'runuser' : join(bin, cmd), argv, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${cmd} failed (${r.status}): ${r.stderr || r.stdout}`);
  };
  const data = join(dir, 'data');
  // Locale C: text sorts by bytes, as in SQLite, so ids and cursors order the same on both.
  run('initdb', ['-D', data, '-U', 'mailroom', '--auth=trust', '--locale=C', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  const port = await freePort();
  const settings = [
    `-p ${port}`,
    `-k ${dir}`,
    "-c listen_addresses='127.0.0.1'",
    '-c max_connections=200',
    ...(opts.durable ? [] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off']),
  ].join(' ');
  run('pg_ctl', ['start', '-w', '-s', '-D', data, '-l', join(dir, 'server.log'), '-o', settings]);
  const url = (database = 'postgres') => `postgres://mailroom@127.0.0.1:${port}/${database}`;
  let stopped = false;
  return {
    port,
    dir,
    url,
    async createDatabase(name = `t${process.pid}_${++databases}`) {
      const admin = new pg.Client({ connectionString: url() });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE "${name}"`);
      } finally {
        await admin.end();
      }
      return url(name);
    },
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        run('pg_ctl', ['stop', '-s', '-m', 'immediate', '-D', data]);
      } catch {
        // already gone
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function pgUser(): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}
