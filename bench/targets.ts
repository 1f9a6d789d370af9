// Every target the benchmark judges a figure by, in one place: the scenarios name one of these
// (`...judge('httpRead', value, tinyhttp)`) instead of writing the number and the comparison
// themselves, so a target changes here and in docs/performance.md's generated scorecard at once.
// The figures are the issues' (18, 28, 31 and 33) and PRODUCT.md's.

export interface Target {
  /** As printed in the results, e.g. "≥ 0.8× tinyhttp". */
  text: string;
  /** Whether `value` meets it; `baseline` is the value it is a ratio of, when it is one. */
  met(value: number, baseline?: number): boolean;
}

const atLeast = (limit: number, unit = ''): Target => ({ text: `≥ ${limit.toLocaleString('en-US')}${unit}`, met: (v) => v >= limit });
const below = (limit: number, unit = ''): Target => ({ text: `< ${limit.toLocaleString('en-US')}${unit}`, met: (v) => v < limit });
const atMost = (limit: number, unit = ''): Target => ({ text: `≤ ${limit.toLocaleString('en-US')}${unit}`, met: (v) => v <= limit });
/** value ≥ factor × baseline (a missing baseline meets nothing). */
const timesAtLeast = (factor: number, of: string): Target => ({ text: `≥ ${factor}× ${of}`, met: (v, b) => b !== undefined && b > 0 && v >= factor * b });
const timesAtMost = (factor: number, of: string): Target => ({ text: `≤ ${factor}× ${of}`, met: (v, b) => b !== undefined && b > 0 && v <= factor * b });

export const TARGETS = {
  /** (a) 250s per second against Postfix's discard server. */
  smtpAccept: timesAtLeast(0.3, 'smtp-sink'),
  /** (a), (o): first 250 → last visible, against Postfix delivering into Maildir in the same run (issue 31). */
  endToEndVsPostfix: timesAtLeast(2, 'Postfix → Maildir'),
  /** (o): the same in absolute terms, on a 2-core machine. */
  endToEnd: atLeast(2000, ' msg/s'),
  /** (o): distinct messages webhooked per second against those made visible. */
  webhookedVsVisible: timesAtLeast(0.9, 'visible'),
  /** (o) on PostgreSQL: end to end against SQLite's in the same run. */
  postgresVsSqlite: timesAtLeast(0.6, 'SQLite'),
  /** (o): 250 → visible p99 at 1,500 msg/s offered (and flat, and nothing refused: judged beside it). */
  steadyP99Ms: { text: '< 2,000 ms, flat, nothing refused', met: (v) => v < 2000 },
  /** (b) reads against bare tinyhttp. */
  httpRead: timesAtLeast(0.8, 'tinyhttp'),
  httpReadP99Ms: below(10, ' ms'),
  /** (c) */
  outbound: atLeast(500, ' msg/s'),
  /** (d) */
  webhookP50Ms: below(50, ' ms'),
  /** (e), (k): a read at 10⁶ against the same read at 10³. */
  scale: timesAtMost(1.5, '10³'),
  /** (g) */
  coldStartMs: below(200, ' ms'),
  idleRssMb: atMost(64, ' MB'),
  /** (h) */
  largePeakMb: below(400, ' MB'),
  /** (g): the single executable's peak with eight 25 MB messages at once (issue 31). */
  largeBinaryPeakMb: below(200, ' MB'),
  /** (j): events produced per second at 500 offered (95%), and event → SSE/webhook p99. */
  eventRate: atLeast(475, ' events/s'),
  eventP99Ms: below(100, ' ms'),
  /** (j): distinct events received (value) against those produced (baseline): each once, none missing. */
  everyEventOnce: { text: 'every event once', met: (v, b) => v === b },
  /** (p) */
  replyTextMs: below(1500, ' ms'),
  /** (q): end to end with screening "monitor" against "off", same burst, same run (issue 28: at most 10% lower). */
  screeningVsOff: timesAtLeast(0.9, 'screening off'),
  /** (r): 250 → EXISTS of a client in IDLE, p99 (issue 33: "IDLE sees a new message within 1 s"). */
  imapIdleP99Ms: below(1000, ' ms'),
} satisfies Record<string, Target>;

export type TargetName = keyof typeof TARGETS;

/** `{ target, met }` for a result row: the named target's text and whether `value` meets it. */
export function judge(name: TargetName, value: number | null | undefined, baseline?: number | null, also = true): { target: string; met: boolean } {
  const t = TARGETS[name];
  const ok = value !== null && value !== undefined && !Number.isNaN(value) && t.met(value, baseline ?? undefined);
  return { target: t.text, met: ok && also };
}
