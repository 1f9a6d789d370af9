// `npm run bench [-- scenario…]`: runs every scenario (or the named ones) against the real
// server on loopback, each with its baselines measured in the same run, and writes
// bench/results/latest.json and latest.md. Scratch files go to bench/work/ (git-ignored).
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startTestDns } from '../test/support/dns.ts';
import { renderMarkdown, renderTargets, type RunResults } from './report.ts';
import { RESULTS, SkipError, WORK, killChildren, load, log, machine, round, type ScenarioResult } from './support.ts';
import { smtpIngest } from './scenarios/smtp.ts';
import { httpApi } from './scenarios/http.ts';
import { outbound } from './scenarios/outbound.ts';
import { webhookLatency } from './scenarios/webhook.ts';
import { scale } from './scenarios/scale.ts';
import { coldStart } from './scenarios/coldstart.ts';
import { largeMessages } from './scenarios/large.ts';
import { pgClients } from './scenarios/pg-clients.ts';
import { storeOverhead } from './scenarios/store.ts';
import { eventLatency } from './scenarios/events.ts';
import { search } from './scenarios/search.ts';
import { inboundFlow } from './scenarios/flow.ts';
import { nodes } from './scenarios/nodes.ts';
import { replyTextHostile } from './scenarios/reply-text.ts';
import { screeningCost } from './scenarios/screening-cost.ts';
import { imapIdle } from './scenarios/imap-idle.ts';
import type { TestDns } from '../test/support/dns.ts';

interface Scenario {
  id: string;
  title: string;
  run(env: { dns: TestDns }): Promise<ScenarioResult | ScenarioResult[]>;
}

/** In report order; `npm run bench -- http scale` runs a subset. */
const SCENARIOS: Scenario[] = [
  { id: 'smtp', title: '(a) SMTP ingest, durable, 10 KB messages', run: smtpIngest },
  { id: 'http', title: '(b) HTTP API at 50 connections', run: httpApi },
  { id: 'outbound', title: '(c) Outbound with DKIM to one MX', run: outbound },
  { id: 'webhook', title: '(d) Webhook latency, inbound mail to receipt', run: webhookLatency },
  { id: 'scale', title: '(e) Scale: list and get with 10³ and 10⁶ stored messages', run: scale },
  { id: 'coldstart', title: '(g) Cold start of the single executable', run: coldStart },
  { id: 'large', title: '(h) Ten 25 MB messages at once; (i) one message to 50 inboxes on disk', run: largeMessages },
  { id: 'events', title: '(j) Event latency at 500 events/s: event → SSE and event → webhook', run: eventLatency },
  { id: 'search', title: '(k) Search: q on a 10⁴ and a 10⁶ message inbox', run: search },
  { id: 'pg-clients', title: '(l) PostgreSQL client: pg against postgres', run: pgClients },
  { id: 'store', title: '(m) The storage port on SQLite: async store against the synchronous handle', run: storeOverhead },
  { id: 'flow', title: '(o) Inbound flow: accepted → visible and webhooked, and 250 → visible latency under a steady offer', run: inboundFlow },
  { id: 'nodes', title: '(n) Several nodes: SMTP ingest and HTTP reads on SQLite, PostgreSQL with one node, PostgreSQL with two nodes', run: nodes },
  { id: 'reply-text', title: '(p) Reply extraction on hostile input', run: replyTextHostile },
  { id: 'screening-cost', title: '(q) Screening cost on the inbound rate: the same burst with screening off and monitor', run: screeningCost },
  { id: 'imap-idle', title: '(r) IMAP IDLE latency: 250 → EXISTS', run: imapIdle },
];

/** Results a scenario reports under other ids, kept with it from an earlier run. */
const ALSO_REPORTS: Record<string, string[]> = { smtp: ['memory'], large: ['fanout'], flow: ['flow-pg'], 'imap-idle': ['imap-idle-pg'] };

async function main(): Promise<void> {
  const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const unknown = wanted.filter((w) => !SCENARIOS.some((s) => s.id === w));
  if (unknown.length) throw new Error(`unknown scenario ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.id).join(', ')}`);
  const selected = SCENARIOS.filter((s) => wanted.length === 0 || wanted.includes(s.id));
  mkdirSync(WORK, { recursive: true });
  mkdirSync(RESULTS, { recursive: true });
  const t0 = performance.now();
  const run: RunResults = {
    startedAt: new Date().toISOString(),
    machine: machine(),
    loadAtStart: load(),
    notes: process.env.BENCH_NOTE ? [process.env.BENCH_NOTE] : [],
    scenarios: [],
  };
  // A partial run (some scenarios) keeps the other scenarios' last results.
  const earlier = wanted.length && existsSync(join(RESULTS, 'latest.json')) ? (JSON.parse(readFileSync(join(RESULTS, 'latest.json'), 'utf8')) as RunResults) : undefined;
  const previous: ScenarioResult[] = earlier?.scenarios ?? [];
  if (wanted.length && previous.length) {
    // The earlier run's notes still describe the scenarios kept from it (short settings, load).
    run.notes.push(...(earlier?.notes ?? []).filter((n) => !n.startsWith('Partial run')));
    run.notes.push(`Partial run (${wanted.join(', ')}); other scenarios are from an earlier run.`);
  }
  const dns = await startTestDns();
  const results = new Map<string, ScenarioResult[]>();
  const write = () => {
    const order = SCENARIOS.flatMap((s) => results.get(s.id) ?? previous.filter((p) => p.id === s.id || ALSO_REPORTS[s.id]?.includes(p.id)));
    run.scenarios = order;
    run.finishedAt = new Date().toISOString();
    run.seconds = round((performance.now() - t0) / 1000);
    writeFileSync(join(RESULTS, 'latest.json'), JSON.stringify(run, null, 2) + '\n');
    writeFileSync(join(RESULTS, 'latest.md'), renderMarkdown(run));
  };
  try {
    for (const s of selected) {
      const loadBefore = load();
      const measuredAt = new Date().toISOString();
      const started = performance.now();
      log(`== ${s.id}: ${s.title} (load ${loadBefore.join(' ')})`);
      let out: ScenarioResult[];
      try {
        const r = await s.run({ dns });
        out = Array.isArray(r) ? r : [r];
      } catch (err) {
        const skipped = err instanceof SkipError;
        log(`${s.id} ${skipped ? 'skipped' : 'failed'}: ${(err as Error).stack ?? err}`);
        out = [{ id: s.id, title: s.title, status: skipped ? 'skipped' : 'failed', reason: (err as Error).message, setup: '', rows: [] }];
      }
      const loadAfter = load();
      for (const o of out) {
        o.seconds = round((performance.now() - started) / 1000);
        Object.assign(o, { measuredAt, machine: run.machine, loadBefore, loadAfter });
      }
      results.set(s.id, out);
      write();
    }
  } finally {
    killChildren();
    await dns.close();
  }
  write();
  // The scorecard: every figure with a target, this run's and those kept from earlier runs.
  process.stdout.write(renderTargets(run).join('\n') + '\n');
  log(`done in ${run.seconds} s: bench/results/latest.md`);
}

main().catch((err) => {
  killChildren();
  process.stderr.write(`bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
