// Summarises a V8 .cpuprofile (from `BENCH_PROFILE=1 npm run bench`, which runs the server with
// --cpu-prof): self time by function and by package, so docs/performance.md can say what limits a
// scenario from a measurement. Usage: node bench/profile.ts FILE.cpuprofile [N] [REQUESTS]:
// with REQUESTS (how many requests or messages the profiled process served), every line also
// gives µs of that thread's time per request, and the inclusive list covers every function,
// libraries' included (bench (b): tinyhttp's router).
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

function packageOf(url: string): string {
  if (!url) return '(native/gc/idle)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + 13).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (url.startsWith('node:')) return 'node core';
  return url.includes('/bench/work/') ? 'mailroom (bundle)' : url;
}

/** A function and where it is: its package's path, or the bundle's, and line. */
const frameName = (f: Node['callFrame']) => `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/bench\/work\//, '')}:${f.lineNumber + 1}`;

export function summarizeProfile(file: string, top = 25, requests?: number): string {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  let total = 0;
  const fn = new Map<string, number>();
  const pkg = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    total += us;
    const name = n.callFrame.functionName || '(anonymous)';
    if (name === '(idle)') {
      pkg.set('(idle)', (pkg.get('(idle)') ?? 0) + us);
      continue;
    }
    const key = frameName(n.callFrame);
    fn.set(key, (fn.get(key) ?? 0) + us);
    const k = ['(garbage collector)', '(program)'].includes(name) ? name : packageOf(n.callFrame.url);
    pkg.set(k, (pkg.get(k) ?? 0) + us);
  }
  const perRequest = (us: number) => (requests ? `  ${(us / requests).toFixed(1).padStart(6)} µs/request` : '');
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%${perRequest(us)}`;
  const lines = [`${file}: ${(total / 1e6).toFixed(1)} s sampled`, '', 'self time by package:'];
  for (const [k, us] of [...pkg].sort((a, b) => b[1] - a[1]).slice(0, 15)) lines.push(`  ${pct(us)}  ${k}`);
  lines.push('', 'self time by function:');
  for (const [k, us] of [...fn].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(us)}  ${k}`);
  // Inclusive time of mailroom's own functions (each sample counted once per function on its
  // stack): which of our code paths the library time above is spent under.
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const incl = new Map<string, number>();
  p.samples.forEach((id, i) => {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      if (requests) seen.add(frameName(f));
      else if (f.url.includes('/bench/work/')) seen.add(`${f.functionName || '(anonymous)'}:${f.lineNumber + 1}`);
    }
    for (const k of seen) incl.set(k, (incl.get(k) ?? 0) + (p.timeDeltas[i] ?? 0));
  });
  lines.push('', requests ? 'inclusive time of every function:' : 'inclusive time of mailroom functions:');
  for (const [k, us] of [...incl].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(us)}  ${k}`);
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/^.*\/bench\//, '/bench/'))) {
  process.stdout.write(summarizeProfile(process.argv[2], Number(process.argv[3] ?? 25), process.argv[4] ? Number(process.argv[4]) : undefined) + '\n');
}
