// Test harness: boots the real server (HTTP, SMTP, job runner) on loopback ports 0 with a
// temporary data directory, and gives tests an account, an API key and a fetch helper.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { configFrom, type Config } from '../../src/config.ts';
import type { Clock } from '../../src/context.ts';
import { createAccount } from '../../src/domain/accounts/accounts.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { createLogger, silentLogger, type Logger } from '../../src/log.ts';
import { startServer, type RunningServer } from '../../src/main.ts';
import { checkAnswersOf } from './openapi-check.ts';
import { pgCluster } from './postgres.ts';

process.on('unhandledRejection', (err) => {
  // An unhandled rejection anywhere fails the run (STYLE.md §7).
  console.error('unhandled rejection in test process:', err);
  process.exitCode = 1;
  throw err;
});

export interface TestServer {
  server: RunningServer;
  url: string;
  key: string;
  keyId: string;
  accountId: string;
  dataDir: string;
  config: Config;
  /** fetch against the API with this server's key (override with opts.key; null for none). */
  api(method: string, path: string, body?: unknown, opts?: { key?: string | null; headers?: Record<string, string> }): Promise<ApiResponse>;
  /** A second account with its own key, for cross-account checks. */
  newAccount(name?: string): Promise<{ accountId: string; key: string; keyId: string }>;
  close(): Promise<void>;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/** Reads a fetch response whole: status, headers, text, and the JSON body when it parses. */
export async function readResponse(res: Response): Promise<ApiResponse> {
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

/** Raw TOML-shaped overrides, e.g. { limits: { requests_per_minute: 5 } }. */
export type Overrides = Record<string, unknown>;

function merge(base: Record<string, any>, over: Record<string, any>): Record<string, any> {
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && typeof base[k] === 'object' ? merge(base[k], v) : v;
  }
  return out;
}

/**
 * The engine the suite runs on: MAILROOM_TEST_ENGINE=postgres gives every test server a
 * database of its own in the harness's private PostgreSQL (test/support/postgres.ts), kept for
 * its data directory so a restarted server finds its state; otherwise embedded SQLite.
 */
export const TEST_ENGINE = process.env.MAILROOM_TEST_ENGINE === 'postgres' ? 'postgres' : 'sqlite';
const databases = new Map<string, Promise<string>>();

const declareNothing = (() => undefined) as unknown as typeof test;

/**
 * `describe` and `test` for what only one engine has (its files, its row locks, its timeouts):
 * in that engine's pass they declare as usual; in the other pass they declare nothing, so the
 * test is neither run nor reported skipped there, and a fully provisioned `npm test` reports
 * `# skipped: 0` while each such test still runs in its own pass (build/test.sh runs both).
 */
export function onEngine(engine: 'sqlite' | 'postgres'): { describe: typeof describe; test: typeof test } {
  return TEST_ENGINE === engine ? { describe, test } : { describe: declareNothing as unknown as typeof describe, test: declareNothing };
}

/** The database of a test server's data directory, if a server on PostgreSQL was started on it. */
export const knownDatabaseUrl = (dataDir: string): Promise<string> | undefined => databases.get(resolve(dataDir));

export function testDatabaseUrl(dataDir: string): Promise<string> {
  dataDir = resolve(dataDir);
  let url = databases.get(dataDir);
  if (!url) databases.set(dataDir, (url = pgCluster().then((c) => c.createMigratedDatabase())));
  return url;
}

export async function startTestServer(overrides: Overrides = {}, opts: { clock?: Clock; log?: Logger; dataDir?: string } = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'mailroom-test-'));
  if (TEST_ENGINE === 'postgres' && !('database' in overrides)) overrides = { ...overrides, database: { url: await testDatabaseUrl(dataDir) } };
  const raw = merge(
    {
      data_dir: dataDir,
      hostname: 'mx.test.localhost',
      shared_domain: 'agents.test',
      http: { listen: '127.0.0.1:0', public_url: 'http://127.0.0.1:0', shutdown_grace: '2s' },
      smtp: { listen: '127.0.0.1:0' },
      outbound: { mode: 'dry-run' },
      webhooks: { allow_insecure_targets: true },
      dns: { servers: ['127.0.0.1:9'], timeout: '1s' },
    },
    overrides,
  );
  const config = configFrom(raw);
  const log = opts.log ?? (process.env.MAILROOM_TEST_LOG ? createLogger() : silentLogger);
  const server = await startServer(config, log, { clock: opts.clock });
  // Every JSON answer of this server is checked against openapi.json (test/support/openapi-check.ts).
  checkAnswersOf(server.httpUrl);
  // Attachment URLs must point at the port actually bound.
  if ((overrides.http as Record<string, unknown> | undefined)?.public_url === undefined) config.http.public_url = server.httpUrl;
  const newAccount = async (name = 'test') => {
    const acc = await createAccount(server.ctx, name);
    const k = await createApiKey(server.ctx, acc.id, { name: 'test' });
    return { accountId: acc.id, key: k.key, keyId: k.id };
  };
  const main = await newAccount('main');
  const api: TestServer['api'] = async (method, path, body, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    const key = o.key === undefined ? main.key : o.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = typeof body === 'string' ? body : JSON.stringify(body);
      headers['content-type'] ??= 'application/json';
    }
    return readResponse(await fetch(server.httpUrl + path, { method, headers, body: payload }));
  };
  return {
    server,
    url: server.httpUrl,
    key: main.key,
    keyId: main.keyId,
    accountId: main.accountId,
    dataDir,
    config,
    api,
    newAccount,
    async close() {
      await server.close();
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Asserts the error envelope: exact status and code. */
export function expectError(res: ApiResponse, status: number, code: string): void {
  if (res.status !== status || res.body?.error?.code !== code || res.body?.error?.status !== status || typeof res.body?.error?.message !== 'string') {
    throw new Error(`expected ${status} ${code}, got ${res.status} ${res.text.slice(0, 300)}`);
  }
}
