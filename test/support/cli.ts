// Runs the mailroom CLI from source as a child process, the way an operator would.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { knownDatabaseUrl } from './server.ts';
import { guard } from './wait.ts';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ENTRY = join(ROOT, 'cli/mailroom.ts');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The data directory a command line names (--data-dir, or data_dir in its --config file): a
 * test server's on PostgreSQL (MAILROOM_TEST_ENGINE) has its database, which the CLI is given.
 */
async function databaseEnv(args: string[]): Promise<Record<string, string>> {
  const at = (flag: string) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined);
  let dataDir = at('--data-dir');
  const config = at('--config');
  if (!dataDir && config && existsSync(config)) {
    const m = /^data_dir = (".*")$/m.exec(readFileSync(config, 'utf8'));
    if (m) dataDir = JSON.parse(m[1]!) as string;
  }
  const url = dataDir ? knownDatabaseUrl(dataDir) : undefined;
  return url ? { MAILROOM_DATABASE_URL: await url } : {};
}

/** Runs the CLI; `input`, when given, is written to its stdin (else stdin is empty); `env` adds to the environment. */
export async function runCli(args: string[], opts: { cwd?: string; timeoutMs?: number; input?: string; env?: Record<string, string> } = {}): Promise<CliResult> {
  const database = await databaseEnv(args);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ENTRY, ...args], {
      cwd: opts.cwd ?? ROOT,
      env: { ...process.env, ...database, ...opts.env },
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), guard(opts.timeoutMs ?? 30_000));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Starts `mailroom serve` and resolves once its "started" log line names the HTTP address. */
export function startServe(args: string[]): Promise<{ child: ChildProcess; url: string; stdout: () => string; stderr: () => string; exited: Promise<number | null> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ENTRY, 'serve', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve did not start: ${stderr}`));
    }, guard(30_000));
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.on('data', (d) => {
      stdout += d;
      for (const line of stdout.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const entry = JSON.parse(line);
          if (entry.msg === 'started') {
            clearTimeout(timer);
            // Give the bootstrap key (printed right after start) a moment to reach stderr.
            setTimeout(() => resolve({ child, url: entry.http, stdout: () => stdout, stderr: () => stderr, exited }), 200);
          }
        } catch {
          /* partial line */
        }
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code}: ${stderr}`));
    });
  });
}

/** Writes a config file for a test data directory with free ports. */
export function writeTestConfig(dir: string, extra = ''): string {
  const file = join(dir, 'mailroom.toml');
  writeFileSync(
    file,
    `data_dir = ${JSON.stringify(join(dir, 'data'))}\nshared_domain = "agents.test"\n[http]\nlisten = "127.0.0.1:0"\n[smtp]\nlisten = "127.0.0.1:0"\n[outbound]\nmode = "dry-run"\n${extra}`,
  );
  return file;
}
