// The suite's reporter (build/test-reporter.mjs), run by a real `node --test` on fixture files:
// it names skipped suites with their reasons, lists every failure of the run so far (earlier
// passes' from MAILROOM_TEST_FAILURES, then its own, which it appends there) and the slowest
// files, all before node's summary, which stays the last lines.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

const ROOT = new URL('../..', import.meta.url).pathname;

test('before the summary: skipped suites with reasons, every failure of the run, the slowest files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-reporter-'));
  try {
    const record = join(dir, 'failures');
    writeFileSync(record, 'ci: lint:promises failed (its output is printed before the suite\u2019s)\n');
    const run = spawnSync(
      process.execPath,
      ['--test', '--test-reporter=./build/test-reporter.mjs', '--test-reporter-destination=stdout', 'test/fixtures/reporter/mixed.test.ts', 'test/fixtures/reporter/other.test.ts'],
      { cwd: ROOT, encoding: 'utf8', env: { ...process.env, MAILROOM_TEST_FAILURES: record, MAILROOM_TEST_PASS: 'sqlite', NODE_TEST_CONTEXT: undefined } },
    );
    assert.equal(run.status, 1, run.stderr);
    const lines = run.stdout.trimEnd().split('\n');
    const at = (prefix: string) => lines.findIndex((l) => l.startsWith(prefix));
    // Skips, the run's failures (the earlier one first, then this run's leaf failure only), the slowest files.
    assert.equal(lines[at('# skipped: ')], '# skipped: 1 (0 tests, 1 suites whose tests did not run)');
    assert.match(lines[at('# skipped: ') + 1], /^# {3}suite test\/fixtures\/reporter\/mixed\.test\.ts: a peer-less group: the peer is missing$/);
    const failed = at('# failed in this run: ');
    assert.deepEqual(lines.slice(failed, failed + 3), [
      '# failed in this run: 2',
      '#   ci: lint:promises failed (its output is printed before the suite\u2019s)',
      '#   sqlite: test/fixtures/reporter/mixed.test.ts: fails with a two-line message (first line of the error)',
    ]);
    assert.match(lines[at('# slowest files: ')], /^# slowest files: test\/fixtures\/reporter\/\w+\.test\.ts \d+ s, test\/fixtures\/reporter\/\w+\.test\.ts \d+ s$/);
    // This run's failure was appended for the passes after it.
    assert.deepEqual(readFileSync(record, 'utf8').trimEnd().split('\n').slice(1), ['sqlite: test/fixtures/reporter/mixed.test.ts: fails with a two-line message (first line of the error)']);
    // Node's summary stays last, after all of it.
    assert.ok(at('# tests ') > failed && at('# tests ') > at('# slowest files: '));
    assert.match(lines.at(-1)!, /^# duration_ms /);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
