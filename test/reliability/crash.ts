// Crash consistency: the real server as a child process, driven with load and SIGKILLed at
// random points, restarted on the same data directory, round after round. Three scenarios:
// SMTP ingest, outbound sends to a slow or absent MX, and pending webhook deliveries. Each
// returns its figures and the invariant violations it found (none expected).
import { existsSync, mkdtempSync, readdirSync, rmSync, type Dirent } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { configFrom } from '../../src/config.ts';
import { openDatabase } from '../../src/store/client.ts';
import { prepareInstance, startChild, stopChild, type ChildServer, type Instance } from '../support/child-server.ts';
import { startTestDns } from '../support/dns.ts';
import { startReceiver } from '../support/receiver.ts';
import { startSlowMx } from '../support/slow-mx.ts';

export interface ScenarioResult {
  name: string;
  rounds: number;
  seconds: number;
  figures: Record<string, number>;
  violations: string[];
}

/** mulberry32: a small seeded generator, so a run's random choices can be replayed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const bare = (id: string) => id.replace(/^<|>$/g, '');

/** One SMTP connection whose replies reject when the server goes away. */
export class LoadSession {
  private buf = '';
  private waiting: Array<{ resolve: (code: number) => void; reject: (e: Error) => void }> = [];
  private dead = false;
  private readonly socket: Socket;
  private constructor(socket: Socket) {
    this.socket = socket;
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      this.buf += d;
      let m: RegExpExecArray | null;
      while ((m = /^(?:\d{3}-[^\n]*\n)*(\d{3})(?: [^\n]*)?\n/.exec(this.buf))) {
        this.buf = this.buf.slice(m[0].length);
        this.waiting.shift()?.resolve(Number(m[1]));
      }
    });
    const fail = () => {
      this.dead = true;
      for (const w of this.waiting.splice(0)) w.reject(new Error('connection lost'));
    };
    socket.on('error', fail);
    socket.on('close', fail);
  }

  static async open(port: number): Promise<LoadSession> {
    const socket = connect(port, '127.0.0.1');
    const s = new LoadSession(socket);
    const greeting = await s.reply();
    if (greeting !== 220) throw new Error(`greeting ${greeting}`);
    if ((await s.cmd('EHLO load.example')) !== 250) throw new Error('EHLO refused');
    return s;
  }

  private reply(): Promise<number> {
    if (this.dead) return Promise.reject(new Error('connection lost'));
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  cmd(line: string): Promise<number> {
    const p = this.reply();
    this.socket.write(line + '\r\n');
    return p;
  }

  /**
   * One message. Resolves the final reply code; `sent` is set once the terminating dot is on
   * the wire, from which moment the server may have stored it even if no reply arrives.
   */
  async message(to: string, body: string, state: { sent: boolean }): Promise<number> {
    if ((await this.cmd('MAIL FROM:<load@example.org>')) !== 250) return 0;
    if ((await this.cmd(`RCPT TO:<${to}>`)) !== 250) return 0;
    if ((await this.cmd('DATA')) !== 354) return 0;
    const p = this.reply();
    this.socket.write(body.replace(/(^|\n)\./g, '$1..') + '\r\n.\r\n');
    state.sent = true;
    return p;
  }

  close(): void {
    this.socket.destroy();
  }
}

function messageBody(id: string, to: string, random: () => number): string {
  const lines = [`From: load@example.org`, `To: ${to}`, `Subject: ${id}`, `Message-ID: <${id}>`];
  if (random() < 0.3) {
    // Some messages carry an attachment, so blob files are written as well as rows.
    const b64 = Buffer.alloc(Math.floor(random() * 40_000) + 100, id)
      .toString('base64')
      .replace(/.{76}/g, '$&\r\n');
    lines.push(
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b"',
      '',
      '--b',
      'Content-Type: text/plain',
      '',
      `body of ${id}`,
      '--b',
      'Content-Type: application/octet-stream',
      'Content-Disposition: attachment; filename="a.bin"',
      'Content-Transfer-Encoding: base64',
      '',
      b64,
      '--b--',
    );
  } else {
    lines.push('', `body of ${id}`);
  }
  return lines.join('\r\n');
}

export interface SmtpFate {
  /** Message-IDs (without <>) answered 250. */
  accepted: Set<string>;
  /** Sent in full, but the connection went before the reply: stored or not. */
  inDoubt: Set<string>;
  refused: number;
}

/**
 * Drives parallel SMTP connections until `stop()` says stop; records each message's fate. A
 * connection that cannot be opened (the server is down) is tried again every 50 ms. `gapMs`
 * paces each connection (a pause after every message), `to` is the recipient.
 */
export async function smtpLoad(port: number, connections: number, prefix: string, random: () => number, stop: () => boolean, fate: SmtpFate, opts: { to?: string; gapMs?: () => number } = {}) {
  const to = opts.to ?? 'crash@agents.test';
  await Promise.all(
    Array.from({ length: connections }, async (_v, c) => {
      let n = 0;
      while (!stop()) {
        let session: LoadSession;
        try {
          session = await LoadSession.open(port);
        } catch {
          await sleep(50);
          continue;
        }
        try {
          while (!stop()) {
            const id = `${prefix}-c${c}-${n++}@load.example`;
            const state = { sent: false };
            try {
              const code = await session.message(to, messageBody(id, to, random), state);
              if (code === 250) fate.accepted.add(id);
              else fate.refused++;
              if (opts.gapMs) await sleep(opts.gapMs());
            } catch {
              if (state.sent) fate.inDoubt.add(id);
              break;
            }
          }
        } finally {
          session.close();
        }
      }
    }),
  );
}

async function api(inst: Instance, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(inst.httpUrl + path, { method, headers: { authorization: `Bearer ${inst.key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
}

function readDb<T>(inst: Instance, fn: (db: import('better-sqlite3').Database) => T): T {
  const db = openDatabase(join(inst.dataDir, 'mailroom.db'));
  try {
    return fn(db.$client);
  } finally {
    db.$client.close();
  }
}

async function waitFor(probe: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe()) return true;
    await sleep(100);
  }
  return false;
}

/** Runs `rounds` of: start, load for a random while, SIGKILL. Returns the number of kills. */
async function crashRounds(
  inst: Instance,
  rounds: number,
  random: () => number,
  round: (r: number, server: ChildServer) => Promise<() => Promise<void>>,
  opts: { beforeKill?: () => void; loadMs?: [number, number] } = {},
): Promise<number> {
  const [min, max] = opts.loadMs ?? [200, 1500];
  let kills = 0;
  for (let r = 0; r < rounds; r++) {
    const server = await startChild(inst);
    const finish = await round(r, server);
    await sleep(min + Math.floor(random() * (max - min)));
    opts.beforeKill?.();
    await stopChild(server, 'SIGKILL');
    kills++;
    await finish();
  }
  return kills;
}

/** SMTP-driven rounds run longer: a process loads the MIME and authentication libraries with its first message. */
const SMTP_LOAD = { loadMs: [1000, 4000] as [number, number] };

/** (a) SMTP ingest with parallel connections: every 250 is stored after restart, none twice. */
export async function crashSmtpIngest(rounds: number, seed: number): Promise<ScenarioResult> {
  const started = Date.now();
  const random = rng(seed);
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-crash-smtp-'));
  // Two messages processed before their reply at a time: the other six connections' mail is
  // spooled (src/domain/inbound/spool.ts), so kills land in both paths.
  const inst = await prepareInstance(dir, '[limits]\nrequests_per_minute = 100000\n[smtp]\ninline_processing = 2');
  const fate = { accepted: new Set<string>(), inDoubt: new Set<string>(), refused: 0 };
  const violations: string[] = [];
  try {
    let inbox = '';
    const kills = await crashRounds(
      inst,
      rounds,
      random,
      async (r) => {
        if (r === 0) inbox = (await (await api(inst, 'POST', '/inboxes', { address: 'crash' })).json()).id;
        let stopped = false;
        const load = smtpLoad(inst.smtpPort, 8, `r${r}`, random, () => stopped, fate);
        return async () => {
          stopped = true;
          await load;
        };
      },
      SMTP_LOAD,
    );
    const server = await startChild(inst);
    // Mail spooled before the last kill is processed by this start's job runner.
    // Spooled rows no message keeps as its source (src/store/blobs/spooled.ts) are mail still to process.
    const spooledLeft = () =>
      readDb(inst, (db) => db.prepare(`SELECT count(*) FROM spooled_messages s WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.raw_path = 'raw/spooled/' || s.job_id)`).pluck().get() as number);
    const spooledAtRestart = spooledLeft();
    const drainStarted = Date.now();
    for (const until = Date.now() + 120_000; spooledLeft() > 0 && Date.now() < until;) await new Promise((r) => setTimeout(r, 200));
    const drainSeconds = Math.round((Date.now() - drainStarted) / 100) / 10;
    if (spooledLeft() > 0) violations.push(`${spooledLeft()} spooled messages still unprocessed 120 s after the restart`);
    const stored = readDb(
      inst,
      (db) => db.prepare(`SELECT message_id_header AS id, count(*) AS n FROM messages WHERE inbox_id = ? GROUP BY message_id_header`).all(inbox) as Array<{ id: string; n: number }>,
    );
    const integrity = readDb(inst, (db) => db.pragma('quick_check', { simple: true }));
    const referenced = new Set(
      readDb(inst, (db) => [
        ...(db.prepare(`SELECT raw_path FROM messages WHERE raw_path IS NOT NULL`).pluck().all() as string[]),
        ...(db.prepare(`SELECT storage_path FROM attachments`).pluck().all() as string[]),
      ]),
    );
    await stopChild(server, 'SIGTERM');
    // Files a crash left behind: written before a commit that never happened (harmless, counted).
    const onDisk = ['raw', 'attachments'].flatMap((kind) => {
      try {
        return (readdirSync(join(inst.dataDir, kind), { recursive: true, withFileTypes: true }) as Dirent[]).filter((e) => e.isFile()).map((e) => relative(inst.dataDir, join(e.parentPath, e.name)));
      } catch {
        return [];
      }
    });
    const orphans = onDisk.filter((f) => !referenced.has(f));
    // Sources kept in the database: spooled rows, and blob rows (small outbound sources, raw/rows/).
    const inDatabase = new Set(
      readDb(inst, (db) => [
        ...(db.prepare(`SELECT 'raw/spooled/' || job_id FROM spooled_messages`).pluck().all() as string[]),
        ...(db.prepare(`SELECT key FROM blob_chunks WHERE seq = 0`).pluck().all() as string[]),
      ]),
    );
    const unreadable = [...referenced].filter((f) => !(f.startsWith('raw/spooled/') || f.startsWith('raw/rows/') ? inDatabase.has(f) : existsSync(join(inst.dataDir, f))));
    if (unreadable.length) violations.push(`${unreadable.length} stored rows point at missing files: ${unreadable.slice(0, 5).join(', ')}`);
    const count = new Map(stored.map((s) => [bare(s.id), s.n]));
    const missing = [...fate.accepted].filter((id) => !count.has(id));
    const duplicated = stored.filter((s) => s.n > 1).map((s) => s.id);
    const inDoubtStored = [...fate.inDoubt].filter((id) => count.has(id)).length;
    const unknown = [...count.keys()].filter((id) => !fate.accepted.has(id) && !fate.inDoubt.has(id));
    if (missing.length) violations.push(`${missing.length} messages answered 250 are missing: ${missing.slice(0, 5).join(', ')}`);
    if (duplicated.length) violations.push(`${duplicated.length} messages stored twice: ${duplicated.slice(0, 5).join(', ')}`);
    if (unknown.length) violations.push(`${unknown.length} stored messages were never sent or were refused: ${unknown.slice(0, 5).join(', ')}`);
    if (integrity !== 'ok') violations.push(`database quick_check: ${String(integrity)}`);
    return {
      name: 'smtp-ingest',
      rounds,
      seconds: Math.round((Date.now() - started) / 1000),
      figures: {
        kills,
        accepted_250: fate.accepted.size,
        refused: fate.refused,
        in_doubt_at_kill: fate.inDoubt.size,
        in_doubt_stored: inDoubtStored,
        spooled_at_restart: spooledAtRestart,
        spool_drain_seconds: drainSeconds,
        missing_after_250: missing.length,
        stored_twice: duplicated.length,
        files_missing_for_rows: unreadable.length,
        orphan_files_after_crashes: orphans.filter((f) => !f.endsWith('.tmp')).length,
        temporary_files_left: orphans.filter((f) => f.endsWith('.tmp')).length,
      },
      violations,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const FINAL = new Set(['sent', 'delivered', 'failed', 'bounced']);
/** Jobs running at once in a server with the default config (bounds duplicates per crash). */
const JOBS_CONCURRENCY = configFrom({}).jobs.concurrency;
/** Deliveries in flight to the one remote domain at once (outbound.concurrency_per_domain). */
const PER_DOMAIN = 8;

/** (b) Outbound sends with the remote MX slow or down: every accepted send ends final; duplicates counted. */
export async function crashOutbound(rounds: number, seed: number): Promise<ScenarioResult> {
  const started = Date.now();
  const random = rng(seed);
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-crash-out-'));
  const dns = await startTestDns();
  const mx = await startSlowMx(0);
  dns.set('remote.test', [{ type: 'MX', exchange: 'mx.remote.test', priority: 10 }]);
  dns.set('mx.remote.test', [{ type: 'A', address: '127.0.0.1' }]);
  const inst = await prepareInstance(
    dir,
    [
      '[outbound]',
      'mode = "email"',
      `mx_port = ${mx.port}`,
      // Enough attempts that a send outlives the rounds the MX is down; short, so the run is bounded.
      'retry_schedule = ["300ms", "600ms", "1s", "1s", "2s", "2s", "3s", "3s", "5s", "5s", "5s", "5s"]',
      `concurrency_per_domain = ${PER_DOMAIN}`,
      'timeout = "5s"',
      '[dns]',
      `servers = [${JSON.stringify(dns.server)}]`,
      'timeout = "1s"',
      '[limits]',
      'requests_per_minute = 100000',
      'daily_send_limit = 1000000',
    ].join('\n'),
  );
  const accepted = new Set<string>();
  let inDoubt = 0;
  let inflightAtKill = 0;
  let downRounds = 0;
  const violations: string[] = [];
  try {
    let inbox = '';
    const kills = await crashRounds(
      inst,
      rounds,
      random,
      async (r) => {
        if (r === 0) inbox = (await (await api(inst, 'POST', '/inboxes', { address: 'sender' })).json()).id;
        mx.delayMs = Math.floor(random() * 1500);
        const down = random() < 0.3;
        if (down) {
          downRounds++;
          await mx.down();
        } else await mx.up();
        let stopped = false;
        const workers = Array.from({ length: 3 }, async (_v, w) => {
          let n = 0;
          while (!stopped) {
            try {
              const res = await api(inst, 'POST', `/inboxes/${inbox}/messages`, { to: [`user${w}@remote.test`], subject: `r${r}-w${w}-${n++}`, bodyText: 'crash test' });
              if (res.status === 202) accepted.add((await res.json()).id);
              else await sleep(50);
            } catch {
              inDoubt++;
              await sleep(50);
            }
          }
        });
        return async () => {
          stopped = true;
          await Promise.all(workers);
        };
      },
      {
        beforeKill: () => {
          inflightAtKill += mx.inflight();
        },
      },
    );
    await mx.up();
    mx.delayMs = 0;
    const server = await startChild(inst);
    // the sends are final
    const settled = await waitFor(() => readDb(inst, (db) => (db.prepare(`SELECT count(*) FROM jobs WHERE kind = 'send' AND status IN ('queued', 'running')`).pluck().get() as number) === 0), 120_000);
    const rows = readDb(
      inst,
      (db) => db.prepare(`SELECT id, status, message_id_header AS mid FROM messages WHERE inbox_id = ? AND direction = 'outbound'`).all(inbox) as Array<{ id: string; status: string; mid: string }>,
    );
    const integrity = readDb(inst, (db) => db.pragma('quick_check', { simple: true }));
    await stopChild(server, 'SIGTERM');
    const byId = new Map(rows.map((m) => [m.id, m]));
    const lost = [...accepted].filter((id) => !byId.has(id));
    const notFinal = rows.filter((m) => !FINAL.has(m.status));
    const deliveries = rows.map((m) => mx.deliveries.get(`<${bare(m.mid)}>`) ?? mx.deliveries.get(bare(m.mid)) ?? 0);
    const duplicates = deliveries.reduce((a, d) => a + Math.max(0, d - 1), 0);
    const maxPerMessage = Math.max(0, ...deliveries);
    const statusCount = (s: string) => rows.filter((m) => m.status === s).length;
    if (!settled) violations.push('send jobs did not settle within 120 s of the last restart');
    if (lost.length) violations.push(`${lost.length} sends answered 202 are missing: ${lost.slice(0, 5).join(', ')}`);
    if (notFinal.length)
      violations.push(
        `${notFinal.length} sends never reached a final status: ${notFinal
          .slice(0, 5)
          .map((m) => `${m.id}=${m.status}`)
          .join(', ')}`,
      );
    if (maxPerMessage > 1 + kills) violations.push(`a message was delivered ${maxPerMessage} times in ${kills} crashes`);
    // At most one duplicate per delivery in flight at a crash, and at most PER_DOMAIN are in flight.
    if (duplicates > kills * PER_DOMAIN) violations.push(`${duplicates} duplicate deliveries in ${kills} crashes: more than the ${PER_DOMAIN} deliveries that can be in flight at each`);
    const sentWithoutDelivery = rows.filter((m, i) => m.status === 'sent' && deliveries[i] === 0).length;
    if (sentWithoutDelivery) violations.push(`${sentWithoutDelivery} messages are "sent" but never reached the MX`);
    if (integrity !== 'ok') violations.push(`database quick_check: ${String(integrity)}`);
    return {
      name: 'outbound',
      rounds,
      seconds: Math.round((Date.now() - started) / 1000),
      figures: {
        kills,
        mx_down_rounds: downRounds,
        accepted_202: accepted.size,
        in_doubt_requests: inDoubt,
        sent: statusCount('sent'),
        failed: statusCount('failed'),
        bounced: statusCount('bounced'),
        not_final: notFinal.length,
        lost_after_202: lost.length,
        delivered_at_mx: deliveries.filter((d) => d > 0).length,
        duplicate_deliveries: duplicates,
        duplicates_per_crash: Math.round((duplicates / Math.max(1, kills)) * 100) / 100,
        max_deliveries_of_one_message: maxPerMessage,
        mx_inflight_at_kills: inflightAtKill,
      },
      violations,
    };
  } finally {
    await mx.close();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** (c) Webhook deliveries pending at each crash: every event reaches the receiver after restart. */
export async function crashWebhooks(rounds: number, seed: number): Promise<ScenarioResult> {
  const started = Date.now();
  const random = rng(seed);
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-crash-hooks-'));
  const receiver = await startReceiver(200);
  const inst = await prepareInstance(
    dir,
    [
      '[webhooks]',
      'allow_insecure_targets = true',
      'retry_schedule = ["300ms", "600ms", "1s", "2s", "3s", "5s", "5s", "5s", "5s", "5s"]',
      'timeout = "3s"',
      '[limits]',
      'requests_per_minute = 100000',
    ].join('\n'),
  );
  const fate = { accepted: new Set<string>(), inDoubt: new Set<string>(), refused: 0 };
  let downRounds = 0;
  const violations: string[] = [];
  try {
    const kills = await crashRounds(
      inst,
      rounds,
      random,
      async (r) => {
        if (r === 0) {
          await api(inst, 'POST', '/inboxes', { address: 'crash' });
          await api(inst, 'POST', '/webhooks', { url: `${receiver.url}/hook`, events: ['message.received'] });
        }
        receiver.fallback = { status: 200, delayMs: Math.floor(random() * 800) };
        const down = random() < 0.25;
        if (down) {
          downRounds++;
          await receiver.down();
        }
        let stopped = false;
        const load = smtpLoad(inst.smtpPort, 4, `w${r}`, random, () => stopped, fate);
        return async () => {
          stopped = true;
          await load;
          if (down) await receiver.up();
        };
      },
      SMTP_LOAD,
    );
    receiver.fallback = 200;
    const server = await startChild(inst);
    // the deliveries are done
    const settled = await waitFor(
      () => readDb(inst, (db) => (db.prepare(`SELECT count(*) FROM jobs WHERE kind <> 'send' AND status IN ('queued', 'running')`).pluck().get() as number) === 0),
      120_000,
    );
    const eventIds = readDb(inst, (db) => db.prepare(`SELECT id FROM events WHERE type = 'message.received'`).pluck().all() as string[]);
    const failedJobs = readDb(inst, (db) => db.prepare(`SELECT count(*) FROM jobs WHERE kind <> 'send' AND status = 'failed'`).pluck().get() as number);
    const integrity = readDb(inst, (db) => db.pragma('quick_check', { simple: true }));
    await stopChild(server, 'SIGTERM');
    const receipts = new Map<string, number>();
    for (const req of receiver.received) {
      const id = (req.json as { id?: string } | undefined)?.id;
      if (id) receipts.set(id, (receipts.get(id) ?? 0) + 1);
    }
    const lost = eventIds.filter((id) => !receipts.has(id));
    const duplicates = eventIds.reduce((a, id) => a + Math.max(0, (receipts.get(id) ?? 0) - 1), 0);
    // Every 250 produced exactly one message.received event (same transaction as the message).
    const missingEvents = fate.accepted.size - eventIds.length;
    if (!settled) violations.push('webhook jobs did not settle within 120 s of the last restart');
    if (lost.length) violations.push(`${lost.length} events never reached the receiver: ${lost.slice(0, 5).join(', ')}`);
    // A delivery is repeated only when a crash cut it after the receiver got it: at most the
    // job runner's concurrency (jobs.concurrency) per crash.
    if (duplicates > kills * JOBS_CONCURRENCY) violations.push(`${duplicates} duplicate deliveries in ${kills} crashes: more than can be in flight`);
    if (missingEvents > 0) violations.push(`${missingEvents} messages answered 250 have no message.received event`);
    if (integrity !== 'ok') violations.push(`database quick_check: ${String(integrity)}`);
    return {
      name: 'webhooks',
      rounds,
      seconds: Math.round((Date.now() - started) / 1000),
      figures: {
        kills,
        receiver_down_rounds: downRounds,
        messages_250: fate.accepted.size,
        events: eventIds.length,
        events_delivered: eventIds.length - lost.length,
        events_lost: lost.length,
        duplicate_deliveries: duplicates,
        duplicates_per_crash: Math.round((duplicates / Math.max(1, kills)) * 100) / 100,
        deliveries_failed_after_all_retries: failedJobs,
      },
      violations,
    };
  } finally {
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
