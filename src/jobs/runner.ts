// The job runner: claims due jobs and runs their handlers with bounded concurrency (overall,
// and per partition such as a recipient domain). It wakes at once when work is enqueued
// (ctx.notify('jobs')) or a job finishes, and otherwise sleeps until the next job is due.
// One claim is in flight at a time; a claim commits with the other writers of the moment
// (group commit) and its jobs start once it is on disk. On SQLite the outcomes of jobs that end
// while others' outcomes commit are committed together next (one transaction, one fsync).
// On SQLite a job may also be claimed by the transaction that enqueues it (enqueueJobHere): it
// is handed to the runner once that commit is durable and starts when its partition has room.
import type { AppContext } from '../context.ts';
import { errorFields } from '../log.ts';
import type { Service } from '../context.ts';
import type { Tx } from '../store/client.ts';
import { asMailWork } from '../store/store.ts';
import {
  claimDue,
  finishJobs,
  finishJobsTogether,
  partitionKey,
  nextDueAt,
  recoverJobs,
  renewLeases,
  setJobTaker,
  sweepJobs,
  unclaimJobsOf,
  type JobCandidate,
  type JobOutcome,
  type JobRow,
  type JobStatus,
} from './table.ts';

export interface JobHandler {
  kind: string;
  /** Delays between attempts (ms); attempts allowed = schedule length + 1. */
  schedule(ctx: AppContext): number[];
  /** Most jobs of this kind running at once in one partition (default: no partition limit). */
  partitionLimit?(ctx: AppContext): number;
  /**
   * Runs inside the transaction that claims the job (e.g. a send marks its recipients
   * `sending`), so no extra commit is needed before `run`. Must not throw.
   */
  claimed?(tx: Tx, ctx: AppContext, job: JobRow): Promise<void>;
  /**
   * Runs one attempt. Should not throw; a throw counts as a retry with the error as reason.
   * `signal` aborts when the attempt reaches `jobs.attempt_timeout`: the handler stops its I/O
   * (closes its connection) and returns its outcome; one that has not within ABORT_GRACE_MS is
   * abandoned and counted as a retry.
   */
  run(ctx: AppContext, job: JobRow, signal: AbortSignal): Promise<JobOutcome>;
  /**
   * PostgreSQL: the outcomes of this kind's jobs that end at the same moment are committed in
   * one transaction, their `commit`s side by side (finishJobsTogether), not each in its own.
   * For kinds whose `commit` may run again after a rollback, whose attempts may run twice, and
   * whose outcomes name the locks that keep them apart (JobOutcome.keys): webhook deliveries and
   * spooled mail.
   */
  finishTogether?: boolean;
}

/** Why an attempt was aborted: its deadline (the signal's reason). */
export class AttemptTimeoutError extends Error {
  constructor(ms: number) {
    super(`attempt ran past jobs.attempt_timeout (${ms} ms)`);
    this.name = 'AttemptTimeoutError';
  }
}

/**
 * Time a handler gets, once its signal aborted, to stop and return its own outcome (which
 * records what it did, e.g. recipients deferred) before the runner gives up on it. Not a
 * budget: handlers honour the signal at once; this only bounds one that does not.
 */
const ABORT_GRACE_MS = 5_000;

const MAX_SLEEP_MS = 30_000;
/**
 * How often the runner checks for jobs queued by another process (`mailroom webhooks replay`,
 * `queue --retry`): the CLI cannot call notify() in this process, so a commit by another
 * connection wakes the runner within this time instead of at its next timer (up to 30 s).
 */
const EXTERNAL_CHECK_MS = 500;
const SWEEP_EVERY_MS = 3_600_000;
/** Most outcomes in one PostgreSQL transaction (finishJobsTogether): its job rows stay locked until its COMMIT. */
const FINISHED_TOGETHER = 32;

export interface JobRunner extends Service {
  /** Resolves when no job is running (tests, shutdown). */
  idle(): Promise<void>;
  /** Runs a claim pass now. */
  wake(): void;
}

export function createJobRunner(ctx: AppContext, handlers: JobHandler[]): JobRunner {
  const byKind = new Map(handlers.map((h) => [h.kind, h]));
  const kinds = handlers.map((h) => h.kind);
  const inflight = new Set<Promise<void>>();
  const perPartition = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let sweepTimer: NodeJS.Timeout | undefined;
  let externalTimer: NodeJS.Timeout | undefined;
  let leaseTimer: NodeJS.Timeout | undefined;
  /** Jobs this process is running: their leases are renewed until their outcome is saved. */
  const running = new Set<string>();
  let stopped = true;
  let scheduled = false;
  /** The claim being committed; wakes meanwhile are folded into one pass after it. */
  let claiming: Promise<void> | undefined;
  let wokenWhileClaiming = false;
  /** Overall slots the claim being committed holds for the jobs it chose. */
  let claimingSlots = 0;
  /**
   * Jobs claimed by the transactions that enqueued them (enqueueJobHere), waiting for a slot of
   * their partition or an overall one; they start before anything a claim would read. At most
   * jobs.concurrency wait: past it a job is given back to the queue (unclaimJobsOf).
   */
  const taken: JobRow[] = [];

  const scheduleOf = (kind: string) => byKind.get(kind)?.schedule(ctx) ?? [];

  const accept = (job: JobCandidate) => {
    const h = byKind.get(job.kind);
    if (!h) return false;
    if (!job.partition || !h.partitionLimit) return true;
    return (perPartition.get(partitionKey(job)) ?? 0) < h.partitionLimit(ctx);
  };
  const release = (key: string) => {
    const n = (perPartition.get(key) ?? 1) - 1;
    if (n <= 0) perPartition.delete(key);
    else perPartition.set(key, n);
  };
  const onClaimed = async (tx: Tx, job: JobRow) => byKind.get(job.kind)?.claimed?.(tx, ctx, job);
  const hold = (key: string) => perPartition.set(key, (perPartition.get(key) ?? 0) + 1);

  /** Starts the taken jobs that have a slot now, oldest first. */
  function startTaken(): void {
    for (let i = 0; i < taken.length && inflight.size + claimingSlots < ctx.config.jobs.concurrency;) {
      const job = taken[i];
      if (!accept(job)) {
        i++;
        continue;
      }
      taken.splice(i, 1);
      hold(partitionKey(job));
      start(job);
    }
  }

  /** A job its enqueuing transaction claimed for this runner (committed, on disk). */
  function take(job: JobRow): void {
    if (stopped || taken.length >= ctx.config.jobs.concurrency) return void giveBack([job]);
    running.add(job.id);
    taken.push(job);
    startTaken();
  }

  /** Jobs claimed here that will not start here: queued again for the next claim (or the next start). */
  function giveBack(jobs: JobRow[]): Promise<void> {
    for (const job of jobs) running.delete(job.id);
    return unclaimJobsOf(
      ctx,
      jobs.map((j) => j.id),
    ).then(
      () => wake(),
      (err: unknown) => ctx.log.error('queueing claimed jobs again failed', errorFields(err)),
    );
  }

  /** Runs one attempt and records its outcome; resolves with the saved status (never rejects). */
  async function execute(job: JobRow): Promise<JobStatus | undefined> {
    const handler = byKind.get(job.kind)!;
    let outcome: JobOutcome;
    // Every attempt has a deadline (a tarpitting MX trickling bytes defeats socket timeouts,
    // and the lease is renewed while the process lives): past it the handler is aborted, and
    // one that does not stop is abandoned after the grace, counted as a temporary failure.
    const limit = ctx.config.jobs.attempt_timeout;
    const controller = new AbortController();
    let grace: NodeJS.Timeout | undefined;
    const deadline = setTimeout(() => {
      ctx.log.warn('job attempt past its deadline: aborted', { jobId: job.id, kind: job.kind, attempt: job.attempts, ms: limit });
      controller.abort(new AttemptTimeoutError(limit));
    }, limit);
    const abandoned = new Promise<JobOutcome>((resolve) =>
      controller.signal.addEventListener('abort', () => {
        grace = setTimeout(() => resolve({ kind: 'retry', reason: `${(controller.signal.reason as Error).message}; abandoned` }), ABORT_GRACE_MS);
      }),
    );
    try {
      outcome = await Promise.race([handler.run(ctx, job, controller.signal), abandoned]);
    } catch (err) {
      ctx.log.error('job handler threw', { jobId: job.id, kind: job.kind, ...errorFields(err) });
      outcome = { kind: 'retry', reason: (err as Error)?.message ?? String(err) };
    } finally {
      clearTimeout(deadline);
      clearTimeout(grace);
      // The attempt itself (an SMTP transaction, an HTTP POST) is over: its partition slot is
      // free while the outcome commits, so the next claim can share that commit. The job's row
      // stays `running` until then, so it cannot be claimed again meanwhile.
      release(partitionKey(job));
      startTaken();
      wake();
    }
    const saved = await saveOutcome(job, outcome);
    if (saved.status === 'fulfilled') {
      ctx.log.info('job', { jobId: job.id, kind: job.kind, attempt: job.attempts, status: saved.value, reason: 'reason' in outcome ? outcome.reason : undefined });
      return saved.value;
    }
    // The lease will expire and the job run again: at-least-once, never lost.
    ctx.log.error('job outcome not saved', { jobId: job.id, ...errorFields(saved.reason) });
    return undefined;
  }

  /**
   * On SQLite, outcomes are committed in batches (finishJobs: one transaction, one fsync): those
   * that end while a batch commits wait for it and go together in the next, so under load a
   * commit carries many outcomes, and alone one costs no wait but a turn of the event loop.
   * PostgreSQL commits each at once in its own transaction (see finishJobs), but for the kinds
   * that finish together (JobHandler.finishTogether): batched as on SQLite, a queue per kind, so
   * that a webhook's outcome does not wait behind a batch of stored messages.
   */
  type Finishing = { job: JobRow; outcome: JobOutcome; saved: (r: PromiseSettledResult<JobStatus>) => void };
  const queues = new Map<string, { items: Finishing[]; committing: boolean }>();
  function saveOutcome(job: JobRow, outcome: JobOutcome): Promise<PromiseSettledResult<JobStatus>> {
    const postgres = ctx.store.dialect === 'postgres';
    if (postgres && !byKind.get(job.kind)?.finishTogether) return finishJobs(ctx, [{ job, outcome }]).then(([saved]) => saved);
    const kind = postgres ? job.kind : '';
    let queue = queues.get(kind);
    if (!queue) queues.set(kind, (queue = { items: [], committing: false }));
    const q = queue;
    return new Promise((saved) => {
      q.items.push({ job, outcome, saved });
      if (!q.committing) {
        q.committing = true;
        setImmediate(() => commitOutcomes(q));
      }
    });
  }
  function commitOutcomes(q: { items: Finishing[]; committing: boolean }): void {
    const postgres = ctx.store.dialect === 'postgres';
    const batch = q.items.splice(0, postgres ? FINISHED_TOGETHER : q.items.length);
    void (postgres ? finishJobsTogether : finishJobs)(ctx, batch)
      .catch((err: unknown) => batch.map((): PromiseSettledResult<JobStatus> => ({ status: 'rejected', reason: err })))
      .then((results) => {
        batch.forEach((item, i) => item.saved(results[i]));
        if (q.items.length) setImmediate(() => commitOutcomes(q));
        else q.committing = false;
      });
  }

  function pass(): void {
    scheduled = false;
    if (stopped) return;
    if (claiming) {
      wokenWhileClaiming = true;
      return;
    }
    const free = ctx.config.jobs.concurrency - inflight.size;
    if (free <= 0) return void armTimer(ctx.clock.now().getTime());
    claiming = claimPass(free).finally(() => {
      claiming = undefined;
      if (wokenWhileClaiming) {
        wokenWhileClaiming = false;
        wake();
      }
    });
  }

  /** Reads the due jobs, claims those with a free slot, starts them once the claim is durable. */
  async function claimPass(free: number): Promise<void> {
    // Partition slots taken by this claim, by job id: given back for any job not claimed after all.
    const reserved = new Map<string, string>();
    let seenAt = ctx.clock.now().getTime();
    try {
      const claimed = await claimDue(
        ctx,
        free,
        scheduleOf,
        (job) => {
          seenAt = ctx.clock.now().getTime();
          // Jobs taken at their enqueue may have started since `free` was counted.
          if (inflight.size + claimingSlots >= ctx.config.jobs.concurrency || !accept(job)) return false;
          // Counted now so the rest of this batch respects the partition limit too.
          const key = partitionKey(job);
          hold(key);
          reserved.set(job.id, key);
          claimingSlots++;
          return true;
        },
        onClaimed,
        kinds,
        (kind) => {
          const h = byKind.get(kind);
          return h?.partitionLimit?.(ctx);
        },
      );
      for (const job of claimed) reserved.delete(job.id);
      // Stopped meanwhile: the claimed jobs keep their lease and run again when it ends.
      if (stopped) for (const job of claimed) release(partitionKey(job));
      else for (const job of claimed) start(job);
    } catch (err) {
      // Reading failed, or a claim that did commit is not known to be on disk: those jobs run
      // again when their lease expires, like the job of a worker that died.
      ctx.log.error('claiming jobs failed', errorFields(err));
    } finally {
      for (const key of reserved.values()) release(key);
      claimingSlots = 0;
    }
    startTaken();
    await armTimer(seenAt);
  }

  function start(job: JobRow): void {
    running.add(job.id);
    const p = execute(job).then((status) => {
      running.delete(job.id);
      // The partition slot was given back (and the runner woken) when the attempt ended. The
      // overall slot frees only now, which matters if all of them were taken; a retry needs
      // the timer set for its time. On a shared database the partition limits are counted from
      // the job rows, where this job was `running` until its outcome committed: look again now.
      const wasFull = inflight.size >= ctx.config.jobs.concurrency;
      inflight.delete(p);
      startTaken();
      if (wasFull || status !== 'done' || ctx.store.dialect === 'postgres') wake();
    });
    inflight.add(p);
  }

  /** Sleeps until the first job due after `afterMs` (earlier ones were seen by the last claim). */
  async function armTimer(afterMs: number): Promise<void> {
    let delay = MAX_SLEEP_MS;
    try {
      const due = await nextDueAt(ctx, afterMs);
      if (due !== undefined) delay = Math.min(MAX_SLEEP_MS, Math.max(0, due - ctx.clock.now().getTime()));
    } catch (err) {
      ctx.log.error('reading the job queue failed', errorFields(err));
      delay = 1000;
    }
    clearTimeout(timer);
    if (stopped) return;
    timer = setTimeout(wake, Math.max(delay, 5));
    timer.unref();
  }

  function wake(): void {
    if (stopped || scheduled) return;
    scheduled = true;
    // Woken by a request (it queued a job) or by mail: the pass is mail's work either way, on
    // mail's connections (src/store/store.ts, asMailWork), and so is every job it starts.
    asMailWork(() => setImmediate(pass));
  }

  return {
    name: 'jobs',
    async start() {
      stopped = false;
      // One process owns the embedded database's jobs: what a crash left running is due at
      // once. On a shared database another node may be running them: their leases decide.
      if (ctx.store.dialect === 'sqlite') {
        const recovered = await recoverJobs(ctx);
        if (recovered) ctx.log.info('jobs recovered', { count: recovered });
      }
      // A job runs as long as it needs: its lease moves forward while this process lives, and
      // lapses (another node, or this one after a restart, takes the job) only when it is gone.
      leaseTimer = setInterval(
        () => {
          renewLeases(ctx, [...running]).catch((err: unknown) => ctx.log.error('renewing job leases failed', errorFields(err)));
        },
        Math.max(1000, Math.floor(ctx.config.jobs.lease / 3)),
      );
      leaseTimer.unref();
      ctx.onSignal('jobs', wake);
      // One node owns the embedded database's jobs, so a job claimed as it is enqueued is within
      // every limit this runner counts. On a shared database partition limits are counted across
      // nodes from the job rows at each claim (claimDue): jobs are claimed there only.
      if (ctx.store.dialect === 'sqlite') {
        setJobTaker(ctx, {
          wants: (kind) => byKind.has(kind) && !stopped && taken.length < ctx.config.jobs.concurrency,
          schedule: scheduleOf,
          take,
        });
      }
      const committedElsewhere = ctx.store.externalCommits();
      externalTimer = setInterval(() => {
        try {
          if (committedElsewhere()) wake();
        } catch (err) {
          ctx.log.error('checking for jobs queued elsewhere failed', errorFields(err));
        }
      }, EXTERNAL_CHECK_MS);
      externalTimer.unref();
      const sweep = () => void ctx.store.exclusive('sweep-jobs', () => sweepJobs(ctx)).catch((err: unknown) => ctx.log.error('sweeping jobs failed', errorFields(err)));
      sweep();
      sweepTimer = setInterval(sweep, SWEEP_EVERY_MS);
      sweepTimer.unref();
      wake();
    },
    async stop(graceMs) {
      stopped = true;
      setJobTaker(ctx, undefined);
      // Not started: queued again with their attempt uncounted, for the next start.
      const unstarted = taken.splice(0);
      if (unstarted.length) await giveBack(unstarted);
      clearTimeout(timer);
      clearInterval(sweepTimer);
      clearInterval(externalTimer);
      clearInterval(leaseTimer);
      // In-flight attempts get the grace period; anything unfinished keeps its lease and is
      // recovered at the next start.
      await Promise.race([Promise.allSettled([...inflight, claiming]), new Promise((r) => setTimeout(r, graceMs).unref())]);
    },
    async idle() {
      while (inflight.size || claiming) await Promise.allSettled([...inflight, claiming]);
    },
    wake,
  };
}
