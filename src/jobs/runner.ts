// The job runner: claims due jobs and runs their handlers with bounded concurrency (overall,
// and per partition such as a recipient domain). It wakes at once when work is enqueued
// (ctx.notify('jobs')) and otherwise sleeps until the next job is due.
import type { AppContext } from '../context.ts';
import { errorFields } from '../log.ts';
import type { Service } from '../main.ts';
import { claimDue, finishJob, nextDueAt, recoverJobs, sweepJobs, type JobOutcome, type JobRow } from './table.ts';

export interface JobHandler {
  kind: string;
  /** Delays between attempts (ms); attempts allowed = schedule length + 1. */
  schedule(ctx: AppContext): number[];
  /** Most jobs of this kind running at once in one partition (default: no partition limit). */
  partitionLimit?(ctx: AppContext): number;
  /** Runs one attempt. Should not throw; a throw counts as a retry with the error as reason. */
  run(ctx: AppContext, job: JobRow): Promise<JobOutcome>;
}

const MAX_SLEEP_MS = 30_000;
const SWEEP_EVERY_MS = 3_600_000;

export interface JobRunner extends Service {
  /** Resolves when no job is running (tests, shutdown). */
  idle(): Promise<void>;
  /** Runs a claim pass now. */
  wake(): void;
}

export function createJobRunner(ctx: AppContext, handlers: JobHandler[]): JobRunner {
  const byKind = new Map(handlers.map((h) => [h.kind, h]));
  const inflight = new Set<Promise<void>>();
  const perPartition = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let sweepTimer: NodeJS.Timeout | undefined;
  let stopped = true;
  let scheduled = false;

  const scheduleOf = (kind: string) => byKind.get(kind)?.schedule(ctx) ?? [];
  const partitionKey = (job: JobRow) => `${job.kind}\u0000${job.partition}`;

  const accept = (job: JobRow) => {
    const h = byKind.get(job.kind);
    if (!h) return false;
    if (!job.partition || !h.partitionLimit) return true;
    return (perPartition.get(partitionKey(job)) ?? 0) < h.partitionLimit(ctx);
  };

  async function execute(job: JobRow): Promise<void> {
    const handler = byKind.get(job.kind)!;
    let outcome: JobOutcome;
    try {
      outcome = await handler.run(ctx, job);
    } catch (err) {
      ctx.log.error('job handler threw', { jobId: job.id, kind: job.kind, ...errorFields(err) });
      outcome = { kind: 'retry', reason: (err as Error)?.message ?? String(err) };
    }
    try {
      const status = await finishJob(ctx, job, outcome);
      ctx.log.info('job', { jobId: job.id, kind: job.kind, attempt: job.attempts, status, reason: 'reason' in outcome ? outcome.reason : undefined });
    } catch (err) {
      // The lease will expire and the job run again: at-least-once, never lost.
      ctx.log.error('job outcome not saved', { jobId: job.id, ...errorFields(err) });
    }
  }

  function pass(): void {
    scheduled = false;
    if (stopped) return;
    const free = ctx.config.jobs.concurrency - inflight.size;
    if (free > 0) {
      let claimed: JobRow[] = [];
      try {
        claimed = claimDue(ctx, free, scheduleOf, (job) => {
          if (!accept(job)) return false;
          // Count it now so the rest of this batch respects the partition limit too.
          perPartition.set(partitionKey(job), (perPartition.get(partitionKey(job)) ?? 0) + 1);
          return true;
        });
      } catch (err) {
        ctx.log.error('claiming jobs failed', errorFields(err));
      }
      for (const job of claimed) {
        const key = partitionKey(job);
        const p = execute(job).finally(() => {
          inflight.delete(p);
          const n = (perPartition.get(key) ?? 1) - 1;
          if (n <= 0) perPartition.delete(key);
          else perPartition.set(key, n);
          wake();
        });
        inflight.add(p);
      }
    }
    armTimer();
  }

  function armTimer(): void {
    clearTimeout(timer);
    if (stopped) return;
    let delay = MAX_SLEEP_MS;
    try {
      const due = nextDueAt(ctx);
      if (due !== undefined) delay = Math.min(MAX_SLEEP_MS, Math.max(0, due - ctx.clock.now().getTime()));
    } catch (err) {
      ctx.log.error('reading the job queue failed', errorFields(err));
    }
    // When every slot is busy, finishing a job wakes the runner; no need to spin.
    if (inflight.size >= ctx.config.jobs.concurrency) delay = MAX_SLEEP_MS;
    timer = setTimeout(wake, Math.max(delay, 5));
    timer.unref();
  }

  function wake(): void {
    if (stopped || scheduled) return;
    scheduled = true;
    setImmediate(pass);
  }

  return {
    name: 'jobs',
    async start() {
      stopped = false;
      const recovered = recoverJobs(ctx);
      if (recovered) ctx.log.info('jobs recovered', { count: recovered });
      ctx.onSignal('jobs', wake);
      const sweep = () => {
        try {
          sweepJobs(ctx);
        } catch (err) {
          ctx.log.error('sweeping jobs failed', errorFields(err));
        }
      };
      sweep();
      sweepTimer = setInterval(sweep, SWEEP_EVERY_MS);
      sweepTimer.unref();
      wake();
    },
    async stop(graceMs) {
      stopped = true;
      clearTimeout(timer);
      clearInterval(sweepTimer);
      // In-flight attempts get the grace period; anything unfinished keeps its lease and is
      // recovered at the next start.
      await Promise.race([Promise.allSettled([...inflight]), new Promise((r) => setTimeout(r, graceMs).unref())]);
    },
    async idle() {
      while (inflight.size) await Promise.allSettled([...inflight]);
    },
    wake,
  };
}
