// The noisy-neighbour suite (issue 27), short: tenant A runs every attack at once while tenant B
// reads and receives; B's latency and ingest are compared with the same run's quiet phase. The
// long version is `npm run test:reliability -- --only noisy-neighbour` (docs/reliability.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pgCluster } from '../support/postgres.ts';
import { TEST_ENGINE } from '../support/server.ts';
import { noisyViolations, runNoisy } from '../reliability/noisy.ts';

test(`tenant A's attacks leave tenant B's reads, mail and the server's memory within bounds (${TEST_ENGINE})`, { timeout: 360_000 }, async () => {
  const databaseUrl = TEST_ENGINE === 'postgres' ? await (await pgCluster()).createDatabase() : undefined;
  let { figures, seen } = await runNoisy({ seconds: 6, databaseUrl });
  // Memory and exactly-once hold in every run, the first included.
  const timing = (v: string) => v.startsWith("B's GET") || v.startsWith("B's SMTP ingest");
  assert.deepEqual(
    noisyViolations(figures).filter((v) => !timing(v)),
    [],
    JSON.stringify(figures),
  );
  // The latency and ingest bounds compare two phases of one run; on a 2-core machine other work
  // can land in one phase only (npm test runs no other test file beside this one, build/test.sh).
  // A run that misses them is run once more (a fresh server), and the second decides: a real
  // regression misses both.
  if (noisyViolations(figures).length) ({ figures, seen } = await runNoisy({ seconds: 6, databaseUrl: TEST_ENGINE === 'postgres' ? await (await pgCluster()).createDatabase() : undefined }));
  const report = JSON.stringify({ figures, attacker: Object.fromEntries(seen) });
  assert.deepEqual(noisyViolations(figures), [], report);
  // The attacks reached the server and were bounded there (not all refused at the door).
  assert.ok(
    [...seen.keys()].some((k) => k.startsWith('search-500-terms 400')),
    report,
  );
  assert.ok(
    [...seen.keys()].some((k) => k.startsWith('large-mail 250')),
    report,
  );
});
