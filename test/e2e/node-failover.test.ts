// Failover between two nodes on one PostgreSQL (docs/several-nodes.md, "What holds across
// nodes"): two `mailroom serve` child processes share a database; mixed load (SMTP in, API
// sends, some scheduled, webhooks for the received mail) runs against both while one of them
// is SIGKILLed and restarted, alternately, round after round. The survivor keeps serving and
// takes the dead node's jobs over when their leases lapse. Afterwards nothing acknowledged is
// lost or stored twice, every send ends final, every event reaches its webhook, and repeats
// stay within what the kills can explain. The random choices come from one seed
// (FAILOVER_SEED=… replays its schedule; the interleaving with the processes still varies).
//
// The bound on repeats: a send (or webhook post) is repeated only when a node dies between the
// remote side taking it and the commit that ends its job. So each message may reach the MX at
// most 1 + (the kills during which its send job was `running`) times, and each event the
// receiver likewise. The jobs table does not say which node runs a job, so "running at a
// kill" counts the survivor's jobs too: a looser bound, never a wrong one. The MX is the
// slow test MX (test/support/slow-mx.ts): it counts deliveries per Message-ID and holds each
// 250 back a random while, so kills do land inside that window.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { prepareInstance, startChild, stopChild, type ChildServer, type Instance } from '../support/child-server.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { onEngine, readResponse, type ApiResponse } from '../support/server.ts';
import { startSlowMx, type SlowMx } from '../support/slow-mx.ts';
import { rng, smtpLoad, type SmtpFate } from '../reliability/crash.ts';
import { peerSkip } from '../support/peers.ts';
import { guard } from '../support/wait.ts';

// PostgreSQL pass only: nodes share a database only there (build/test.sh leaves this file out of
// the SQLite pass; run on SQLite, it declares nothing: onEngine).
const skip = peerSkip(postgresMissing());

const ROUNDS = 10;
/**
 * What each round waits to see accepted since the last kill (SMTP 250s and API 202s each) before
 * it kills, within a bound: on a CPU shared with other test files the load moves slowly, and a
 * kill on an idle system proves little. Ten rounds carry more than 100 of each.
 */
const MOVED_PER_ROUND = 12;
/**
 * jobs.lease: short, so a dead node's jobs move to the survivor within a round. Stretched with
 * the harness's guards (wait.ts) when test files share the CPU: a live node starved of it for
 * longer than its lease loses running jobs to the other node, a repeat no kill caused.
 */
const LEASE_MS = guard(2000);
/** How long the system gets to finish its work once the load stops. */
const SETTLE_MS = guard(30_000);
const FINAL = new Set(['sent', 'failed', 'bounced']);
const INBOX = 'failover';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const bare = (id: string) => id.replace(/^<|>$/g, '');

/** The one configuration both nodes run, as an operator deploys them. */
function nodeToml(url: string, relayPort: number): string {
  return [
    '[database]',
    `url = ${JSON.stringify(url)}`,
    '[outbound]',
    'mode = "email"',
    `relay = "smtp://127.0.0.1:${relayPort}"`,
    'relay_verify_tls = false',
    'retry_schedule = ["300ms", "1s"]',
    'timeout = "5s"',
    '[jobs]',
    `lease = "${LEASE_MS}ms"`,
    '[webhooks]',
    'allow_insecure_targets = true',
    'retry_schedule = ["300ms", "1s", "2s"]',
    'timeout = "3s"',
    // Two messages processed before their 250 at a time: the rest are spooled, so kills land in both paths.
    '[smtp]',
    'inline_processing = 2',
    // Nothing answers there: SPF and DKIM lookups of the test mail fail at once instead of timing out.
    '[dns]',
    'servers = ["127.0.0.1:9"]',
    'timeout = "1s"',
    '[limits]',
    'requests_per_minute = 100000',
    'daily_send_limit = 1000000',
  ].join('\n');
}

interface Node {
  name: 'A' | 'B';
  inst: Instance;
  server?: ChildServer;
}

interface SendFate {
  /** Message id → subject of every send answered 202. */
  accepted: Map<string, string>;
  scheduled: number;
  /** Requests cut by a kill: the send may or may not exist. */
  inDoubt: number;
  /** Answers other than 202 from a node that was up (none expected). */
  refusals: string[];
}

/** API sends through one node until `stop()`; one in five is scheduled a few seconds ahead (a release job). */
async function sendLoad(node: Node, key: string, inboxId: string, random: () => number, stop: () => boolean, fate: SendFate): Promise<void> {
  await Promise.all(
    Array.from({ length: 2 }, async (_v, w) => {
      let n = 0;
      while (!stop()) {
        const subject = `${node.name}-w${w}-${n++}`;
        const scheduled = random() < 0.2;
        const body = { to: ['someone@remote.example'], subject, bodyText: `failover ${subject}`, ...(scheduled && { sendAt: new Date(Date.now() + 1000 + random() * 2000).toISOString() }) };
        try {
          const res = await fetch(`${node.inst.httpUrl}/inboxes/${inboxId}/messages`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          const answer = await readResponse(res);
          if (answer.status === 202) {
            fate.accepted.set(answer.body.id, subject);
            if (scheduled) fate.scheduled++;
          } else fate.refusals.push(`${answer.status} ${answer.text.slice(0, 200)}`);
        } catch (err) {
          // A refused connection is a node that is down: nothing was sent. Anything else was cut mid-request.
          if ((err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED') await sleep(100);
          else fate.inDoubt++;
        }
        await sleep(20 + random() * 60);
      }
    }),
  );
}

/** Per job subject (a send's message, a webhook delivery's event): the kills during which its job was `running`. */
type InFlight = Map<string, number>;

/** What running jobs are about: the message a send delivers, the event a webhook delivery posts. */
async function runningSubjects(db: pg.Client): Promise<{ sends: Set<string>; events: Set<string> }> {
  const rows = (await db.query<{ kind: string; payload: string }>("SELECT kind, payload FROM jobs WHERE status = 'running'")).rows;
  const sends = new Set<string>();
  const events = new Set<string>();
  for (const r of rows) {
    const p = JSON.parse(r.payload) as { messageId?: string; eventId?: string };
    if (r.kind === 'send' && p.messageId) sends.add(p.messageId);
    if (r.kind === 'webhook' && p.eventId) events.add(p.eventId);
  }
  return { sends, events };
}

const count = (map: InFlight, keys: Iterable<string>) => {
  for (const k of keys) map.set(k, (map.get(k) ?? 0) + 1);
};

/** Every row of a paged list (`limit`/`offset`), read at rest. */
async function listAll(api: (path: string) => Promise<ApiResponse>, path: string): Promise<any[]> {
  const all: any[] = [];
  for (;;) {
    const page = await api(`${path}${path.includes('?') ? '&' : '?'}limit=100&offset=${all.length}`);
    assert.equal(page.status, 200, page.text);
    all.push(...page.body.data);
    if (page.body.data.length < 100) return all;
  }
}

/** Every event of some types, oldest first, following the `after` cursor. */
async function eventsOf(api: (path: string) => Promise<ApiResponse>, types: string): Promise<any[]> {
  const all: any[] = [];
  for (;;) {
    const page = await api(`/events?types=${types}&limit=1000${all.length ? `&after=${all.at(-1).id}` : ''}`);
    assert.equal(page.status, 200, page.text);
    all.push(...page.body.data);
    if (page.body.data.length < 1000) return all;
  }
}

onEngine('postgres').describe('two nodes on one PostgreSQL: one SIGKILLed under mixed load, 10 rounds', { skip }, () => {
  const seed = Number(process.env.FAILOVER_SEED ?? Math.floor(Math.random() * 2 ** 31));
  let dir: string;
  let url: string;
  let db: pg.Client;
  let mx: SlowMx;
  let rx: Receiver;
  let nodes: [Node, Node];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mailroom-failover-'));
    url = await (await pgCluster()).createDatabase();
    mx = await startSlowMx(0);
    rx = await startReceiver(200);
    const make = async (name: Node['name']): Promise<Node> => ({ name, inst: await prepareInstance(join(dir, name), nodeToml(url, mx.port)) });
    // One after the other: the first migrates the new database.
    nodes = [await make('A'), await make('B')];
    db = new pg.Client({ connectionString: url });
    await db.connect();
  });

  after(async () => {
    for (const node of nodes ?? []) if (node.server) await stopChild(node.server, 'SIGKILL');
    await db?.end();
    await mx?.close();
    await rx?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('nothing acknowledged is lost or doubled, every job is taken over, repeats only for work in flight at a kill', { timeout: guard(180_000) }, async (t) => {
    const started = Date.now();
    const random = rng(seed);
    t.diagnostic(`seed ${seed} (FAILOVER_SEED=${seed} replays it)`);
    const [a, b] = nodes;
    [a.server, b.server] = await Promise.all([startChild(a.inst), startChild(b.inst)]);
    // Keys live in the database: node A's harness key works on both.
    const key = a.inst.key;
    const api = async (node: Node, method: string, path: string, body?: unknown) =>
      readResponse(
        await fetch(node.inst.httpUrl + path, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) }),
      );
    const inbox = (await api(a, 'POST', '/inboxes', { address: INBOX })).body;
    assert.ok(inbox?.id, 'inbox created');
    assert.equal((await api(a, 'POST', '/webhooks', { url: `${rx.url}/hook`, events: ['message.received'] })).status, 201);

    // The load runs from here to the end of the rounds, against whichever node is up.
    let stopped = false;
    const stop = () => stopped;
    const smtp: SmtpFate = { accepted: new Set(), inDoubt: new Set(), refused: 0 };
    const sends: SendFate = { accepted: new Map(), scheduled: 0, inDoubt: 0, refusals: [] };
    const to = `${INBOX}@agents.test`;
    const load = Promise.all(
      nodes.flatMap((node) => [smtpLoad(node.inst.smtpPort, 2, node.name, random, stop, smtp, { to, gapMs: () => random() * 60 }), sendLoad(node, key, inbox.id, random, stop, sends)]),
    );

    const sendsInFlight: InFlight = new Map();
    const eventsInFlight: InFlight = new Map();
    let mxInflightAtKills = 0;
    const restartMs: number[] = [];
    let moved = { smtp: 0, sends: 0 };
    try {
      for (let r = 0; r < ROUNDS; r++) {
        mx.delayMs = Math.floor(random() * 300);
        rx.fallback = { status: 200, delayMs: Math.floor(random() * 150) };
        await sleep(400 + random() * 600);
        const movedBy = Date.now() + guard(20_000);
        while ((smtp.accepted.size - moved.smtp < MOVED_PER_ROUND || sends.accepted.size - moved.sends < MOVED_PER_ROUND) && Date.now() < movedBy) await sleep(50);
        moved = { smtp: smtp.accepted.size, sends: sends.accepted.size };
        const victim = nodes[r % 2]!;
        // Jobs running at the kill: those running just before it, and those the victim claimed
        // meanwhile (its rows stay `running` until their lease lapses, long after the second look).
        const runningBefore = await runningSubjects(db);
        mxInflightAtKills += mx.inflight();
        await stopChild(victim.server!, 'SIGKILL');
        victim.server = undefined;
        const runningAfter = await runningSubjects(db);
        count(sendsInFlight, new Set([...runningBefore.sends, ...runningAfter.sends]));
        count(eventsInFlight, new Set([...runningBefore.events, ...runningAfter.events]));
        // The survivor alone for a moment (and while the victim starts: ~2 s), then both again.
        await sleep(random() * 300);
        const restart = Date.now();
        victim.server = await startChild(victim.inst);
        restartMs.push(Date.now() - restart);
      }
    } finally {
      stopped = true;
      await load;
    }
    const loadSeconds = (Date.now() - started) / 1000;
    const kills = ROUNDS;

    // Settle: every job done (or failed), nothing spooled, within a bound.
    const settleStarted = Date.now();
    const unfinished = async () => Number((await db.query("SELECT (SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')) + (SELECT count(*) FROM spooled_messages) AS n")).rows[0].n);
    while ((await unfinished()) > 0 && Date.now() - settleStarted < SETTLE_MS) await sleep(200);
    const settleSeconds = (Date.now() - settleStarted) / 1000;

    const violations: string[] = [];
    const flag = (n: number, what: string, examples: string[] = []) => {
      if (n) violations.push(`${n} ${what}${examples.length ? `: ${examples.slice(0, 5).join(', ')}` : ''}`);
    };

    // Jobs: none left running on a lease nobody renews, none queued past its time.
    const now = Date.now();
    const jobs = (await db.query<{ id: string; kind: string; status: string; run_at: string; lease_until: string | null }>('SELECT id, kind, status, run_at, lease_until FROM jobs')).rows;
    const abandoned = jobs.filter((j) => j.status === 'running' && Number(j.lease_until) < now - LEASE_MS);
    const overdue = jobs.filter((j) => j.status === 'queued' && Number(j.run_at) < now - LEASE_MS);
    const failedJobs = jobs.filter((j) => j.status === 'failed');
    flag(
      abandoned.length,
      `jobs still running a lease after theirs lapsed (never taken over)`,
      abandoned.map((j) => `${j.kind} ${j.id}`),
    );
    flag(
      overdue.length,
      'jobs still queued past their run time',
      overdue.map((j) => `${j.kind} ${j.id}`),
    );
    flag(failedJobs.filter((j) => j.kind === 'inbound').length, 'spooled messages whose processing failed');
    flag(await unfinished(), `jobs or spooled messages unfinished ${SETTLE_MS / 1000} s after the load stopped`);

    // Read through node B, killed last: after its restart it serves the shared state, A's mail included.
    const reader = (path: string) => api(b, 'GET', path);
    const messages = await listAll(reader, `/inboxes/${inbox.id}/messages`);

    // SMTP in: each 250 stored once; nothing stored that was not sent.
    const inbound = messages.filter((m) => m.direction === 'inbound');
    const copies = new Map<string, number>();
    for (const m of inbound) copies.set(bare(m.messageIdHeader), (copies.get(bare(m.messageIdHeader)) ?? 0) + 1);
    const missing = [...smtp.accepted].filter((id) => !copies.has(id));
    flag(missing.length, 'messages answered 250 are not stored', missing);
    const twice = [...copies].filter(([, n]) => n > 1).map(([id]) => id);
    flag(twice.length, 'messages stored more than once', twice);
    const unknown = [...copies.keys()].filter((id) => !smtp.accepted.has(id) && !smtp.inDoubt.has(id));
    flag(unknown.length, 'stored messages were never sent or were refused', unknown);

    // Sends: a node that is up accepts them; every 202 exists and ended final, and so did those whose request a kill cut.
    flag(sends.refusals.length, 'sends refused by a node that was up', sends.refusals);
    const outbound = new Map(messages.filter((m) => m.direction === 'outbound').map((m) => [m.id as string, m]));
    const lost = [...sends.accepted.keys()].filter((id) => !outbound.has(id));
    flag(lost.length, 'sends answered 202 are missing', lost);
    const notFinal = [...outbound.values()].filter((m) => !FINAL.has(m.status));
    flag(
      notFinal.length,
      'sends never reached a final status',
      notFinal.map((m) => `${m.subject}=${m.status}`),
    );
    const wrongSubject = [...sends.accepted].filter(([id, subject]) => outbound.has(id) && outbound.get(id).subject !== subject);
    flag(
      wrongSubject.length,
      'sends stored with another subject than they were sent with',
      wrongSubject.map(([id]) => id),
    );

    // The MX: a send is delivered once, plus at most one repeat per kill while its job was
    // running (the window between the remote 250 and the commit of the job's end); a sent
    // message reached it at least once.
    const delivered = (m: { messageIdHeader: string }) => mx.deliveries.get(`<${bare(m.messageIdHeader)}>`) ?? mx.deliveries.get(bare(m.messageIdHeader)) ?? 0;
    const overDelivered = [...outbound.values()].filter((m) => delivered(m) > 1 + (sendsInFlight.get(m.id) ?? 0));
    flag(
      overDelivered.length,
      'sends delivered more often than 1 + the kills during their delivery',
      overDelivered.map((m) => `${m.subject}×${delivered(m)}`),
    );
    const sentNowhere = [...outbound.values()].filter((m) => m.status === 'sent' && delivered(m) === 0);
    flag(
      sentNowhere.length,
      'sends are "sent" but never reached the MX',
      sentNowhere.map((m) => m.subject),
    );
    const mxDuplicates = [...outbound.values()].reduce((n, m) => n + Math.max(0, delivered(m) - 1), 0);

    // Webhooks: one message.received event per stored message; each reached the receiver at
    // least once, repeated only under the same bound as sends.
    const events = await eventsOf(reader, 'message.received');
    const eventsPerMessage = new Map<string, number>();
    for (const e of events) eventsPerMessage.set(e.data.id, (eventsPerMessage.get(e.data.id) ?? 0) + 1);
    const withoutEvent = inbound.filter((m) => eventsPerMessage.get(m.id) !== 1);
    flag(
      withoutEvent.length,
      'stored messages have no message.received event or several',
      withoutEvent.map((m) => m.id),
    );
    const receipts = new Map<string, number>();
    for (const req of rx.received) receipts.set(String(req.headers['webhook-id']), (receipts.get(String(req.headers['webhook-id'])) ?? 0) + 1);
    const undelivered = events.filter((e) => !receipts.has(e.id));
    flag(
      undelivered.length,
      'events never reached the webhook receiver',
      undelivered.map((e) => e.id),
    );
    const overPosted = events.filter((e) => (receipts.get(e.id) ?? 0) > 1 + (eventsInFlight.get(e.id) ?? 0));
    flag(
      overPosted.length,
      'events delivered more often than 1 + the kills during their delivery',
      overPosted.map((e) => `${e.id}×${receipts.get(e.id)}`),
    );
    const hookDuplicates = events.reduce((n, e) => n + Math.max(0, (receipts.get(e.id) ?? 0) - 1), 0);

    const status = (s: string) => [...outbound.values()].filter((m) => m.status === s).length;
    const figures = {
      kills,
      load_seconds: Math.round(loadSeconds),
      restart_ms_median: restartMs.sort((x, y) => x - y)[Math.floor(restartMs.length / 2)],
      smtp_250: smtp.accepted.size,
      smtp_refused: smtp.refused,
      smtp_in_doubt_at_kill: smtp.inDoubt.size,
      smtp_in_doubt_stored: [...smtp.inDoubt].filter((id) => copies.has(id)).length,
      sends_202: sends.accepted.size,
      sends_scheduled: sends.scheduled,
      sends_in_doubt_at_kill: sends.inDoubt,
      sent: status('sent'),
      failed: status('failed'),
      bounced: status('bounced'),
      sends_running_at_kills: [...sendsInFlight.values()].reduce((x, y) => x + y, 0),
      mx_inflight_at_kills: mxInflightAtKills,
      mx_duplicate_deliveries: mxDuplicates,
      events: events.length,
      webhook_deliveries_running_at_kills: [...eventsInFlight.values()].reduce((x, y) => x + y, 0),
      webhook_duplicate_deliveries: hookDuplicates,
      failed_jobs: failedJobs.length,
      settle_seconds: settleSeconds,
    };
    t.diagnostic(
      Object.entries(figures)
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
    );
    assert.deepEqual(violations, [], `seed ${seed}: rerun with FAILOVER_SEED=${seed}`);
    // The load reached both nodes and the kills cut work in progress, or the run proved little.
    assert.ok(smtp.accepted.size > 100 && sends.accepted.size > 100, `too little load to mean anything (seed ${seed})`);
  });
});
