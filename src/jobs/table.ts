// The durable job table: enqueue, claim, finish, recover, sweep. One mechanism for every
// retried task (outbound sends, webhook deliveries).
//
// Claiming a due job, in one transaction, increments `attempts`, marks it running under a
// lease and already moves `run_at` to the next retry time from the kind's schedule (mox's
// queue). A worker that dies mid-attempt therefore leaves a job that is retried when its
// lease expires (or at once after a restart), never lost and never retried in a tight loop.
import { and, asc, eq, inArray, lte, or, sql } from 'drizzle-orm';
import type { AppContext } from '../context.ts';
import type { Tx } from '../db/client.ts';
import { commitGrouped } from '../db/group-commit.ts';
import { jobs } from '../db/schema.ts';
import { newId } from '../ids.ts';

export type JobRow = typeof jobs.$inferSelect;
export type JobStatus = 'queued' | 'running' | 'done' | 'failed';

/**
 * What a handler reports. `commit`, when given, runs in the same transaction that records the
 * outcome, so a state change and the job's end are saved together.
 */
export type JobOutcome =
  | { kind: 'ok'; commit?: (tx: Tx) => void }
  | { kind: 'retry'; reason: string; delayMs?: number; commit?: (tx: Tx) => void }
  | { kind: 'fail'; reason: string; commit?: (tx: Tx) => void };

export const ok = (commit?: (tx: Tx) => void): JobOutcome => ({ kind: 'ok', commit });
export const retry = (reason: string, commit?: (tx: Tx) => void, delayMs?: number): JobOutcome => ({ kind: 'retry', reason, commit, delayMs });
export const fail = (reason: string, commit?: (tx: Tx) => void): JobOutcome => ({ kind: 'fail', reason, commit });

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
 * Adds a job inside the caller's transaction. After the transaction commits, call
 * `ctx.notify('jobs')` so the runner starts it without waiting for a timer.
 */
export function enqueueJob(tx: Tx, now: Date, input: EnqueueInput): string {
  const id = newId('job', now.getTime());
  const iso = now.toISOString();
  tx.insert(jobs)
    .values({
      id,
      kind: input.kind,
      payload: JSON.stringify(input.payload),
      partition: input.partition ?? '',
      maxAttempts: input.maxAttempts,
      runAt: input.runAt ?? now.getTime(),
      createdAt: iso,
      updatedAt: iso,
    })
    .run();
  return id;
}

const claimable = (nowMs: number) =>
  or(and(eq(jobs.status, 'queued'), lte(jobs.runAt, nowMs)), and(eq(jobs.status, 'running'), lte(jobs.leaseUntil, nowMs)));

/**
 * Claims up to `limit` due jobs. `accept` lets the runner skip jobs whose partition is at its
 * concurrency limit; `scheduleOf` gives each kind's retry delays.
 */
export function claimDue(
  ctx: AppContext,
  limit: number,
  scheduleOf: (kind: string) => number[],
  accept: (job: JobRow) => boolean = () => true,
): JobRow[] {
  const now = ctx.clock.now();
  const nowMs = now.getTime();
  return ctx.db.transaction((tx) => {
    const candidates = tx
      .select()
      .from(jobs)
      .where(claimable(nowMs))
      .orderBy(asc(jobs.runAt))
      .limit(Math.max(limit * 4, 32))
      .all();
    const claimed: JobRow[] = [];
    for (const job of candidates) {
      if (claimed.length >= limit) break;
      if (!accept(job)) continue;
      const schedule = scheduleOf(job.kind);
      const attempts = job.attempts + 1;
      const nextDelay = schedule.length ? schedule[Math.min(attempts - 1, schedule.length - 1)] : 60_000;
      const values = {
        status: 'running',
        attempts,
        leaseUntil: nowMs + ctx.config.jobs.lease,
        runAt: nowMs + nextDelay,
        updatedAt: now.toISOString(),
      };
      tx.update(jobs).set(values).where(eq(jobs.id, job.id)).run();
      claimed.push({ ...job, ...values });
    }
    return claimed;
  });
}

/**
 * Records a handler's outcome (and its `commit`) in one transaction, shared with the other
 * jobs finishing at this moment (src/db/group-commit.ts: one WAL fsync, off the event loop);
 * resolves once it is on disk.
 */
export function finishJob(ctx: AppContext, job: JobRow, outcome: JobOutcome): Promise<JobStatus> {
  const now = ctx.clock.now();
  return commitGrouped(ctx.db, (tx) => {
    outcome.commit?.(tx);
    let status: JobStatus;
    const values: Partial<JobRow> = { leaseUntil: null, updatedAt: now.toISOString() };
    if (outcome.kind === 'ok') {
      status = 'done';
    } else if (outcome.kind === 'retry' && job.attempts < job.maxAttempts) {
      status = 'queued';
      values.lastError = outcome.reason;
      if (outcome.delayMs !== undefined) values.runAt = now.getTime() + outcome.delayMs;
    } else {
      status = 'failed';
      values.lastError = outcome.reason;
    }
    values.status = status;
    if (status !== 'queued') values.finishedAt = now.toISOString();
    tx.update(jobs).set(values).where(eq(jobs.id, job.id)).run();
    return status;
  });
}

/**
 * At start: a job left `running` belonged to a process that is gone. It is made due at once
 * (the attempt it was on already counts), so a crash delays work by a restart, not a lease.
 */
export function recoverJobs(ctx: AppContext): number {
  const now = ctx.clock.now();
  return ctx.db
    .update(jobs)
    .set({ status: 'queued', leaseUntil: null, runAt: sql`min(${jobs.runAt}, ${now.getTime()})`, updatedAt: now.toISOString() })
    .where(eq(jobs.status, 'running'))
    .run().changes;
}

/** Deletes finished jobs older than `jobs.retention`. */
export function sweepJobs(ctx: AppContext): number {
  const cutoff = new Date(ctx.clock.now().getTime() - ctx.config.jobs.retention).toISOString();
  return ctx.db
    .delete(jobs)
    .where(and(inArray(jobs.status, ['done', 'failed']), lte(jobs.finishedAt, cutoff)))
    .run().changes;
}

/** Epoch ms of the next time a job becomes claimable, or undefined when none will. */
export function nextDueAt(ctx: AppContext): number | undefined {
  const row = ctx.db
    .select({
      queued: sql<number | null>`min(case when ${jobs.status} = 'queued' then ${jobs.runAt} end)`,
      leased: sql<number | null>`min(case when ${jobs.status} = 'running' then ${jobs.leaseUntil} end)`,
    })
    .from(jobs)
    .where(inArray(jobs.status, ['queued', 'running']))
    .get();
  const times = [row?.queued, row?.leased].filter((t): t is number => typeof t === 'number');
  return times.length ? Math.min(...times) : undefined;
}

export function listJobs(ctx: AppContext, statuses: JobStatus[], limit = 200): JobRow[] {
  return ctx.db.select().from(jobs).where(inArray(jobs.status, statuses)).orderBy(asc(jobs.runAt)).limit(limit).all();
}

export function getJob(ctx: AppContext, id: string): JobRow | undefined {
  return ctx.db.select().from(jobs).where(eq(jobs.id, id)).get();
}
