// `npm run test:reliability`: the slow suites. Crash consistency (SIGKILL under load, three
// scenarios) and the long SMTP fuzz run; writes the figures to test/reliability/RESULTS.md and
// results.json and exits 1 when any invariant was violated.
//   options: --rounds N (crash rounds per scenario, default 20)  --seed N  --fuzz N (messages)
//            --only smtp-ingest,outbound,webhooks,smtp-fuzz,noisy-neighbour,noisy-neighbour-postgres
//            --noisy-seconds N (each phase of the noisy-neighbour runs, default 30)
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { crashOutbound, crashSmtpIngest, crashWebhooks, type ScenarioResult } from './crash.ts';
import { fuzzSmtp } from './fuzz.ts';
import { noisyNeighbour } from './noisy.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '20' },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
    fuzz: { type: 'string', default: '3000' },
    'noisy-seconds': { type: 'string', default: '30' },
    only: { type: 'string' },
    out: { type: 'string', default: import.meta.dirname },
  },
});
const rounds = Number(values.rounds);
const seed = Number(values.seed);
const only = values.only ? new Set(values.only.split(',')) : undefined;

const SCENARIOS: Array<[string, () => Promise<ScenarioResult>]> = [
  ['smtp-ingest', () => crashSmtpIngest(rounds, seed)],
  ['outbound', () => crashOutbound(rounds, seed + 1)],
  ['webhooks', () => crashWebhooks(rounds, seed + 2)],
  ['smtp-fuzz', () => fuzzSmtp(Number(values.fuzz), seed + 3)],
  ['noisy-neighbour', () => noisyNeighbour(Number(values['noisy-seconds']))],
  [
    'noisy-neighbour-postgres',
    async () => (postgresMissing() ? skipped('noisy-neighbour-postgres', postgresMissing() as string) : noisyNeighbour(Number(values['noisy-seconds']), await (await pgCluster()).createDatabase())),
  ],
];

function skipped(name: string, why: string): ScenarioResult {
  return { name, rounds: 0, seconds: 0, figures: {}, violations: [`not run: ${why}`] };
}

const results: ScenarioResult[] = [];
for (const [name, run] of SCENARIOS) {
  if (only && !only.has(name)) continue;
  process.stderr.write(`reliability: ${name} …\n`);
  const result = await run();
  results.push(result);
  process.stderr.write(`reliability: ${name}: ${JSON.stringify(result.figures)}${result.violations.length ? `\n  VIOLATIONS:\n  ${result.violations.join('\n  ')}` : ' (no violations)'}\n`);
}

const command = `npm run test:reliability -- --rounds ${rounds} --seed ${seed} --fuzz ${values.fuzz} --noisy-seconds ${values['noisy-seconds']}${values.only ? ` --only ${values.only}` : ''}`;
const environment = `Node ${process.version}, ${process.platform}/${process.arch}, ${availableParallelism()} CPUs`;
const when = new Date().toISOString();
writeFileSync(join(values.out, 'results.json'), JSON.stringify({ when, command, environment, seed, results }, null, 2) + '\n');
const md = [
  '# Reliability results',
  '',
  `Latest run: ${when} (${environment}). Reproduce with:`,
  '',
  '```sh',
  command,
  '```',
  '',
  ...results.flatMap((r) => [
    `## ${r.name}: ${r.violations.length ? `${r.violations.length} violation(s)` : 'no violations'}`,
    '',
    `${r.rounds} ${r.name === 'smtp-fuzz' ? 'inputs' : 'crash rounds'}, ${r.seconds} s.`,
    '',
    '| figure | value |',
    '|---|---|',
    ...Object.entries(r.figures).map(([k, v]) => `| ${k} | ${v} |`),
    '',
    ...(r.violations.length ? ['Violations:', '', ...r.violations.map((v) => `- ${v}`), ''] : []),
  ]),
].join('\n');
writeFileSync(join(values.out, 'RESULTS.md'), md);
const failed = results.filter((r) => r.violations.length);
process.stderr.write(`reliability: ${results.length} scenario(s), ${failed.length} with violations; figures in ${join(values.out, 'RESULTS.md')}\n`);
process.exitCode = failed.length ? 1 : 0;
