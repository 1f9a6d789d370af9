// The job table and runner with a test job kind: attempts recorded at claim, claims that lost a
// race, the claim hook, retries on the schedule, final failure, outcomes committed together,
// lapsed leases, recovery after a crash, per-partition concurrency, sweeping.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { configFrom } from '../../src/config.ts';
import { closeContext, createContext, type AppContext } from '../../src/context.ts';
import { jobs } from '../../src/store/schema.ts';
import { claimDue, enqueueJob, enqueueJobHere, fail, finishJob, finishJobsTogether, getJob, ok, recoverJobs, retry, sweepJobs, type JobOutcome, type JobRow } from '../../src/jobs/table.ts';
import { createJobRunner, type JobHandler } from '../../src/jobs/runner.ts';
import { silentLogger } from '../../src/log.ts';
import { rawRows, rawRun, type Db } from '../../src/store/store.ts';
import { listClaimCandidates, nextQueuedPartition } from '../../src/store/repo/jobs.ts';
import { onEngine, testDatabaseUrl, TEST_ENGINE } from '../support/server.ts';
import { sqlDb } from '../support/db.ts';

/** A context on the suite's engine (MAILROOM_TEST_ENGINE), with a database of its own. */
async function context(extra: Record<string, unknown> = {}): Promise<AppContext> {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-jobs-'));
  const database = TEST_ENGINE === 'postgres' ? { url: await testDatabaseUrl(dir) } : {};
  return createContext(configFrom({ data_dir: dir, database, ...extra }), silentLogger);
}

async function enqueue(ctx: AppContext, payload: unknown, opts: { partition?: string; maxAttempts?: number; kind?: string } = {}): Promise<string> {
  const id = await ctx.store.transaction((tx) => enqueueJob(tx, new Date(), { kind: opts.kind ?? 'test', payload, partition: opts.partition, maxAttempts: opts.maxAttempts ?? 3 }));
  ctx.notify('jobs');
  return id;
}

const until = async (cond: () => boolean | Promise<boolean>, ms = 5000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};

test('claiming records the attempt and the next run time in one step', async () => {
  const ctx = await context();
  try {
    const id = await enqueue(ctx, { n: 1 });
    const before = Date.now();
    const [job] = await claimDue(ctx, 10, () => [60_000, 120_000]);
    assert.equal(job.id, id);
    const row = (await getJob(ctx, id))!;
    assert.equal(row.status, 'running');
    assert.equal(row.attempts, 1);
    assert.ok(row.runAt >= before + 60_000, 'next run time already set from the schedule');
    assert.ok(row.leaseUntil! >= before + ctx.config.jobs.lease);
    // A running job with a live lease is not claimed again.
    assert.equal((await claimDue(ctx, 10, () => [1])).length, 0);
  } finally {
    await closeContext(ctx);
  }
});

test('a due job changed by another writer before the claim commits is left alone', async () => {
  const ctx = await context();
  try {
    const id = await enqueue(ctx, { n: 1 });
    // The claim reads the due jobs now and commits them moments later (group commit); the CLI
    // or another process may change the job in between. The change is made once the claim has
    // read the due jobs and chosen this one (its accept callback), and its transaction starts
    // once the change has committed: on PostgreSQL the change runs on a connection of its own,
    // and left to race, under load it reached the row after the claim had locked it (the claim
    // then wins, and the change waits for it).
    let change: Promise<unknown> | undefined;
    const grouped = ctx.store.grouped.bind(ctx.store);
    ctx.store.grouped = async (work) => (await change, grouped(work));
    const claim = claimDue(
      ctx,
      10,
      () => [60_000],
      () => {
        change ??= sqlDb(ctx).update(jobs).set({ status: 'failed', finishedAt: new Date().toISOString() }).where(eq(jobs.id, id)).run();
        return true;
      },
    );
    assert.deepEqual(await claim, []);
    assert.ok(change !== undefined, 'the claim chose the job before the change');
    await change;
    assert.equal((await getJob(ctx, id))!.status, 'failed');
    assert.equal((await getJob(ctx, id))!.attempts, 0);
  } finally {
    await closeContext(ctx);
  }
});

test("a handler's claimed hook is committed with the claim, before the attempt runs", async () => {
  const ctx = await context();
  const seen: Array<string | null> = [];
  const handler: JobHandler = {
    kind: 'test',
    schedule: () => [60_000],
    claimed: async (tx: Db, _c, job) => {
      await tx
        .update(jobs)
        .set({ lastError: `claimed at attempt ${job.attempts}` })
        .where(eq(jobs.id, job.id))
        .run();
    },
    run: async (_c, job) => (seen.push((await getJob(ctx, job.id))!.lastError), ok()),
  };
  const runner = createJobRunner(ctx, [handler]);
  await runner.start();
  try {
    const id = await enqueue(ctx, {});
    await until(async () => (await getJob(ctx, id))!.status === 'done');
    assert.deepEqual(seen, ['claimed at attempt 1']);
  } finally {
    await runner.stop(1000);
    await closeContext(ctx);
  }
});

test('the runner wakes at once on new work, retries on the schedule, and fails after the last attempt', async () => {
  const ctx = await context();
  const seen: Array<{ payload: string; attempt: number; at: number }> = [];
  const handler: JobHandler = {
    kind: 'test',
    schedule: () => [50, 50],
    async run(_ctx, job): Promise<JobOutcome> {
      // The claim time (updatedAt at claim), not when the handler got to run: under load the
      // handler may start late, but a retry can never be claimed before its scheduled time.
      seen.push({ payload: job.payload, attempt: job.attempts, at: Date.parse(job.updatedAt) });
      const p = JSON.parse(job.payload);
      if (p.mode === 'ok') return ok();
      if (p.mode === 'fail') return fail('permanent');
      if (p.mode === 'throw') throw new Error('boom');
      return retry('try later');
    },
  };
  const runner = createJobRunner(ctx, [handler]);
  await runner.start();
  try {
    const okId = await enqueue(ctx, { mode: 'ok' });
    const retryId = await enqueue(ctx, { mode: 'retry' });
    const failId = await enqueue(ctx, { mode: 'fail' });
    const throwId = await enqueue(ctx, { mode: 'throw' }, { maxAttempts: 2 });
    await until(async () => ['done', 'failed'].includes((await getJob(ctx, retryId))!.status) && (await getJob(ctx, throwId))!.status === 'failed');
    await runner.idle();
    assert.equal((await getJob(ctx, okId))!.status, 'done');
    assert.ok((await getJob(ctx, okId))!.finishedAt);
    const r = (await getJob(ctx, retryId))!;
    assert.equal(r.status, 'failed');
    assert.equal(r.attempts, 3);
    assert.equal(r.lastError, 'try later');
    const times = seen.filter((s) => JSON.parse(s.payload).mode === 'retry');
    assert.deepEqual(
      times.map((s) => s.attempt),
      [1, 2, 3],
    );
    assert.ok(times[1].at - times[0].at >= 50, 'retries wait for the schedule');
    assert.ok(times[2].at - times[1].at >= 50, 'retries wait for the schedule');
    const f = (await getJob(ctx, failId))!;
    assert.equal(f.status, 'failed');
    assert.equal(f.attempts, 1, 'a permanent failure is not retried');
    const t = (await getJob(ctx, throwId))!;
    assert.equal(t.status, 'failed');
    assert.equal(t.attempts, 2);
    assert.equal(t.lastError, 'boom');
  } finally {
    await runner.stop(1000);
    await closeContext(ctx);
  }
});

test('an outcome commit runs in the same transaction as the finish', async () => {
  const ctx = await context();
  const handler: JobHandler = {
    kind: 'test',
    schedule: () => [10],
    run: async (_c, job) =>
      ok(async (tx: Db) => {
        await tx
          .update(jobs)
          .set({ lastError: `committed by ${job.id}` })
          .where(eq(jobs.id, job.id))
          .run();
      }),
  };
  const runner = createJobRunner(ctx, [handler]);
  await runner.start();
  try {
    const id = await enqueue(ctx, {});
    await until(async () => (await getJob(ctx, id))!.status === 'done');
    assert.equal((await getJob(ctx, id))!.lastError, `committed by ${id}`);
  } finally {
    await runner.stop(1000);
    await closeContext(ctx);
  }
});

test('outcomes that end together are all saved, except one whose commit throws, which is undone alone', async () => {
  const ctx = await context();
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let started = 0;
  const handler: JobHandler = {
    kind: 'test',
    schedule: () => [60_000],
    async run(_c, job) {
      started++;
      // Every attempt ends at the same moment: their outcomes are committed together.
      await gate;
      const { n } = JSON.parse(job.payload) as { n: number };
      return ok(async (tx: Db) => {
        await tx
          .update(jobs)
          .set({ lastError: `committed ${n}` })
          .where(eq(jobs.id, job.id))
          .run();
        if (n === 2) throw new Error('this outcome cannot be written');
      });
    },
  };
  const runner = createJobRunner(ctx, [handler]);
  await runner.start();
  try {
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) ids.push(await enqueue(ctx, { n }));
    await until(() => started === 5);
    open();
    await until(async () => (await Promise.all(ids.map((id) => getJob(ctx, id)))).filter((j) => j!.status === 'done').length === 4);
    await runner.idle();
    const rows = await Promise.all(ids.map((id) => getJob(ctx, id)));
    assert.deepEqual(
      rows.map((r) => [r!.status, r!.lastError]),
      [
        ['done', 'committed 0'],
        ['done', 'committed 1'],
        // Not saved: still running under its lease (another attempt follows when it lapses), its write undone.
        ['running', null],
        ['done', 'committed 3'],
        ['done', 'committed 4'],
      ],
    );
  } finally {
    await runner.stop(1000);
    await closeContext(ctx);
  }
});

test('a running job whose lease lapsed is claimed again by the runner, with due jobs of every kind', async () => {
  const ctx = await context();
  const runs: string[] = [];
  const handler = (kind: string): JobHandler => ({ kind, schedule: () => [3_600_000], run: async (_c, job) => (runs.push(`${kind} ${job.attempts}`), ok()) });
  try {
    const lapsed = await enqueue(ctx, {}, { kind: 'a' });
    // Claimed by a process that stopped renewing its lease: it ended a moment ago.
    await claimDue(ctx, 1, () => [3_600_000]);
    await rawRun(ctx.db, 'UPDATE jobs SET lease_until = ? WHERE id = ?', [Date.now() - 1, lapsed]);
    const queued = [await enqueue(ctx, {}, { kind: 'b' }), await enqueue(ctx, {}, { kind: 'a' })];
    const runner = createJobRunner(ctx, [handler('a'), handler('b')]);
    await runner.start();
    try {
      await until(async () => (await Promise.all([lapsed, ...queued].map((id) => getJob(ctx, id)))).every((j) => j!.status === 'done'));
      assert.deepEqual(runs.sort(), ['a 1', 'a 2', 'b 1']);
    } finally {
      await runner.stop(1000);
    }
  } finally {
    await closeContext(ctx);
  }
});

onEngine('postgres').test("the claim's candidate read is planned with its values on each run, never kept as a prepared statement", async () => {
  // A prepared statement's generic plan, made after five runs while the table was nearly empty,
  // took 2 ms a claim in bench (o) (src/store/repo/jobs.ts); PLAN_EACH_TIME sends it unnamed.
  const ctx = await context();
  try {
    await enqueue(ctx, {}, { partition: 'a.example' });
    const prepared = await ctx.store.transaction(async (tx) => {
      for (let i = 0; i < 7; i++) await listClaimCandidates(tx, Date.now(), ['test', 'other'], 16);
      for (let i = 0; i < 7; i++) await nextQueuedPartition(tx, 'test', null);
      return (await rawRows<[string]>(tx, 'SELECT statement FROM pg_prepared_statements')).map(([text]) => text);
    });
    // The other statement, run as often on the same connection, is kept by name: the check sees them.
    assert.ok(
      prepared.some((text) => text.includes('ORDER BY partition LIMIT 1')),
      `nextQueuedPartition is a named prepared statement: ${prepared.join(' | ')}`,
    );
    assert.ok(!prepared.some((text) => text.includes("status = 'running' AND lease_until <=")), `the claim's read is not: ${prepared.join(' | ')}`);
  } finally {
    await closeContext(ctx);
  }
});

// Row locks: PostgreSQL's.
onEngine('postgres').test("a finish takes its job's row before its outcome's writes, so it cannot deadlock with a transaction holding that row", async () => {
  // Another node's claim can hold the row of a job this node runs (it read the job as due and
  // locked it just after this node took it) while it writes rows the finish writes too (a
  // message's status, the inbox counts): here, another job's row stands for those.
  const ctx = await context();
  try {
    const x = await enqueue(ctx, {});
    const y = await enqueue(ctx, {});
    const [job] = await claimDue(
      ctx,
      1,
      () => [60_000],
      (j) => j.id === x,
    );
    let locked!: () => void;
    const holding = new Promise<void>((r) => (locked = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const claim = ctx.store.transaction(async (tx) => {
      await rawRows(tx, 'SELECT id FROM jobs WHERE id = ? FOR UPDATE', [x]);
      locked();
      await released;
      await rawRun(tx, 'UPDATE jobs SET last_error = ? WHERE id = ?', ['claim', y]);
    });
    await holding;
    const finished = finishJob(
      ctx,
      job!,
      ok((tx) => rawRun(tx, 'UPDATE jobs SET last_error = ? WHERE id = ?', ['finish', y])),
    );
    // The finish is blocked on a row lock: on x's row, or (were it to write the outcome before
    // its own row) on x's row after taking y's. Either way it has gone as far as it can.
    const waiting = "SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    await until(async () => (await rawRows<[number]>(ctx.db, waiting))[0]![0] > 0);
    release();
    // Writing the outcome first, the two waited for each other: PostgreSQL ended one as a deadlock.
    await Promise.all([claim, finished]);
    assert.equal((await getJob(ctx, x))!.status, 'done');
    assert.equal((await getJob(ctx, y))!.lastError, 'finish');
  } finally {
    await closeContext(ctx);
  }
});

onEngine('postgres').test('outcomes finished together commit in one transaction; when one fails, the others are recorded alone; one sharing a lock key is recorded apart', async () => {
  const ctx = await context();
  try {
    const claimAll = async (n: number) => {
      for (let i = 0; i < n; i++) await enqueue(ctx, { i });
      return claimDue(ctx, n, () => [60_000]);
    };
    const xmins = async (ids: string[]) =>
      (await rawRows<[string]>(ctx.db, 'SELECT xmin::text FROM jobs WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id', [JSON.stringify(ids)])).map(([x]) => x);
    const note = (id: string) => ok((tx) => rawRun(tx, 'UPDATE jobs SET last_error = ? WHERE id = ?', [`noted ${id}`, id]));

    const jobs3 = await claimAll(3);
    assert.equal(jobs3.length, 3);
    const saved = await finishJobsTogether(
      ctx,
      jobs3.map((job) => ({ job, outcome: note(job.id) })),
    );
    assert.deepEqual(
      saved.map((r) => r.status === 'fulfilled' && r.value),
      ['done', 'done', 'done'],
    );
    assert.equal(new Set(await xmins(jobs3.map((j) => j.id))).size, 1, 'one transaction wrote the three');
    for (const job of jobs3) assert.equal((await getJob(ctx, job.id))!.lastError, `noted ${job.id}`);

    const [a, b, c] = await claimAll(3);
    const results = await finishJobsTogether(ctx, [
      { job: a!, outcome: note(a!.id) },
      { job: b!, outcome: ok((tx) => rawRun(tx, 'SELECT 1 / 0')) },
      { job: c!, outcome: note(c!.id) },
    ]);
    assert.equal(results[0]!.status, 'fulfilled');
    assert.match(String((results[1] as PromiseRejectedResult).reason), /division by zero/);
    assert.equal(results[2]!.status, 'fulfilled');
    assert.equal((await getJob(ctx, a!.id))!.status, 'done');
    assert.equal((await getJob(ctx, b!.id))!.status, 'running', 'the failed outcome left its job to its lease');
    assert.equal((await getJob(ctx, c!.id))!.lastError, `noted ${c!.id}`);
    assert.equal(new Set(await xmins([a!.id, c!.id])).size, 2, 'recorded alone, each in its own transaction');

    // Outcomes naming a lock in common (two copies of one message): the later one is recorded
    // after the others, in a transaction of its own.
    const [d, e, f] = await claimAll(3);
    const keyed = (id: string, keys: string[]) => ({ ...note(id), keys });
    const apart = await finishJobsTogether(ctx, [
      { job: d!, outcome: keyed(d!.id, ['inbound:box:<m1>']) },
      { job: e!, outcome: keyed(e!.id, ['inbound:box:<m2>']) },
      { job: f!, outcome: keyed(f!.id, ['inbound:box:<m1>']) },
    ]);
    assert.ok(apart.every((r) => r.status === 'fulfilled'));
    const [xd, xe, xf] = await Promise.all([d!, e!, f!].map(async (j) => (await xmins([j.id]))[0]));
    assert.equal(xd, xe, 'the outcomes without a key in common together');
    assert.notEqual(xf, xd, 'the one sharing a key alone');
  } finally {
    await closeContext(ctx);
  }
});

onEngine('postgres').test('a claim writes alike jobs in one statement, and outcomes that come out alike are recorded in one', async () => {
  const ctx = await context();
  try {
    for (let i = 0; i < 3; i++) await enqueue(ctx, { i });
    for (let i = 0; i < 2; i++) await enqueue(ctx, { i }, { kind: 'other' });
    // cmin: the command of its transaction that wrote a row's version. One statement, one cmin.
    const written = async (ids: string[]) =>
      new Map(
        (await rawRows<[string, string, string]>(ctx.db, 'SELECT id, xmin::text, cmin::text FROM jobs WHERE id IN (SELECT value FROM json_each(?))', [JSON.stringify(ids)])).map(([id, x, c]) => [
          id,
          `${x}/${c}`,
        ]),
      );
    const claimed = await claimDue(ctx, 10, (kind) => (kind === 'test' ? [60_000] : [120_000]));
    assert.equal(claimed.length, 5);
    const byKind = (kind: string) => claimed.filter((j) => j.kind === kind).map((j) => j.id);
    const claims = await written(claimed.map((j) => j.id));
    assert.equal(new Set(byKind('test').map((id) => claims.get(id))).size, 1, "the kind's three in one statement");
    assert.equal(new Set(byKind('other').map((id) => claims.get(id))).size, 1, "the other kind's two in one");
    assert.equal(new Set(claims.values()).size, 2, 'a statement per retry time');

    const [a, b, c, d, e] = claimed;
    await finishJobsTogether(
      ctx,
      [a!, b!, c!].map((job) => ({ job, outcome: ok() })),
    );
    const alike = await written([a!.id, b!.id, c!.id]);
    assert.equal(new Set(alike.values()).size, 1, 'three outcomes alike: one statement');
    for (const job of [a!, b!, c!]) assert.equal((await getJob(ctx, job.id))!.status, 'done');

    await finishJobsTogether(ctx, [
      { job: d!, outcome: ok() },
      { job: e!, outcome: retry('try again', undefined, 1000) },
    ]);
    const unlike = await written([d!.id, e!.id]);
    assert.equal(new Set([...unlike.values()].map((v) => v.split('/')[0])).size, 1, 'one transaction');
    assert.equal(new Set(unlike.values()).size, 2, 'outcomes unlike: a statement each');
    assert.equal((await getJob(ctx, d!.id))!.status, 'done');
    assert.equal((await getJob(ctx, e!.id))!.status, 'queued');
    assert.equal((await getJob(ctx, e!.id))!.lastError, 'try again');
  } finally {
    await closeContext(ctx);
  }
});

test('a job left running by a dead process is recovered at start and runs again', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-jobs-'));
  const cfg = configFrom({ data_dir: dir });
  const crashed = await createContext(cfg, silentLogger);
  const id = await enqueue(crashed, { n: 1 });
  await claimDue(crashed, 1, () => [3_600_000]); // claimed, then the process "dies"
  await closeContext(crashed);

  const ctx = await createContext(cfg, silentLogger);
  const attempts: number[] = [];
  const runner = createJobRunner(ctx, [{ kind: 'test', schedule: () => [3_600_000], run: async (_c, job) => (attempts.push(job.attempts), ok()) }]);
  await runner.start();
  try {
    await until(async () => (await getJob(ctx, id))!.status === 'done');
    assert.deepEqual(attempts, [2], 'the interrupted attempt counted; the retry ran at once, not an hour later');
    assert.equal(await recoverJobs(ctx), 0);
  } finally {
    await runner.stop(1000);
    await closeContext(ctx);
  }
});

test('concurrency per partition is bounded', async () => {
  const ctx = await context();
  let active = 0;
  let peak = 0;
  const perPartition = new Map<string, number>();
  let peakPerPartition = 0;
  const handler: JobHandler = {
    kind: 'test',
    schedule: () => [10],
    partitionLimit: () => 2,
    async run(_c, job) {
      active++;
      peak = Math.max(peak, active);
      perPartition.set(job.partition, (perPartition.get(job.partition) ?? 0) + 1);
      peakPerPartition = Math.max(peakPerPartition, perPartition.get(job.partition)!);
      await new Promise((r) => setTimeout(r, 20));
      perPartition.set(job.partition, perPartition.get(job.partition)! - 1);
      active--;
      return ok();
    },
  };
  const runner = createJobRunner(ctx, [handler]);
  await runner.start();
  try {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await enqueue(ctx, { i }, { partition: i % 2 ? 'a.example' : 'b.example' }));
    await until(async () => (await Promise.all(ids.map((id) => getJob(ctx, id)))).every((job) => job!.status === 'done'));
    assert.equal(peakPerPartition, 2);
    assert.ok(peak <= 4 && peak >= 3, `peak ${peak}`);
  } finally {
    await runner.stop(1000);
    await closeContext(ctx);
  }
});

test('a backlog of one kind held to one slot does not hide another kind queued after it', async () => {
  const ctx = await context();
  const order: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const slow: JobHandler = {
    kind: 'backlog',
    schedule: () => [10],
    partitionLimit: () => 1,
    async run(_c, job) {
      order.push(job.id);
      await gate;
      return ok();
    },
  };
  const quick: JobHandler = { kind: 'quick', schedule: () => [10], run: async (_c, job) => (order.push(job.id), ok()) };
  const runner = createJobRunner(ctx, [slow, quick]);
  try {
    // 200 due jobs of one partition, more than any claim window, then one of another kind.
    const backlog: string[] = [];
    for (let i = 0; i < 200; i++) backlog.push(await enqueue(ctx, { i }, { kind: 'backlog', partition: 'spool' }));
    const late = await enqueue(ctx, {}, { kind: 'quick' });
    await runner.start();
    await until(async () => (await getJob(ctx, late))!.status === 'done');
    assert.equal(order.filter((id) => backlog.includes(id)).length, 1, 'the backlog holds its one slot');
    assert.ok(order.includes(late));
  } finally {
    release();
    await runner.stop(1000);
    await closeContext(ctx);
  }
});

test('a backlog of one kind that holds every slot leaves the next free one to another kind due after it', async () => {
  const ctx = await context({ jobs: { concurrency: 2 } });
  const order: string[] = [];
  const releases = new Map<string, () => void>();
  const slow: JobHandler = {
    kind: 'backlog',
    schedule: () => [60_000],
    run: (_c, job) =>
      new Promise((resolve) => {
        order.push(job.id);
        releases.set(job.id, () => resolve(ok()));
      }),
  };
  const quick: JobHandler = { kind: 'quick', schedule: () => [60_000], run: async (_c, job) => (order.push(job.id), ok()) };
  const runner = createJobRunner(ctx, [slow, quick]);
  try {
    const backlog: string[] = [];
    for (let i = 0; i < 10; i++) backlog.push(await enqueue(ctx, { i }, { kind: 'backlog' }));
    await runner.start();
    await until(() => order.length === 2);
    const late = await enqueue(ctx, {}, { kind: 'quick' });
    // One slot frees: in plain run_at order the backlog's next job would take it.
    releases.get(order[0])!();
    await until(async () => (await getJob(ctx, late))!.status === 'done');
    assert.deepEqual(order.slice(0, 3), [backlog[0], backlog[1], late]);
  } finally {
    for (const release of releases.values()) release();
    await runner.stop(1000);
    await closeContext(ctx);
  }
});

// The embedded database has one node: a job can be claimed by the transaction that enqueues it.
onEngine('sqlite').test(
  'a job enqueued here is claimed in its transaction and started after the commit; past jobs.concurrency waiting, the rest are queued again unclaimed; a stop gives back what has not started',
  async () => {
    const ctx = await context({ jobs: { concurrency: 3 } });
    const started: JobRow[] = [];
    const releases: Array<() => void> = [];
    const handler: JobHandler = {
      kind: 'test',
      schedule: () => [60_000],
      partitionLimit: () => 1,
      run: (_c, job) =>
        new Promise((resolve) => {
          started.push(job);
          releases.push(() => resolve(ok()));
        }),
    };
    const runner = createJobRunner(ctx, [handler]);
    await runner.start();
    let stopped = false;
    try {
      const rows = async () => (await rawRows<[string, string, number]>(ctx.db, 'SELECT id, status, attempts FROM jobs ORDER BY id')).map(([id, status, attempts]) => ({ id, status, attempts }));
      // Eight jobs of one partition in one transaction: the first runs, three wait here (the
      // runner's concurrency), four go back to the queue with their attempt uncounted.
      const ids = await ctx.store.transaction(async () => {
        const out: string[] = [];
        for (let i = 0; i < 8; i++) out.push(await enqueueJobHere(ctx, { kind: 'test', payload: { i }, partition: 'p', maxAttempts: 2 }));
        assert.deepEqual(
          (await rows()).map((r) => [r.status, r.attempts]),
          Array(8).fill(['running', 1]),
          'claimed as they are written',
        );
        return out;
      });
      await until(async () => started.length === 1 && (await rows()).filter((r) => r.status === 'queued').length === 4);
      assert.equal(started[0].id, ids[0]);
      assert.equal(started[0].attempts, 1);
      const queued = (await rows()).filter((r) => r.status === 'queued');
      assert.deepEqual(
        queued.map((r) => [r.id, r.attempts]),
        ids.slice(4).map((id) => [id, 0]),
      );
      // The partition allows one at a time: the next starts as the running one ends.
      releases.shift()!();
      await until(() => started.length === 2);
      assert.equal(started[1].id, ids[1]);
      await runner.stop(100);
      stopped = true;
      const after = await rows();
      assert.deepEqual(
        after.filter((r) => ids.slice(2, 4).includes(r.id)).map((r) => [r.status, r.attempts]),
        [
          ['queued', 0],
          ['queued', 0],
        ],
        'the two still waiting are queued again, their attempt uncounted',
      );
      assert.equal(after.find((r) => r.id === ids[1])!.status, 'running', 'the one under way keeps its lease');
    } finally {
      for (const release of releases) release();
      if (!stopped) await runner.stop(1000);
      await closeContext(ctx);
    }
  },
);

test('finished jobs are swept after the retention period, unfinished ones never', async () => {
  const ctx = await context({ jobs: { retention: '1h' } });
  try {
    const old = await enqueue(ctx, {});
    const pending = await enqueue(ctx, {});
    await sqlDb(ctx)
      .update(jobs)
      .set({ status: 'done', finishedAt: new Date(Date.now() - 2 * 3_600_000).toISOString() })
      .where(eq(jobs.id, old))
      .run();
    await sqlDb(ctx)
      .update(jobs)
      .set({ createdAt: new Date(Date.now() - 10 * 3_600_000).toISOString() })
      .where(eq(jobs.id, pending))
      .run();
    assert.equal(await sweepJobs(ctx), 1);
    assert.equal(await getJob(ctx, old), undefined);
    assert.ok(await getJob(ctx, pending));
  } finally {
    await closeContext(ctx);
  }
});

test('a claim walks at most 16 partitions past a full one; the next claim goes on from where it stopped', async () => {
  const ctx = await context();
  try {
    const now = Date.now();
    const add = (partition: string, runAt: number) => ctx.store.transaction((tx) => enqueueJob(tx, new Date(), { kind: 'walk', payload: {}, partition, maxAttempts: 3, runAt }));
    // A full partition's backlog fills the read (twice the 5 free slots, at least 16 jobs)...
    for (let i = 0; i < 40; i++) await add('full', now - 10_000);
    // ...20 partitions sort before the due ones, with nothing due yet...
    for (let i = 0; i < 20; i++) await add(`a${String(i).padStart(2, '0')}`, now + 3_600_000);
    const due = [await add('z0', now - 1_000), await add('z1', now - 1_000)];
    const claim = () =>
      claimDue(
        ctx,
        5,
        () => [60_000],
        (job) => job.partition !== 'full',
        undefined,
        ['walk'],
      );
    // ...so the first claim looks at 16 of them and takes nothing,
    assert.deepEqual(await claim(), []);
    // and the next one goes on after the 16th: the rest, the full one, then the due ones.
    assert.deepEqual((await claim()).map((j) => j.id).sort(), due.sort());
  } finally {
    await closeContext(ctx);
  }
});
