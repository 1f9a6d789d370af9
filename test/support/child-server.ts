// The real server as a child process (`node cli/mailroom.ts serve --config …`) on
// fixed loopback ports, so suites can SIGTERM or SIGKILL it and start it again on the same
// data directory and ports while their clients keep the same addresses.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { createAccount } from '../../src/domain/accounts/accounts.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { silentLogger } from '../../src/log.ts';
import { freePort } from './ports.ts';
import { guard } from './wait.ts';

export { freePort };

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ENTRY = join(ROOT, 'cli/mailroom.ts');

export interface Instance {
  dir: string;
  dataDir: string;
  configFile: string;
  httpUrl: string;
  smtpPort: number;
  key: string;
  accountId: string;
}

/** Writes a config (fixed ports, `extraToml` appended) and creates an account and key in the data dir. */
export async function prepareInstance(dir: string, extraToml = ''): Promise<Instance> {
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir, { recursive: true });
  const httpPort = await freePort();
  const smtpPort = await freePort();
  const configFile = join(dir, 'mailroom.toml');
  // Listen addresses go into the [http] and [smtp] tables, which extraToml may also set.
  let rest = extraToml;
  for (const [table, keys] of [
    ['http', `listen = "127.0.0.1:${httpPort}"\npublic_url = "http://127.0.0.1:${httpPort}"`],
    ['smtp', `listen = "127.0.0.1:${smtpPort}"`],
  ] as const) {
    const header = `[${table}]\n`;
    rest = rest.includes(header) ? rest.replace(header, `${header}${keys}\n`) : `${rest}\n${header}${keys}\n`;
  }
  writeFileSync(configFile, [`data_dir = ${JSON.stringify(dataDir)}`, 'hostname = "mx.test.localhost"', 'shared_domain = "agents.test"', rest].join('\n') + '\n');
  const ctx = await createContext(loadConfig(configFile), silentLogger);
  try {
    const account = await createAccount(ctx, 'reliability');
    const key = await createApiKey(ctx, account.id, { name: 'harness' });
    return { dir, dataDir, configFile, httpUrl: `http://127.0.0.1:${httpPort}`, smtpPort, key: key.key, accountId: account.id };
  } finally {
    await closeContext(ctx);
  }
}

export interface ChildServer {
  child: ChildProcess;
  /** Everything the server wrote on stdout (JSON log lines). */
  log(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `mailroom serve` and resolves once it logged "started" (listeners bound, jobs recovered). */
export function startChild(inst: Instance, timeoutMs = 30_000): Promise<ChildServer> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ENTRY, 'serve', '--config', inst.configFile], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let started = false;
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on('exit', (code, signal) => r({ code, signal })));
    let stopAsked = false;
    const kill = child.kill.bind(child);
    child.kill = (signal?: NodeJS.Signals | number) => {
      stopAsked = true;
      return kill(signal);
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve did not start within ${guard(timeoutMs)} ms: ${err.slice(-2000)}`));
    }, guard(timeoutMs));
    child.stderr!.on('data', (d) => (err += d));
    child.stdout!.on('data', (d) => {
      out += d;
      if (!started && out.includes('"msg":"started"')) {
        started = true;
        clearTimeout(timer);
        resolve({ child, log: () => out, stderr: () => err, exited });
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      if (!started) reject(new Error(`serve exited (${code ?? signal}) before starting: ${err.slice(-2000)}`));
      // Any end of a started server that its test did not ask for (a crash, or a signal from
      // elsewhere) shows in the test only as refused connections: say how it ended here.
      else if (!stopAsked) {
        const lines = out.trimEnd().split('\n');
        console.log(
          `# mailroom serve (pid ${child.pid}) exited with ${code ?? signal} after starting, not stopped by its test; its stderr ends: ${err.slice(-2000)}; its log ends: ${lines.slice(-5).join('\n')}`,
        );
      }
    });
  });
}

/** Sends `signal` and waits for the process to exit. */
export async function stopChild(server: ChildServer, signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill(signal);
  return server.exited;
}
