// The suite's reporter: node's TAP output, plus what the runner's own summary leaves out.
// - Skips: node's `# skipped` counts skipped tests only, and a skipped describe counts as none
//   (its tests are never enumerated), so a suite skipped whole for a missing peer would go
//   unnoticed. Before the summary this prints `# skipped: N`, the skipped tests and suites, and
//   each one's reason.
// - Failures of the whole run: build/test.sh runs the runner several times and only the end of
//   the output may be read (CI shows its tail). Given MAILROOM_TEST_FAILURES (a file), each run
//   appends its failed tests there, and before its summary prints `# failed in this run: N` with
//   every failure recorded so far, earlier passes' and .ci/run's checks' included.
// - Where the time went: the ten test files whose top-level tests took longest, in seconds (what
//   build/test.sh's `slow` list, which starts them first, is kept from).
// The summary stays the last lines. Used by build/test.sh and `npm run test:binary`.
import { appendFileSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { tap } from 'node:test/reporters';

const pass = process.env.MAILROOM_TEST_PASS ?? 'tests';
const record = process.env.MAILROOM_TEST_FAILURES;

export default async function* report(source) {
  const skipped = [];
  const failed = [];
  /** Seconds of top-level tests and suites, by file. */
  const took = new Map();
  async function* watch() {
    let told = false;
    for await (const event of source) {
      const d = event.data;
      if (event.type === 'test:pass' && d.skip !== undefined && d.skip !== false) {
        skipped.push({ suite: d.details?.type === 'suite', where: `${where(d)}: ${d.name}`, why: d.skip === true ? 'no reason given' : d.skip });
      }
      if ((event.type === 'test:pass' || event.type === 'test:fail') && d.nesting === 0 && d.file) {
        took.set(where(d), (took.get(where(d)) ?? 0) + (d.details?.duration_ms ?? 0) / 1000);
      }
      // A suite or test that failed because a test inside it did is not a failure of its own.
      if (event.type === 'test:fail' && d.details?.error?.failureType !== 'subtestsFailed') {
        const cause = d.details?.error?.cause ?? d.details?.error;
        const why = String(cause?.message ?? cause ?? '')
          .split('\n')[0]
          .slice(0, 200);
        failed.push(`${pass}: ${where(d)}: ${d.name}${why ? ` (${why})` : ''}`);
      }
      // The runner's summary starts with `tests N` at the top level.
      if (!told && event.type === 'test:diagnostic' && d.nesting === 0 && /^tests \d+$/.test(d.message)) {
        told = true;
        const suites = skipped.filter((s) => s.suite).length;
        yield diagnostic(`skipped: ${skipped.length} (${skipped.length - suites} tests, ${suites} suites whose tests did not run)`);
        for (const s of skipped) yield diagnostic(`  ${s.suite ? 'suite' : 'test'} ${s.where}: ${s.why}`);
        const slowest = [...took].sort((a, b) => b[1] - a[1]).slice(0, 10);
        if (slowest.length > 1) yield diagnostic(`slowest files: ${slowest.map(([f, t]) => `${f} ${t.toFixed(0)} s`).join(', ')}`);
        if (record) {
          if (failed.length > 0) appendFileSync(record, failed.map((f) => `${f}\n`).join(''));
          const all = readRecord(record);
          yield diagnostic(`failed in this run: ${all.length}`);
          for (const f of all) yield diagnostic(`  ${f}`);
        }
      }
      yield event;
    }
  }
  yield* tap(watch());
}

const where = (d) => (d.file ? relative(process.cwd(), d.file) : '?');
const diagnostic = (message) => ({ type: 'test:diagnostic', data: { nesting: 0, message } });

function readRecord(file) {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}
