// The durable job table: enqueue, claim, finish, recover, sweep. One mechanism for every
// retried task (outbound sends, webhook deliveries).
//
// Claiming a due job, in one transaction, increments `attempts`, marks it running under a
// lease and already moves `run_at` to the next retry time from the kind's schedule (mox's
// queue). A worker that dies mid-attempt therefore leaves a job that is retried when its
// lease expires (or at once after a restart), never lost and never retried in a tight loop.
import { and, asc, eq, gt, inArray, lte, or, sql, type Placeholder, type SQL } from 'drizzle-orm';
import type { AppContext } from '../context.ts';
import type { Db, Tx } from '../db/client.ts';
import { preparedQuery } from '../db/prepared.ts';
import { jobs } from '../db/schema.ts';
import { newId } from '../ids.ts';
import { changes, rawRows, rawRun } from '../store/store.ts';

export type JobRow = typeof jobs.$inferSelect;
export type JobStatus = 'queued' | 'running' | 'done' | 'failed';

/**
 * What a handler reports. `commit`, when given, runs in the same transaction that records the
 * outcome, so a state change and the job's end are saved together.
 */
export type JobOutcome =
  | { kind: 'ok'; commit?: Commit }
  | { kind: 'retry'; reason: string; delayMs?: number; commit?: Commit }
  | { kind: 'fail'; reason: string; commit?: Commit };
/** Writes that commit together with a job's outcome (`tx` is the outcome's transaction). */
export type Commit = (tx: Tx) => Promise<unknown>;

export const ok = (commit?: Commit): JobOutcome => ({ kind: 'ok', commit });
export const retry = (reason: string, commit?: Commit, delayMs?: number): JobOutcome => ({ kind: 'retry', reason, commit, delayMs });
export const fail = (reason: string, commit?: Commit): JobOutcome => ({ kind: 'fail', reason, commit });

export interface EnqueueInput {
  kind: string;
  payload: unknown;
  /** Concurrency partition (e.g. recipient domain); '' for none. */
  partition?: string;
  /** Total attempts allowed: the retry schedule's length + 1. */
  maxAttempts: number;
  /** Epoch ms when first due; now by default. */
  runAt?: number;
}

/**
 * Adds a job inside the caller's transaction: call it from the transaction's callback, with the
 * database handle (the prepared statement runs on its one connection, so in that transaction).
 * After the transaction commits, call `ctx.notify('jobs')` so the runner starts it without
 * waiting for a timer.
 */
export async function enqueueJob(db: Db, now: Date, input: EnqueueInput): Promise<string> {
  const id = newId('job', now.getTime());
  const iso = now.toISOString();
  await preparedQuery(db, insertJob).run({
    id,
    kind: input.kind,
    payload: JSON.stringify(input.payload),
    partition: input.partition ?? '',
    maxAttempts: input.maxAttempts,
    runAt: input.runAt ?? now.getTime(),
    createdAt: iso,
  });
  return id;
}

// One per spooled message, send and webhook delivery: prepared once (src/db/prepared.ts;
// drizzle built this insert anew per call, a sixth of the SMTP spool path's CPU in bench/).
const insertJob = (db: Db) =>
  db
    .insert(jobs)
    .values({
      id: sql.placeholder('id'),
      kind: sql.placeholder('kind'),
      payload: sql.placeholder('payload'),
      partition: sql.placeholder('partition'),
      maxAttempts: sql.placeholder('maxAttempts'),
      runAt: sql.placeholder('runAt'),
      createdAt: sql.placeholder('createdAt'),
      updatedAt: sql.placeholder('createdAt'),
    })
    .prepare();

// The runner looks for work after every finished job and every enqueue, so the queries are
// prepared once (src/db/prepared.ts) and each reads the index (status, run_at) in order from its
// start: a look costs the same with 3 or 3,000 jobs waiting. (One query with `queued OR lease
// expired` made SQLite collect and sort every due row per claim: bench/, the largest cost of a
// claim.) Candidates carry only what choosing needs; the payload comes back from the claim's
// UPDATE … RETURNING for the jobs actually taken.
const candidates = (db: Db, where: SQL | undefined) =>
  db
    .select({ id: jobs.id, kind: jobs.kind, partition: jobs.partition, attempts: jobs.attempts, runAt: jobs.runAt })
    .from(jobs)
    .where(where)
    .orderBy(asc(jobs.runAt))
    .limit(sql.placeholder('limit'))
    .prepare();
const due = (now: Placeholder) => and(eq(jobs.status, 'queued'), lte(jobs.runAt, now));
/** A running job whose worker vanished (its lease ran out); only ever a few rows are `running`. */
const leaseOver = (now: Placeholder) => and(eq(jobs.status, 'running'), lte(jobs.leaseUntil, now));
const dueQueued = (db: Db) => candidates(db, due(sql.placeholder('now')));
const dueQueuedOfKind = (db: Db) => candidates(db, and(eq(jobs.kind, sql.placeholder('kind')), due(sql.placeholder('now'))));
const leaseExpired = (db: Db) => candidates(db, leaseOver(sql.placeholder('now')));

/** Claims one job if it is still as it was read (another process, the CLI, may have changed it). */
const claimOne = (db: Db) =>
  db
    .update(jobs)
    .set({
      status: 'running',
      attempts: sql`${jobs.attempts} + 1`,
      leaseUntil: sql`${sql.placeholder('leaseUntil')}`,
      runAt: sql`${sql.placeholder('runAt')}`,
      updatedAt: sql`${sql.placeholder('updatedAt')}`,
    })
    .where(and(eq(jobs.id, sql.placeholder('id')), eq(jobs.attempts, sql.placeholder('attempts')), or(due(sql.placeholder('now')), leaseOver(sql.placeholder('now')))))
    .returning()
    .prepare();

/** What the runner is told about a due job before it is claimed. */
export type JobCandidate = Pick<JobRow, 'id' | 'kind' | 'partition' | 'attempts' | 'runAt'>;

/**
 * Claims up to `limit` due jobs, oldest first. `accept` lets the runner skip jobs whose
 * partition is at its concurrency limit; `scheduleOf` gives each kind's retry delays; `kinds`,
 * when given, has each kind's due jobs read separately (the runner passes its handlers').
 *
 * The due jobs are read first; when none is accepted nothing is written (the runner looks after
 * every enqueue, mostly while the partition is full). The chosen ones are claimed in one
 * transaction shared with the other writers of the moment (Store.grouped), and the promise
 * resolves once that is on disk. That fsync also covers the commits that enqueued the jobs, so
 * no job runs before the request that queued it is durable. `claimed` runs in the claim's
 * transaction for each job taken (a send marks its recipients `sending` there) and must not
 * throw. A chosen job that changed meanwhile is left out of the result. Throws when the read
 * fails; rejects when the commit does.
 *
 * Several nodes (PostgreSQL): claims take turns (one advisory lock), the chosen rows are locked
 * FOR UPDATE SKIP LOCKED (a row another transaction holds is left for the next pass), and
 * `partitionLimit` is checked against the jobs every node is running, so N nodes keep one
 * recipient domain to its limit, not N times it.
 */
export async function claimDue(
  ctx: AppContext,
  limit: number,
  scheduleOf: (kind: string) => number[],
  accept: (job: JobCandidate) => boolean = () => true,
  claimed?: (tx: Tx, job: JobRow) => Promise<void>,
  kinds?: string[],
  partitionLimit?: (kind: string) => number | undefined,
): Promise<JobRow[]> {
  const window = { now: ctx.clock.now().getTime(), limit: Math.max(limit * 2, 16) };
  const expired = await preparedQuery(ctx.db, leaseExpired).all(window);
  // With `kinds`, a window of due jobs per kind: thousands of spooled messages waiting for their
  // one processing slot must not fill the window and starve webhook deliveries and sends.
  const queued = kinds
    ? (await Promise.all(kinds.map((kind) => preparedQuery(ctx.db, dueQueuedOfKind).all({ ...window, kind })))).flat()
    : await preparedQuery(ctx.db, dueQueued).all(window);
  const chosen: JobCandidate[] = [];
  for (const job of expired.length || kinds ? [...expired, ...queued].sort((a, b) => a.runAt - b.runAt) : queued) {
    if (chosen.length >= limit) break;
    if (accept(job)) chosen.push(job);
  }
  if (!chosen.length) return [];
  return ctx.store.grouped(async (tx) => {
    const now = ctx.clock.now();
    const nowMs = now.getTime();
    const taken: JobRow[] = [];
    const claimable = ctx.store.dialect === 'postgres' ? await acrossNodes(ctx, tx, chosen, nowMs, partitionLimit) : chosen;
    for (const job of claimable) {
      const schedule = scheduleOf(job.kind);
      const attempts = job.attempts + 1;
      const nextDelay = schedule.length ? schedule[Math.min(attempts - 1, schedule.length - 1)] : 60_000;
      const row = await preparedQuery(tx, claimOne).get({
        id: job.id,
        attempts: job.attempts,
        now: nowMs,
        leaseUntil: nowMs + ctx.config.jobs.lease,
        runAt: nowMs + nextDelay,
        updatedAt: now.toISOString(),
      });
      if (!row) continue;
      await claimed?.(tx, row);
      taken.push(row);
    }
    return taken;
  });
}

/** On a shared database: the chosen jobs no other transaction holds, within every partition's limit across nodes. */
async function acrossNodes(ctx: AppContext, tx: Tx, chosen: JobCandidate[], nowMs: number, partitionLimit?: (kind: string) => number | undefined): Promise<JobCandidate[]> {
  await ctx.store.lock(tx, 'jobs:claim');
  const ids = JSON.stringify(chosen.map((j) => j.id));
  const free = new Set((await rawRows<[string]>(tx, 'SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?)) FOR UPDATE SKIP LOCKED', [ids])).map(([id]) => id));
  const limited = chosen.filter((j) => free.has(j.id) && j.partition && partitionLimit?.(j.kind) !== undefined);
  if (!limited.length) return chosen.filter((j) => free.has(j.id));
  const key = (kind: string, partition: string) => `${kind}\u0000${partition}`;
  const running = new Map<string, number>();
  const rows = await rawRows<[string, string, number]>(
    tx,
    "SELECT kind, partition, count(*) FROM jobs WHERE status = 'running' AND lease_until > ? AND partition IN (SELECT value FROM json_each(?)) GROUP BY kind, partition",
    [nowMs, JSON.stringify([...new Set(limited.map((j) => j.partition))])],
  );
  for (const [kind, partition, n] of rows) running.set(key(kind, partition), n);
  return chosen.filter((j) => {
    if (!free.has(j.id)) return false;
    const limit = j.partition ? partitionLimit?.(j.kind) : undefined;
    if (limit === undefined) return true;
    const k = key(j.kind, j.partition);
    const n = running.get(k) ?? 0;
    if (n >= limit) return false;
    running.set(k, n + 1);
    return true;
  });
}

/** Moves the lease of jobs this process is still running forward (the runner, every third of a lease). */
export async function renewLeases(ctx: AppContext, ids: string[]): Promise<number> {
  if (!ids.length) return 0;
  const now = ctx.clock.now().getTime();
  return rawRun(ctx.db, "UPDATE jobs SET lease_until = ? WHERE status = 'running' AND id IN (SELECT value FROM json_each(?))", [now + ctx.config.jobs.lease, JSON.stringify(ids)]);
}

/**
 * Records a handler's outcome (and its `commit`) in one transaction, shared with the other
 * jobs finishing at this moment (src/db/group-commit.ts: one WAL fsync, off the event loop);
 * resolves once it is on disk.
 */
export function finishJob(ctx: AppContext, job: JobRow, outcome: JobOutcome): Promise<JobStatus> {
  const now = ctx.clock.now();
  return ctx.store.grouped(async (tx) => {
    let status: JobStatus;
    // null keeps the column as it is (lastError of an earlier attempt, the claim's runAt).
    let lastError: string | null = null;
    let runAt: number | null = null;
    if (outcome.kind === 'ok') {
      status = 'done';
    } else if (outcome.kind === 'retry' && job.attempts < job.maxAttempts) {
      status = 'queued';
      lastError = outcome.reason;
      if (outcome.delayMs !== undefined) runAt = now.getTime() + outcome.delayMs;
    } else {
      status = 'failed';
      lastError = outcome.reason;
    }
    const iso = now.toISOString();
    // The job's row first, then what the outcome writes (a send's message and the inbox counts
    // its status moves): a claim locks job rows before it writes such rows, so the two never
    // wait for each other in opposite orders. On PostgreSQL they did: a claim on another node
    // that had locked this row (a candidate taken meanwhile) waited on the counts this finish
    // held, the deadlock ended one of them, and a lost finish ran the attempt (a delivery) again.
    await preparedQuery(tx, finishOne).run({ id: job.id, status, lastError, runAt, finishedAt: status === 'queued' ? null : iso, updatedAt: iso });
    await outcome.commit?.(tx);
    return status;
  });
}

const finishOne = (db: Db) =>
  db
    .update(jobs)
    .set({
      status: sql`${sql.placeholder('status')}`,
      leaseUntil: null,
      lastError: sql`coalesce(${sql.placeholder('lastError')}, ${jobs.lastError})`,
      runAt: sql`coalesce(${sql.placeholder('runAt')}, ${jobs.runAt})`,
      finishedAt: sql`coalesce(${sql.placeholder('finishedAt')}, ${jobs.finishedAt})`,
      updatedAt: sql`${sql.placeholder('updatedAt')}`,
    })
    .where(eq(jobs.id, sql.placeholder('id')))
    .prepare();

/**
 * At start: a job left `running` belonged to a process that is gone. It is made due at once
 * (the attempt it was on already counts), so a crash delays work by a restart, not a lease.
 */
export async function recoverJobs(ctx: AppContext): Promise<number> {
  const now = ctx.clock.now();
  const r = await ctx.db
    .update(jobs)
    .set({ status: 'queued', leaseUntil: null, runAt: sql`CASE WHEN ${jobs.runAt} < ${now.getTime()} THEN ${jobs.runAt} ELSE ${now.getTime()} END`, updatedAt: now.toISOString() })
    .where(eq(jobs.status, 'running'))
    .run();
  return changes(r);
}

/** Deletes finished jobs older than `jobs.retention` (not those holding spooled mail). */
export async function sweepJobs(ctx: AppContext): Promise<number> {
  const cutoff = new Date(ctx.clock.now().getTime() - ctx.config.jobs.retention).toISOString();
  const r = await ctx.db
    .delete(jobs)
    // A failed job whose message bytes are still spooled (src/domain/spool.ts) is kept: those
    // bytes are mail answered 250, waiting for `mailroom queue --retry`.
    .where(and(inArray(jobs.status, ['done', 'failed']), lte(jobs.finishedAt, cutoff), sql`NOT EXISTS (SELECT 1 FROM spooled_messages WHERE job_id = ${jobs.id})`))
    .run();
  return changes(r);
}

// Both are answered from the start of an index (status, run_at), or from the few running rows.
const nextQueued = (db: Db) =>
  db
    .select({ at: sql<number | null>`min(${jobs.runAt})` })
    .from(jobs)
    .where(and(eq(jobs.status, 'queued'), gt(jobs.runAt, sql.placeholder('after'))))
    .prepare();
const nextLeaseEnd = (db: Db) =>
  db
    .select({ at: sql<number | null>`min(${jobs.leaseUntil})` })
    .from(jobs)
    .where(and(eq(jobs.status, 'running'), gt(jobs.leaseUntil, sql.placeholder('after'))))
    .prepare();

/**
 * Epoch ms of the next time a job becomes claimable after `afterMs`, or undefined when none
 * will. Jobs already due at `afterMs` are not counted: the runner's last claim saw them, and
 * the ones it left were in partitions at their limit, which a finishing job wakes it for.
 */
export async function nextDueAt(ctx: AppContext, afterMs: number): Promise<number | undefined> {
  const times = [(await preparedQuery(ctx.db, nextQueued).get({ after: afterMs }))?.at, (await preparedQuery(ctx.db, nextLeaseEnd).get({ after: afterMs }))?.at].filter(
    (t): t is number => typeof t === 'number',
  );
  return times.length ? Math.min(...times) : undefined;
}

export function listJobs(ctx: AppContext, statuses: JobStatus[], limit = 200): Promise<JobRow[]> {
  return ctx.db.select().from(jobs).where(inArray(jobs.status, statuses)).orderBy(asc(jobs.runAt)).limit(limit).all();
}

export function getJob(ctx: AppContext, id: string): Promise<JobRow | undefined> {
  return ctx.db.select().from(jobs).where(eq(jobs.id, id)).get();
}
