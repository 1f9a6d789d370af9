// The noisy-neighbour suite (issue 27), short: tenant A runs every attack at once while tenant B
// reads and receives; B's latency and ingest are compared with the same run's quiet phase. The
// long version is `npm run test:reliability -- --only noisy-neighbour` (docs/reliability.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pgCluster } from '../support/postgres.ts';
import { TEST_ENGINE } from '../support/server.ts';
import { runNoisy } from '../reliability/noisy.ts';

test(`tenant A's attacks leave tenant B's reads, mail and the server's memory within bounds (${TEST_ENGINE})`, { timeout: 180_000 }, async () => {
  const databaseUrl = TEST_ENGINE === 'postgres' ? await (await pgCluster()).createDatabase() : undefined;
  const { figures, seen } = await runNoisy({ seconds: 6, databaseUrl });
  const report = JSON.stringify({ figures, attacker: Object.fromEntries(seen) });
  assert.equal(figures.lost, 0, `B's mail answered 250 but not stored: ${report}`);
  assert.equal(figures.storedTwice, 0, report);
  assert.ok(figures.accepted > 0, report);
  assert.ok(figures.peakRssMb < 512, `peak RSS ${figures.peakRssMb} MB: ${report}`);
  assert.ok(figures.p99Ratio <= 2, `B's GET /inboxes/{id} p99 ratio ${figures.p99Ratio}: ${report}`);
  assert.ok(figures.ingestRatio <= 2, `B's SMTP ingest ratio ${figures.ingestRatio}: ${report}`);
});
