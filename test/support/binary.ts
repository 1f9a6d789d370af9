// Runs the built single executable (build/mailroom) the way an operator would: copied into an
// empty directory and started with an empty environment (`env -i`: no PATH, so no node, and no
// node_modules anywhere near it). Builds the binary first when it is missing or older than
// the sources.
// MAILROOM_BINARY names another build to test (build/mailroom-arm64), and MAILROOM_BINARY_RUNNER
// what runs it on this machine, e.g. the arm64 build on x64 under qemu user emulation:
//   MAILROOM_BINARY=build/mailroom-arm64 MAILROOM_BINARY_RUNNER="qemu-aarch64-static -L /usr/aarch64-linux-gnu" npm run test:binary
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEFAULT_BINARY = join(ROOT, 'build', 'mailroom');
const ARM64_BINARY = join(ROOT, 'build', 'mailroom-arm64');
export const BINARY = process.env.MAILROOM_BINARY ? resolve(ROOT, process.env.MAILROOM_BINARY) : DEFAULT_BINARY;
/** What `file` says of the binary's architecture. */
export const BINARY_ARCH = BINARY === ARM64_BINARY ? 'ARM aarch64' : 'x86-64';

/** The runner's words, its program made absolute (the binary runs with an empty environment: no PATH). */
const RUNNER = (() => {
  const words = (process.env.MAILROOM_BINARY_RUNNER ?? '').split(/\s+/).filter(Boolean);
  if (words.length && !isAbsolute(words[0])) {
    const found = spawnSync('sh', ['-c', 'command -v "$1"', 'sh', words[0]], { encoding: 'utf8' });
    if (found.status !== 0) throw new Error(`MAILROOM_BINARY_RUNNER: ${words[0]} not found`);
    words[0] = found.stdout.trim();
  }
  return words;
})();

/** Timeouts stretch by this much under a runner: qemu translates every instruction, a start takes seconds. */
export const SLOWDOWN = RUNNER.length ? 6 : 1;

/** The command and arguments that run `file` (a copy of the binary) with `args` here. */
export function binaryCommand(file: string, args: string[]): { command: string; args: string[] } {
  return RUNNER.length ? { command: RUNNER[0], args: [...RUNNER.slice(1), file, ...args] } : { command: file, args };
}

/** Newest modification time under the inputs of the build. */
function newestSource(): number {
  let newest = 0;
  const visit = (path: string) => {
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
    else newest = Math.max(newest, st.mtimeMs);
  };
  for (const p of ['src', 'cli', 'migrations', 'build/build.ts', 'package-lock.json']) visit(join(ROOT, p));
  return newest;
}

/**
 * Builds the binary under test (build/mailroom, or build/mailroom-arm64) unless an up-to-date
 * one exists; returns why it was (re)built, if it was. Any other MAILROOM_BINARY is used as it is.
 */
export function ensureBinary(): string | null {
  const st = statSync(BINARY, { throwIfNoEntry: false });
  const buildArgs = BINARY === DEFAULT_BINARY ? [] : BINARY === ARM64_BINARY ? ['--arch', 'arm64'] : null;
  if (!buildArgs) {
    if (!st) throw new Error(`MAILROOM_BINARY: ${BINARY} does not exist`);
    return null;
  }
  const reason = !st ? 'missing' : st.mtimeMs < newestSource() ? 'older than the sources' : null;
  if (!reason) return null;
  const res = spawnSync(process.execPath, [join(ROOT, 'build', 'build.ts'), ...buildArgs], { cwd: ROOT, encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`npm run build failed:\n${res.stdout}\n${res.stderr}`);
  return reason;
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `./mailroom args` in `dir` with exactly `env` (default: empty, as `env -i`), `input` on its stdin. */
export function runBinary(dir: string, args: string[], env: Record<string, string> = {}, input?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const run = binaryCommand(join(dir, 'mailroom'), args);
    const child = spawn(run.command, run.args, { cwd: dir, env, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    if (input !== undefined) child.stdin!.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000 * SLOWDOWN);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface BinaryServe {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `./mailroom serve` in `dir` and resolves once it logs "started". */
export function serveBinary(dir: string, env: Record<string, string> = {}): Promise<BinaryServe> {
  return new Promise((resolve, reject) => {
    const run = binaryCommand(join(dir, 'mailroom'), ['serve']);
    const child = spawn(run.command, run.args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let started = false;
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve did not start within ${30 * SLOWDOWN} s:\n${stdout}\n${stderr}`));
    }, 30_000 * SLOWDOWN);
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.on('data', (d) => {
      stdout += d;
      if (started) return;
      for (const line of stdout.split('\n')) {
        if (!line.startsWith('{')) continue;
        let entry: { msg?: string; http?: string };
        try {
          entry = JSON.parse(line);
        } catch {
          continue; // partial line
        }
        if (entry.msg !== 'started' || !entry.http) continue;
        started = true;
        clearTimeout(timer);
        resolve({
          child,
          url: entry.http,
          stdout: () => stdout,
          stderr: () => stderr,
          stop: () => {
            child.kill('SIGTERM');
            return exited;
          },
        });
        return;
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      if (!started) reject(new Error(`serve exited with ${code}:\n${stdout}\n${stderr}`));
    });
  });
}

/** A port that was free a moment ago (the binary's config needs ports before it starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}
