// Long randomised SMTP fuzz run against a child `mailroom serve`: mutated variants of the seed
// corpus (test/support/hostile-mail.ts) over persistent connections, a session attack every
// 100 inputs, the process's RSS sampled, and /health polled throughout to measure how long the
// event loop is ever blocked. Zero crashes, bounded memory and a listener that keeps serving.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { prepareInstance, startChild, stopChild } from '../support/child-server.ts';
import { foldedHeader, mutate, rawSession, seedMessages, sessionAttacks } from '../support/hostile-mail.ts';
import { LoadSession, rng, type ScenarioResult } from './crash.ts';

/** Resident memory of a process in MB (Linux /proc), or 0 when unavailable. */
function rssMb(pid: number): number {
  try {
    const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    return Math.round(kb / 1024);
  } catch {
    return 0;
  }
}

const MAX_RSS_MB = 1024;
const FINDINGS = join(import.meta.dirname, 'findings');

/** Keeps an input that broke an invariant, to replay it: test/reliability/findings/<seed>-<n>.eml. */
function saveFinding(seed: number, i: number, input: Buffer): string {
  mkdirSync(FINDINGS, { recursive: true });
  const file = join(FINDINGS, `${seed}-${i}.eml`);
  writeFileSync(file, input);
  return relative(process.cwd(), file);
}
/** One input may cost CPU, but never freeze the HTTP API for seconds. */
const MAX_STALL_MS = 3000;

export async function fuzzSmtp(inputs: number, seed: number): Promise<ScenarioResult> {
  const started = Date.now();
  const random = rng(seed);
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-fuzz-'));
  const inst = await prepareInstance(dir, '[smtp]\nmax_message_bytes = 4000000\nidle_timeout = "5s"\n[limits]\nrequests_per_minute = 1000000');
  const server = await startChild(inst);
  const pid = server.child.pid!;
  const violations: string[] = [];
  const f = { accepted: 0, refused_5xx: 0, temporary_4xx: 0, connection_lost: 0, session_attacks: 0, session_attack_failures: 0, api_reads: 0, api_read_errors: 0 };
  const seeds = seedMessages();
  // Inputs known to be expensive for a dependency, sent a few times to measure the stall they cause.
  const heavy: Array<[string, Buffer]> = [['header folded over 100k lines', foldedHeader(100_000)]];
  const rss = { start: rssMb(pid), max: 0 };
  const accepted: string[] = [];
  let maxHealthMs = 0;
  let healthFailures = 0;
  let probing = true;
  const probe = (async () => {
    while (probing) {
      const t0 = performance.now();
      try {
        const res = await fetch(`${inst.httpUrl}/health`, { signal: AbortSignal.timeout(120_000) });
        if (res.status !== 200) healthFailures++;
      } catch {
        healthFailures++;
      }
      maxHealthMs = Math.max(maxHealthMs, Math.round(performance.now() - t0));
      rss.max = Math.max(rss.max, rssMb(pid));
      await new Promise((r) => setTimeout(r, 200));
    }
  })();

  try {
    await fetch(`${inst.httpUrl}/inboxes`, { method: 'POST', headers: { authorization: `Bearer ${inst.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ address: 'fuzz' }) });
    let session: LoadSession | undefined;
    for (let i = 0; i < inputs + heavy.length; i++) {
      if (server.child.exitCode !== null || server.child.signalCode !== null) {
        violations.push(`the server process exited (${server.child.exitCode ?? server.child.signalCode}) after ${i} inputs: ${server.stderr().slice(-500)}`);
        break;
      }
      if (i > 0 && i % 100 === 0) {
        const attacks = sessionAttacks('fuzz@agents.test');
        const attack = attacks[Math.floor(random() * attacks.length)];
        f.session_attacks++;
        if (attack.check(await rawSession(inst.smtpPort, attack.chunks)) !== undefined) f.session_attack_failures++;
      }
      const [name, raw] = i >= inputs ? heavy[i - inputs] : seeds[Math.floor(random() * seeds.length)];
      const input = i >= inputs || random() < 0.1 ? raw : mutate(raw, random);
      try {
        session ??= await LoadSession.open(inst.smtpPort);
        const state = { sent: false };
        const code = await session.message('fuzz@agents.test', input.toString('latin1'), state);
        if (code === 250) {
          f.accepted++;
        } else if (code >= 500) f.refused_5xx++;
        else if (code >= 400) {
          f.temporary_4xx++;
          const file = saveFinding(seed, i, input);
          violations.push(`input ${i} (${name}${input === raw ? '' : ', mutated'}) got ${code}: a temporary failure means the server could not store a message it took; saved as ${file}`);
        }
      } catch {
        f.connection_lost++;
        session?.close();
        session = undefined;
      }
    }
    session?.close();
    // Every stored message must read back through the API (no 500 on odd content).
    const list = await fetch(`${inst.httpUrl}/inboxes?limit=1`, { headers: { authorization: `Bearer ${inst.key}` } }).then((r) => r.json());
    const inbox = list.data[0].id;
    for (let offset = 0; offset < 400; offset += 100) {
      const page = await fetch(`${inst.httpUrl}/inboxes/${inbox}/messages?limit=100&offset=${offset}`, { headers: { authorization: `Bearer ${inst.key}` } });
      if (page.status !== 200) {
        f.api_read_errors++;
        continue;
      }
      for (const m of (await page.json()).data as Array<{ id: string }>) accepted.push(m.id);
    }
    for (const id of accepted) {
      f.api_reads++;
      const res = await fetch(`${inst.httpUrl}/messages/${id}`, { headers: { authorization: `Bearer ${inst.key}` } });
      if (res.status !== 200) f.api_read_errors++;
    }
    if (f.api_read_errors) violations.push(`${f.api_read_errors} API reads of fuzzed messages failed`);
    if (f.session_attack_failures) violations.push(`${f.session_attack_failures} session attacks were not handled as expected`);
    const alive = await LoadSession.open(inst.smtpPort).then(
      async (s) => {
        const code = await s.message('fuzz@agents.test', 'Subject: after the fuzz\r\n\r\nstill here', { sent: false });
        s.close();
        return code === 250;
      },
      () => false,
    );
    if (!alive) violations.push('the listener no longer accepts a plain message');
  } finally {
    probing = false;
    await probe;
    const rssEnd = rssMb(pid);
    const errors = server
      .log()
      .split('\n')
      .filter((l) => l.includes('"level":"error"'));
    for (const line of new Set(errors.map((l) => (JSON.parse(l) as { msg: string; error?: string }).error ?? JSON.parse(l).msg))) violations.push(`server logged an error: ${line}`);
    const exit = await stopChild(server, 'SIGTERM');
    if (exit.code !== 0) violations.push(`SIGTERM after the run: exit ${exit.code ?? exit.signal}`);
    if (rss.max > MAX_RSS_MB) violations.push(`RSS reached ${rss.max} MB (limit ${MAX_RSS_MB} MB)`);
    if (maxHealthMs > MAX_STALL_MS) violations.push(`the event loop was blocked: /health took ${maxHealthMs} ms at worst (limit ${MAX_STALL_MS} ms)`);
    if (healthFailures) violations.push(`${healthFailures} /health probes failed during the run`);
    Object.assign(f, { rss_start_mb: rss.start, rss_max_mb: rss.max, rss_end_mb: rssEnd, max_health_latency_ms: maxHealthMs, error_log_lines: errors.length });
    rmSync(dir, { recursive: true, force: true });
  }
  return { name: 'smtp-fuzz', rounds: inputs, seconds: Math.round((Date.now() - started) / 1000), figures: f, violations };
}
