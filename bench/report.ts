// Renders the results of one run as Markdown (bench/results/latest.md, copied into docs/performance.md):
// one table per scenario, mailroom beside each baseline with the ratio mailroom ÷ baseline.
import type { Machine, Row, ScenarioResult } from './support.ts';

export interface RunResults {
  startedAt: string;
  finishedAt?: string;
  seconds?: number;
  machine: Machine;
  /** Load average when the run started, and notes such as other work on the machine. */
  loadAtStart: number[];
  notes: string[];
  scenarios: ScenarioResult[];
}

const fmt = (v: number | null | undefined): string => {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
};

function ratio(a: number | null, b: number | null): string {
  if (a === null || b === null || !b) return '—';
  return `${(a / b).toFixed(2)}×`;
}

function rowLines(r: Row): string[] {
  const target = r.target ? `${r.target}${r.met === undefined ? '' : r.met ? ' ✅' : ' ❌'}` : '';
  const mine = `${fmt(r.mailroom)} ${r.unit}`;
  const note = r.note ?? '';
  if (!r.baselines?.length) return [`| ${r.metric} | ${mine} | | | | ${target} | ${note} |`];
  return r.baselines.map(
    (b, i) => `| ${i === 0 ? r.metric : ''} | ${i === 0 ? mine : ''} | ${b.name} | ${fmt(b.value)} ${r.unit} | ${ratio(r.mailroom, b.value)} | ${i === 0 ? target : ''} | ${i === 0 ? note : ''} |`,
  );
}

/** When, on what and under what load one scenario ran (each carries its own: partial runs keep older ones). */
function where(s: ScenarioResult): string {
  const m = s.machine;
  const at = s.measuredAt ? `${s.measuredAt.slice(0, 16).replace('T', ' ')} UTC` : 'date not recorded';
  const on = m ? `${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB, Node ${m.node}` : 'machine not recorded';
  const loads = s.loadBefore ? `load average (1/5/15 min) ${s.loadBefore.join(' / ')} before${s.loadAfter ? `, ${s.loadAfter.join(' / ')} after` : ''}` : 'load not recorded';
  return `*Measured ${at} on ${on}; ${loads}${s.seconds !== undefined ? `; ${Math.round(s.seconds)} s` : ''}.*`;
}

export function renderMarkdown(run: RunResults): string {
  const out: string[] = [];
  const m = run.machine;
  out.push(
    `The last run started ${run.startedAt.slice(0, 16).replace('T', ' ')} UTC on ${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB, Node ${m.node}; ` +
      `load average at its start ${run.loadAtStart.join(' / ')}; it took ${Math.round(run.seconds ?? 0)} s. Each scenario below says when, on what and under what load it was measured. ` +
      'Ratios are mailroom ÷ baseline (for msg/s and req/s higher is better, for ms, µs and MB lower is better).',
  );
  for (const n of run.notes) out.push('', `> ${n}`);
  out.push('', ...renderTargets(run));
  for (const s of run.scenarios) {
    out.push('', `#### ${s.title}`, '');
    if (s.status === 'skipped') {
      out.push(`skipped: ${s.reason}`);
      continue;
    }
    out.push(where(s), '', s.setup, '');
    if (s.status === 'failed') out.push(`**failed**: ${s.reason}`, '');
    if (s.rows.length) {
      out.push('| metric | mailroom | baseline | baseline value | ratio | target | note |', '|---|---:|---|---:|---:|---|---|');
      for (const r of s.rows) out.push(...rowLines(r));
    }
  }
  return out.join('\n') + '\n';
}

/** Every figure that has a target, from every scenario, in one table (the run's scorecard). */
export function renderTargets(run: RunResults): string[] {
  const rows = run.scenarios.flatMap((s) => s.rows.filter((r) => r.target).map((r) => ({ s, r })));
  if (rows.length === 0) return [];
  const out = ['#### Targets', '', '| scenario | metric | mailroom | ratio to the first baseline | target | met | measured (UTC, CPU, load before) |', '|---|---|---:|---:|---|---|---|'];
  for (const { s, r } of rows) {
    const first = r.baselines?.[0];
    const when = s.measuredAt ? `${s.measuredAt.slice(0, 16).replace('T', ' ')}, ${s.machine?.cpuModel ?? '?'}, ${s.loadBefore?.[0] ?? '?'}` : 'not recorded';
    out.push(
      `| ${s.id} | ${r.metric} | ${fmt(r.mailroom)} ${r.unit} | ${first ? `${ratio(r.mailroom, first.value)} ${first.name}` : ''} | ${r.target} | ${r.met === undefined ? '' : r.met ? 'yes' : 'no'} | ${when} |`,
    );
  }
  return out;
}
