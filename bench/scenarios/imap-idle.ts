// (r) IMAP IDLE latency (issue 33: "IDLE sees a new message within 1 s"). A fresh server with
// `[imap] listen` on loopback; an imapflow client (the library mail apps are built on) logs in with
// the inbox's address and the account's key, selects INBOX and IDLEs. BENCH_IDLE_COUNT (100)
// messages are delivered one at a time over one reused SMTP session, each once the client has
// been told of the one before; latency = the client's `exists` event − the 250 at the sender,
// same process, same clock (and, as an upper bound, from the MAIL FROM that began the transaction).
// On embedded SQLite and, when Debian's postgresql is installed, on a
// private durable PostgreSQL cluster (one node: the commit wakes the session; NOTIFY is for others):
// ids `imap-idle` and `imap-idle-pg`. BENCH_IDLE_ENGINES=sqlite for one.
import { ImapFlow } from 'imapflow';
import type { TestDns } from '../../test/support/dns.ts';
import { SmtpClient } from '../../test/support/smtp-client.ts';
import { postgresMissing, startCluster, type PgCluster } from '../../test/support/postgres.ts';
import { createInbox, startMailroom } from '../mailroom.ts';
import { judge } from '../targets.ts';
import { freePort, log, sleep, summarize, waitFor, type ScenarioResult } from '../support.ts';

const COUNT = Number(process.env.BENCH_IDLE_COUNT ?? 100);
const WAIT_MS = 10_000;

export async function imapIdle(env: { dns: TestDns }): Promise<ScenarioResult[]> {
  const out = [await idleOn(env)];
  if ((process.env.BENCH_IDLE_ENGINES ?? 'sqlite,postgres').includes('postgres') && !postgresMissing()) {
    const cluster = await startCluster({ durable: true });
    try {
      out.push(await idleOn(env, cluster));
    } finally {
      cluster.stop();
    }
  }
  return out;
}

async function idleOn(env: { dns: TestDns }, cluster?: PgCluster): Promise<ScenarioResult> {
  const engine = cluster ? 'PostgreSQL' : 'SQLite';
  const imapPort = await freePort();
  const database = cluster ? { database: { url: await cluster.createDatabase('bench_idle') } } : {};
  const m = await startMailroom(cluster ? 'imap-idle-pg' : 'imap-idle', { dns: env.dns.server, config: { ...database, imap: { listen: `127.0.0.1:${imapPort}` } } });
  const samples: number[] = [];
  /** From the start of the SMTP transaction (MAIL FROM): an upper bound that holds whenever the server answers 250. */
  const fromStart: number[] = [];
  let missed = 0;
  try {
    const inbox = await createInbox(m);
    const imap = new ImapFlow({ host: '127.0.0.1', port: imapPort, secure: false, auth: { user: inbox.address, pass: m.key }, logger: false, disableAutoIdle: true, doSTARTTLS: false });
    imap.on('error', (err: Error) => log(`imap-idle: imapflow error ${err.message}`));
    await imap.connect();
    let count = (await imap.mailboxOpen('INBOX')).exists;
    let toldAt = new Map<number, number>();
    imap.on('exists', (d: { count: number }) => {
      const at = performance.now();
      for (let n = count + 1; n <= d.count; n++) if (!toldAt.has(n)) toldAt.set(n, at);
    });
    // IDLE stays on: no command is sent while the messages come, so imapflow never ends it.
    let idling = true;
    const idle = async () => {
      while (idling) await imap.idle();
    };
    const idleDone = idle();
    await sleep(500);
    const { client } = await SmtpClient.open(m.smtpPort);
    await client.cmd('EHLO source.bench');
    log(`imap-idle (${engine}): ${COUNT} messages one at a time, client in IDLE`);
    for (let i = 1; i <= COUNT; i++) {
      const body = Buffer.from(
        `From: ann@source.bench\r\nTo: ${inbox.address}\r\nSubject: idle ${i}\r\nMessage-ID: <idle-${i}-${process.pid}@source.bench>\r\n\r\nMessage ${i} for the IDLE client.\r\n`,
      );
      const startedAt = performance.now();
      const reply = await client.send('ann@source.bench', [inbox.address], body);
      const acceptedAt = performance.now();
      if (reply.code !== 250) throw new Error(`message ${i}: ${reply.code} ${reply.text}`);
      const n = count + 1;
      try {
        const at = await waitFor(`EXISTS ${n}`, () => toldAt.get(n), WAIT_MS, 1);
        samples.push(at - acceptedAt);
        fromStart.push(at - startedAt);
      } catch {
        missed++;
      }
      count = n;
      toldAt = new Map([...toldAt].filter(([k]) => k > n));
    }
    await client.quit();
    idling = false;
    await imap.logout();
    await idleDone.catch(() => undefined);
  } finally {
    await m.stop();
  }
  const s = summarize(samples);
  const t = summarize(fromStart);
  const min = Math.round(Math.min(...samples) * 10) / 10;
  log(`imap-idle (${engine}): 250 → EXISTS p50 ${s.p50} ms, p99 ${s.p99} ms, max ${s.max} ms (min ${min}); MAIL FROM → EXISTS p99 ${t.p99} ms; ${missed} missed`);
  const row = (what: 'p50' | 'p99' | 'max') => ({ metric: `250 → EXISTS in IDLE, ${what}`, unit: 'ms', mailroom: s[what] });
  return {
    id: cluster ? 'imap-idle-pg' : 'imap-idle',
    title: `(r) IMAP IDLE latency on ${cluster ? 'PostgreSQL (private durable cluster, fsync on)' : 'embedded SQLite'}: 250 → EXISTS`,
    status: 'ok',
    setup: `fresh server, [imap] listen on loopback; one imapflow client logged in with the inbox address and the account key, INBOX selected, in IDLE; ${COUNT} small messages delivered one at a time over one reused SMTP session, each after the client was told of the one before; latency from the 250 at the sender to imapflow's exists event, same process and clock`,
    rows: [
      { ...row('p50'), note: `${s.n} of ${COUNT} told within ${WAIT_MS / 1000} s (${missed} not); the smallest ${min} ms (below 0: the EXISTS came before the 250 reached the sender)` },
      { ...row('p99'), ...judge('imapIdleP99Ms', s.p99, undefined, missed === 0) },
      row('max'),
      {
        metric: 'MAIL FROM → EXISTS in IDLE, p99',
        unit: 'ms',
        mailroom: t.p99,
        ...judge('imapIdleP99Ms', t.p99, undefined, missed === 0),
        note: `the whole SMTP transaction included: an upper bound; p50 ${t.p50} ms, max ${t.max} ms`,
      },
    ],
    details: { samples: samples.map((x) => Math.round(x * 10) / 10) },
  };
}
