// A claim pass that walks a kind's partitions (claimDue, src/jobs/table.ts) costs an index seek
// per partition however large a partition's backlog: asserted on the query plans of the
// statements nextQueuedPartition and listDueOfPartition really run on SQLite.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openStore } from '../../src/store/open.ts';
import { claimJobs, listDueOfPartition, nextQueuedPartition } from '../../src/store/repo/jobs.ts';
import type { Db } from '../../src/store/store.ts';
import { plansOf } from '../support/query-plan.ts';

test('the partition walk seeks in jobs_kind_partition_due: no scan of a backlog, no sort', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-claim-plan-'));
  const store = await openStore({ dataDir: dir });
  try {
    const db = store.db as unknown as Db;
    const next = /^SEARCH jobs USING COVERING INDEX jobs_kind_partition_due \(kind=\? AND status=\? AND partition>\?\)$/;
    const cases: Array<[() => Promise<unknown>, RegExp]> = [
      [() => nextQueuedPartition(db, 'send', null), next],
      [() => nextQueuedPartition(db, 'send', 'example.com'), next],
      [() => listDueOfPartition(db, 'send', 'example.com', Date.now(), 16), /^SEARCH jobs USING INDEX jobs_kind_partition_due \(kind=\? AND status=\? AND partition=\? AND run_at<\?\)$/],
    ];
    for (const [run, expected] of cases) {
      const [plan] = await plansOf(store, 'jobs', run);
      assert.ok(plan, 'the statement was seen');
      assert.match(plan.find((d) => /^(SEARCH|SCAN) jobs\b/.test(d)) ?? '', expected, plan.join('\n'));
      assert.ok(!plan.some((d) => d.includes('TEMP B-TREE')), `no sort: ${plan.join('; ')}`);
    }
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a claim updates its listed jobs by primary key, not through the due index (a backlog read per claim)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-claim-plan-'));
  const store = await openStore({ dataDir: dir });
  try {
    const db = store.db as unknown as Db;
    const now = Date.now();
    const [plan] = await plansOf(store, 'jobs', () => claimJobs(db, { ids: ['a', 'b'], attempts: 0, now, leaseUntil: now + 1, runAt: now + 1, updatedAt: new Date(now).toISOString() }));
    assert.ok(plan, 'the statement was seen');
    const reads = plan.filter((d) => /^(SEARCH|SCAN) jobs\b/.test(d));
    assert.deepEqual(reads, ['SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)'], plan.join('\n'));
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
