// The analysis worker: parses received messages (mailparser) and evaluates SPF, DKIM and DMARC
// (mailauth) off the main thread, which keeps the SMTP sessions, the HTTP API and the commits.
// The main thread's pool (analysis.ts) posts one task per message; many run here at once, since
// most of an evaluation's time is spent waiting for DNS. Lookups are answered by the main
// thread's resolver (the configured dns.servers), so this thread opens no sockets; its answers
// are kept here as authentication.ts keeps them on the main thread.
import { parentPort } from 'node:worker_threads';
import type { LogFields } from '../../log.ts';
import { authenticateMessage, type AuthenticationEnv, type AuthenticationResults } from './authentication.ts';
import { parseMessage } from './inbound-parse.ts';
import { screenParsed, type ScreenFor, type Screening } from '../screening/screen.ts';
import { parseStaged, readStaged } from './inbound-large.ts';

/** What the main thread asks: the message, and who sent it (no `auth` for local deliveries). */
export interface AnalysisTask {
  task: number;
  /** The server (one AppContext of the main thread) asking: its resolver answers the lookups, its log gets the lines. */
  server: number;
  raw: Uint8Array;
  /**
   * A large message staged on disk (inbound-large.ts): `raw` is its first bytes, and it is parsed
   * and authenticated from its file; attachment bytes past ATTACHMENT_MEMORY_BYTES go to staged
   * files under `dataDir`/tmp, named in the answer's `files`.
   */
  staged?: { path: string; traceLength: number; dataDir: string };
  auth?: { mailFrom: string; remoteAddress?: string; heloName?: string; hostname: string; dnsTimeout: number };
  /** Screen the message for these recipients (src/domain/screening/); absent when no recipient's inbox screens. */
  screen?: ScreenFor;
}

/** What this thread sends: a task's outcome, a lookup to answer, or a log line. */
export type WorkerMessage =
  | { task: number; parsed: unknown; authentication: AuthenticationResults | null; screening: Screening | null; files?: string[] }
  | { task: number; error: string }
  | { server: number; lookup: number; name: string; rrtype: string }
  | { server: number; log: 'info' | 'warn' | 'error'; msg: string; fields?: LogFields };

/** The main thread's answer to a lookup: the records, or the resolver's error code. */
export interface LookupAnswer {
  lookup: number;
  answer?: unknown;
  error?: { code?: string; message: string };
}

// Whatever the libraries print is dropped, not mixed into the server's JSON log. (Piping the
// thread's output to the main thread instead would keep an idle process from exiting.)
for (const level of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) console[level] = () => undefined;

const port = parentPort!;
const post = (m: WorkerMessage) => port.postMessage(m);
const lookups = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
let nextLookup = 0;
/** One environment per server and settings, so its lookup cache lives as long as the thread. */
const envs = new Map<string, AuthenticationEnv>();

function envFor(server: number, hostname: string, dnsTimeout: number): AuthenticationEnv {
  const key = `${server}\u0000${hostname}\u0000${dnsTimeout}`;
  let env = envs.get(key);
  if (!env) {
    env = {
      log: {
        info: (msg, fields) => post({ server, log: 'info', msg, fields }),
        warn: (msg, fields) => post({ server, log: 'warn', msg, fields }),
        error: (msg, fields) => post({ server, log: 'error', msg, fields }),
      },
      dns: {
        raw: (name, rrtype) =>
          new Promise((resolve, reject) => {
            const lookup = ++nextLookup;
            lookups.set(lookup, { resolve, reject });
            post({ server, lookup, name, rrtype });
          }),
      },
      config: { hostname, dns: { timeout: dnsTimeout } },
    };
    envs.set(key, env);
  }
  return env;
}

async function analyse(t: AnalysisTask): Promise<WorkerMessage> {
  const raw = Buffer.from(t.raw.buffer, t.raw.byteOffset, t.raw.byteLength);
  const staged = t.staged && { ...t.staged, head: raw };
  const [{ parsed, files }, authentication] = await Promise.all([
    staged ? parseStaged({ config: { data_dir: staged.dataDir } }, staged) : parseMessage(raw).then((parsed) => ({ parsed, files: [] })),
    t.auth ? authenticateMessage(envFor(t.server, t.auth.hostname, t.auth.dnsTimeout), { raw, whole: staged && (() => readStaged(staged.path, staged)), ...t.auth }) : null,
  ]);
  return { task: t.task, parsed, authentication, screening: screenParsed(parsed, authentication, t.screen), files };
}

port.on('message', (m: AnalysisTask | LookupAnswer) => {
  if ('lookup' in m) {
    const waiting = lookups.get(m.lookup);
    lookups.delete(m.lookup);
    if (!waiting) return;
    if (m.error) waiting.reject(Object.assign(new Error(m.error.message), { code: m.error.code }));
    else waiting.resolve(m.answer);
    return;
  }
  analyse(m).then(
    (out) => port.postMessage(out),
    (err: unknown) => port.postMessage({ task: m.task, error: (err as Error)?.message ?? String(err) } satisfies WorkerMessage),
  );
});
