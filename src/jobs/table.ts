// The durable job table: enqueue, claim, finish, recover, sweep. One mechanism for every
// retried task (outbound sends, webhook deliveries).
//
// Claiming a due job, in one transaction, increments `attempts`, marks it running under a
// lease and already moves `run_at` to the next retry time from the kind's schedule (mox's
// queue). A worker that dies mid-attempt therefore leaves a job that is retried when its
// lease expires (or at once after a restart), never lost and never retried in a tight loop.
//
// This module holds the rules (which due jobs a claim takes, what an outcome makes of a job);
// the statements that read and write the table are src/store/repo/jobs.ts.
import type { AppContext } from '../context.ts';
import type { Db, Tx } from '../store/client.ts';
import { newId } from '../ids.ts';
import { afterCommit, sendAlong, sendAlongRow } from '../store/store.ts';
import {
  claimJobs,
  countRunningByPartition,
  deleteFinishedJobs,
  findJobById,
  findNextWakeTimes,
  insertClaimedJobs,
  insertJob,
  insertJobs,
  insertJobOnce,
  listClaimCandidates,
  listDueOfPartition,
  nextQueuedPartition,
  listDueJobs,
  listJobsByStatus,
  listLeaseExpiredJobs,
  lockFreeJobs,
  renewJobLeases,
  requeueRunningJobs,
  unclaimJobs,
  updateJobOutcome,
  updateJobOutcomes,
  type JobCandidate,
  type JobClaim,
  type JobFinish,
  type JobRow,
} from '../store/repo/jobs.ts';

export type { JobCandidate, JobRow };
export type JobStatus = 'queued' | 'running' | 'done' | 'failed';

/**
 * What a handler reports. `commit`, when given, runs in the same transaction that records the
 * outcome, so a state change and the job's end are saved together.
 */
export type JobOutcome = ({ kind: 'ok' } | { kind: 'retry'; reason: string; delayMs?: number } | { kind: 'fail'; reason: string }) & {
  commit?: Commit;
  /** Locks `commit` takes that keep it apart from another's: outcomes finished together never share one (finishJobsTogether). */
  keys?: readonly string[];
};
/** Writes that commit together with a job's outcome (`tx` is the outcome's transaction). */
export type Commit = (tx: Tx) => Promise<unknown>;

export const ok = (commit?: Commit, keys?: readonly string[]): JobOutcome => ({ kind: 'ok', commit, keys });
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
  await insertJob(db, jobRow(id, now, input));
  return id;
}

/** enqueueJob for several jobs at once, in one statement; answers their ids in order. */
export async function enqueueJobs(db: Db, now: Date, inputs: EnqueueInput[]): Promise<string[]> {
  const rows = inputs.map((input) => jobRow(newId('job', now.getTime()), now, input));
  await insertJobs(db, rows);
  return rows.map((r) => r.id);
}

/**
 * What a runner of this process offers enqueuers: to start, right after their transaction
 * commits, jobs that transaction already claimed for it (enqueueJobHere).
 */
export interface JobTaker {
  /** Whether a job of `kind` enqueued now would be taken: the runner handles the kind and has room. */
  wants(kind: string): boolean;
  /** The kind's retry delays (a claim sets the next run time from them). */
  schedule(kind: string): number[];
  /** Called once the enqueuing transaction committed: the runner starts the job or gives it back. */
  take(job: JobRow): void;
}

const takers = new WeakMap<AppContext, JobTaker>();

/** Registers (or, with undefined, removes) the runner that takes jobs at their enqueue. */
export function setJobTaker(ctx: AppContext, taker: JobTaker | undefined): void {
  if (taker) takers.set(ctx, taker);
  else takers.delete(ctx);
}

/**
 * Adds a job inside the caller's transaction like enqueueJob, and when this process's runner
 * takes jobs at their enqueue (setJobTaker) and has room, claims it in that same transaction:
 * the row is written running its first attempt under a lease, due again a schedule step later,
 * as a claim would leave it, and the runner starts it once the commit is durable. A claim of
 * its own would cost a read, an update and a commit more, and the job would wait for that
 * commit behind the other writers of the moment: while the inbound spool's transactions filled
 * the commits, webhook deliveries fell behind the mail they announced (bench (o)). A crash
 * before the attempt ends leaves a leased job, retried like any other. Jobs due later are
 * queued as usual.
 */
export async function enqueueJobHere(ctx: AppContext, input: EnqueueInput): Promise<string> {
  const now = ctx.clock.now();
  const taker = takers.get(ctx);
  const id = newId('job', now.getTime());
  if (!taker?.wants(input.kind) || (input.runAt !== undefined && input.runAt > now.getTime())) {
    // Written at the end of the transaction with the other jobs it queues (sendAlongRow).
    sendAlongRow(ctx.db, 'queued jobs', jobRow(id, now, input), insertJobs);
    return id;
  }
  const schedule = taker.schedule(input.kind);
  const claimed = { ...jobRow(id, now, input), leaseUntil: now.getTime() + ctx.config.jobs.lease, runAt: now.getTime() + retryDelay(schedule, 1), updatedAt: now.toISOString() };
  // Written at the end of the transaction with the other jobs it claimed (sendAlongRow).
  sendAlongRow(ctx.db, 'claimed jobs', claimed, insertClaimedJobs);
  afterCommit(() => taker.take({ ...claimed, status: 'running', attempts: 1, lastError: null, finishedAt: null }));
  return id;
}

const jobRow = (id: string, now: Date, input: EnqueueInput) => ({
  id,
  kind: input.kind,
  payload: JSON.stringify(input.payload),
  partition: input.partition ?? '',
  maxAttempts: input.maxAttempts,
  runAt: input.runAt ?? now.getTime(),
  createdAt: now.toISOString(),
});

/**
 * Adds a job with a chosen `id` unless it exists already (done or not): work that must happen
 * once per period (the daily TLS report), whichever node or restart asks first.
 */
export async function enqueueJobOnce(db: Db, now: Date, id: string, input: EnqueueInput): Promise<boolean> {
  return insertJobOnce(db, jobRow(id, now, input));
}

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
  const readAt = ctx.clock.now().getTime();
  const window = Math.max(limit * 2, 16);
  // With `kinds`, a window of due jobs per kind: thousands of spooled messages waiting for their
  // one processing slot must not fill the window and starve webhook deliveries and sends.
  const seen = kinds
    ? (await listClaimCandidates(ctx.db, readAt, kinds, window)).sort((a, b) => a.runAt - b.runAt)
    : [...(await listLeaseExpiredJobs(ctx.db, readAt, window)), ...(await listDueJobs(ctx.db, readAt, window))].sort((a, b) => a.runAt - b.runAt);
  const chosen: JobCandidate[] = [];
  /** Partitions (kind and partition) with a job refused in this pass: at their limit. */
  const refused = new Set<string>();
  for (const job of kinds ? takeTurns(ctx, seen) : seen) {
    if (chosen.length >= limit) break;
    if (accept(job)) chosen.push(job);
    else refused.add(partitionKey(job));
  }
  if (kinds && chosen.length < limit && refused.size) await walkPartitions(ctx, readAt, limit, window, seen, chosen, refused, accept);
  if (!chosen.length) return [];
  turnCursors.set(ctx, chosen[chosen.length - 1].kind);
  return ctx.store.grouped(async (tx) => {
    const now = ctx.clock.now();
    const nowMs = now.getTime();
    const taken: JobRow[] = [];
    const claimable = ctx.store.dialect === 'postgres' ? await acrossNodes(ctx, tx, chosen, nowMs, partitionLimit) : chosen;
    // One statement for the jobs that had the same attempts and get the same retry time (most
    // often one per kind), and then what each claimed job writes: job rows are locked before
    // such rows, as finishes do.
    const groups = new Map<string, JobClaim>();
    for (const job of claimable) {
      const runAt = nowMs + retryDelay(scheduleOf(job.kind), job.attempts + 1);
      const key = `${job.attempts}:${runAt}`;
      const group = groups.get(key);
      if (group) group.ids.push(job.id);
      else groups.set(key, { ids: [job.id], attempts: job.attempts, now: nowMs, leaseUntil: nowMs + ctx.config.jobs.lease, runAt, updatedAt: now.toISOString() });
    }
    const byId = new Map((await Promise.all([...groups.values()].map((claim) => claimJobs(tx, claim)))).flat().map((row) => [row.id, row]));
    // In the order chosen (kinds in turn), as they start.
    const rows = claimable.map((job) => byId.get(job.id));
    for (const row of rows) {
      if (!row) continue;
      await claimed?.(tx, row);
      taken.push(row);
    }
    return taken;
  });
}

/** Per server: the kind of the job its last claim took last (the next claim offers the kind after it first). */
const turnCursors = new WeakMap<AppContext, string>();

/**
 * The due jobs (earliest first within each kind) in the order a claim offers them its free
 * slots: one job of each kind in turn, starting with the kind after the one the last claim
 * took last. In plain run_at order the oldest backlog took every slot that freed: while
 * thousands of spooled messages were processed with the runner's whole concurrency, webhook
 * deliveries queued seconds later waited for the spool to drain (bench (o)). Taking turns,
 * every kind with due jobs gets one of the next slots, within its partitions' limits.
 */
function takeTurns(ctx: AppContext, seen: JobCandidate[]): JobCandidate[] {
  const byKind = new Map<string, JobCandidate[]>();
  for (const job of seen) {
    const list = byKind.get(job.kind);
    if (list) list.push(job);
    else byKind.set(job.kind, [job]);
  }
  if (byKind.size < 2) return seen;
  const order = [...byKind.keys()].sort();
  const last = turnCursors.get(ctx);
  const first = Math.max(0, last === undefined ? 0 : order.findIndex((k) => k > last));
  const lists = [...order.slice(first), ...order.slice(0, first)].map((k) => byKind.get(k)!);
  const out: JobCandidate[] = [];
  for (let i = 0; out.length < seen.length; i++) for (const list of lists) if (i < list.length) out.push(list[i]);
  return out;
}

/** The delay after attempt `attempts` (1 for the first) before the next: the schedule's step, its last one beyond it. */
const retryDelay = (schedule: number[], attempts: number) => (schedule.length ? schedule[Math.min(attempts - 1, schedule.length - 1)] : 60_000);

/** A job's partition as one key (its kind and partition): what partition limits count by. */
export const partitionKey = (job: Pick<JobCandidate, 'kind' | 'partition'>) => `${job.kind}\u0000${job.partition}`;

/** Partitions a claim pass looks at one by one, at most, when a backlog fills its read. */
const WALK_PARTITIONS = 16;

/** Per server and kind: the partition the last walk stopped at (the next one starts after it). */
const walkCursors = new WeakMap<AppContext, Map<string, string | null>>();

/**
 * A kind's due jobs are read in run_at order, `window` of them: a backlog of one partition at its
 * limit (a slow domain's sends, a slow receiver's webhooks) that fills the read would leave every
 * other partition's jobs waiting behind it until it drains. When the read of a kind came back
 * full and refused a partition, the kind's partitions are walked in their order from where the
 * last walk stopped (round robin), stepping past the refused ones with one index seek each, and
 * each other partition's earliest due jobs are offered until the free slots are taken or
 * WALK_PARTITIONS were looked at: at most twice that many statements, whatever the backlog.
 */
async function walkPartitions(
  ctx: AppContext,
  readAt: number,
  limit: number,
  window: number,
  seen: JobCandidate[],
  chosen: JobCandidate[],
  refused: Set<string>,
  accept: (job: JobCandidate) => boolean,
): Promise<void> {
  const read = new Map<string, number>();
  for (const job of seen) read.set(job.kind, (read.get(job.kind) ?? 0) + 1);
  const taken = new Set(chosen.map((j) => j.id));
  let cursors = walkCursors.get(ctx);
  if (!cursors) walkCursors.set(ctx, (cursors = new Map()));
  for (const [kind, n] of read) {
    if (chosen.length >= limit) return;
    if (n < window || ![...refused].some((k) => k.startsWith(partitionKey({ kind, partition: '' })))) continue;
    const start = cursors.get(kind) ?? null;
    let at = start;
    let wrapped = start === null;
    for (let looked = 0; looked < WALK_PARTITIONS && chosen.length < limit;) {
      const partition = await nextQueuedPartition(ctx.db, kind, at);
      if (partition === undefined || (wrapped && start !== null && partition > start)) {
        if (wrapped) break;
        wrapped = true;
        at = null;
        continue;
      }
      looked++;
      at = partition;
      if (refused.has(partitionKey({ kind, partition }))) continue;
      for (const job of await listDueOfPartition(ctx.db, kind, partition, readAt, limit - chosen.length)) {
        if (taken.has(job.id)) continue;
        if (!accept(job)) {
          refused.add(partitionKey(job));
          break;
        }
        chosen.push(job);
        taken.add(job.id);
      }
    }
    cursors.set(kind, at);
  }
}

/** On a shared database: the chosen jobs no other transaction holds, within every partition's limit across nodes. */
async function acrossNodes(ctx: AppContext, tx: Tx, chosen: JobCandidate[], nowMs: number, partitionLimit?: (kind: string) => number | undefined): Promise<JobCandidate[]> {
  // The lock, the rows' locks and the count of what runs in the chosen jobs' limited partitions
  // go in one write (sendAlong, Promise.all): the server runs them in that order, the reads
  // once the lock is held. One round trip for a claim's checks, not three.
  sendAlong(ctx.store.lock(tx, 'jobs:claim'));
  const partitions = [...new Set(chosen.filter((j) => j.partition && partitionLimit?.(j.kind) !== undefined).map((j) => j.partition))];
  const [locked, rows] = await Promise.all([
    lockFreeJobs(
      tx,
      chosen.map((j) => j.id),
    ),
    partitions.length ? countRunningByPartition(tx, nowMs, partitions) : [],
  ]);
  const free = new Set(locked);
  const running = new Map<string, number>();
  for (const [kind, partition, n] of rows) running.set(partitionKey({ kind, partition }), n);
  return chosen.filter((j) => {
    if (!free.has(j.id)) return false;
    const limit = j.partition ? partitionLimit?.(j.kind) : undefined;
    if (limit === undefined) return true;
    const k = partitionKey(j);
    const n = running.get(k) ?? 0;
    if (n >= limit) return false;
    running.set(k, n + 1);
    return true;
  });
}

/** Queues again jobs this process claimed and never started (a runner stopping, or out of room). */
export function unclaimJobsOf(ctx: AppContext, ids: string[]): Promise<number> {
  return unclaimJobs(ctx.db, ids, ctx.clock.now());
}

/** Moves the lease of jobs this process is still running forward (the runner, every third of a lease). */
export async function renewLeases(ctx: AppContext, ids: string[]): Promise<number> {
  if (!ids.length) return 0;
  const now = ctx.clock.now().getTime();
  // In the order of their ids, as finishJobsTogether takes several rows: never the other way round.
  return renewJobLeases(ctx.db, [...ids].sort(), now + ctx.config.jobs.lease);
}

/**
 * Records a handler's outcome (and its `commit`) in one transaction, shared with the other
 * jobs finishing at this moment (Store.grouped, src/store/sqlite.ts: one WAL fsync, off the event loop);
 * resolves once it is on disk.
 */
export function finishJob(ctx: AppContext, job: JobRow, outcome: JobOutcome): Promise<JobStatus> {
  const now = ctx.clock.now();
  return ctx.store.grouped((tx) => recordOutcome(tx, job, outcome, now));
}

/**
 * Records the outcomes of several jobs, each as finishJob does, all started at once: on SQLite
 * Store.grouped runs them in one transaction (a savepoint each, so one whose `commit` throws is
 * undone alone) with one fsync. PostgreSQL runs each in its own transaction: one transaction
 * for all saves no round trip there (a savepoint each instead of BEGIN and COMMIT; the server
 * already groups concurrent commits' WAL flushes) and holds every job's row lock until the last
 * outcome is written. Tried, it made test/e2e/node-failover.test.ts deliver sends twice under
 * load, in both of two runs (most likely: the lease renewal, one statement for all running
 * jobs, waited on those locks past the lease, and the other node took the jobs over). Only the
 * kinds that finish together (JobHandler.finishTogether: webhook deliveries, spooled mail) share
 * one there, their commits side by side (finishJobsTogether). Answers, in order, each job's
 * saved status or why it was not saved.
 */
export function finishJobs(ctx: AppContext, items: Array<{ job: JobRow; outcome: JobOutcome }>): Promise<Array<PromiseSettledResult<JobStatus>>> {
  return Promise.allSettled(items.map((item) => finishJob(ctx, item.job, item.outcome)));
}

/**
 * PostgreSQL: the outcomes of several jobs (of kinds that finish together, JobHandler) in one
 * transaction: the jobs' rows, then their `commit`s side by side, so the round trips of one
 * overlap the others' (one BEGIN, COMMIT and WAL flush, and the statements of a turn in one
 * socket write). Like concurrent transactions but for their locks, which one transaction holds
 * for all: an outcome sharing a key with an earlier one (JobOutcome.keys: a second delivery of
 * the same message to the same inbox) is recorded after the others, alone. Should any of them
 * fail, that transaction rolls back and each is recorded alone (finishJobs), so only the one at
 * fault fails; their `commit`s run again. Answers as finishJobs does.
 */
export async function finishJobsTogether(ctx: AppContext, items: Array<{ job: JobRow; outcome: JobOutcome }>): Promise<Array<PromiseSettledResult<JobStatus>>> {
  const taken = new Set<string>();
  const apart = items.filter((item) => {
    const keys = item.outcome.keys ?? [];
    if (keys.some((k) => taken.has(k))) return true;
    for (const k of keys) taken.add(k);
    return false;
  });
  if (apart.length) {
    const together = items.filter((item) => !apart.includes(item));
    const results = new Map<unknown, PromiseSettledResult<JobStatus>>();
    (await finishJobsTogether(ctx, together)).forEach((r, i) => results.set(together[i], r));
    (await finishJobs(ctx, apart)).forEach((r, i) => results.set(apart[i], r));
    return items.map((item) => results.get(item)!);
  }
  if (items.length < 2) return finishJobs(ctx, items);
  const now = ctx.clock.now();
  try {
    const statuses = await ctx.store.transaction(async (tx) => {
      // Every job's row first, then what the outcomes write, as recordOutcome orders one job's;
      // the rows in the order of their ids, as a lease renewal takes them (renewLeases).
      const out = writeOutcomeRows(tx, items, now);
      await Promise.all(items.flatMap((item) => (item.outcome.commit ? [item.outcome.commit(tx)] : [])));
      return out;
    });
    return statuses.map((value) => ({ status: 'fulfilled', value }));
  } catch {
    return finishJobs(ctx, items);
  }
}

async function recordOutcome(tx: Tx, job: JobRow, outcome: JobOutcome, now: Date): Promise<JobStatus> {
  const [status] = writeOutcomeRows(tx, [{ job, outcome }], now);
  await outcome.commit?.(tx);
  return status;
}

/** What a job's row becomes for its outcome. */
function finishOf(job: JobRow, outcome: JobOutcome, now: Date): JobFinish & { status: JobStatus } {
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
  return { status, lastError, runAt, finishedAt: status === 'queued' ? null : iso, updatedAt: iso };
}

/**
 * Sends along the UPDATEs of the jobs' rows for their outcomes, in the order of the jobs' ids;
 * answers the status each gets. Rows that come out alike (most often: every outcome `ok`) go in
 * one statement, which locks them in the order of their ids too; otherwise each has its own.
 *
 * The job's row first, then what the outcome writes (a send's message and the inbox counts
 * its status moves): a claim locks job rows before it writes such rows, so the two never wait
 * for each other in opposite orders. On PostgreSQL they did: a claim on another node that had
 * locked this row (a candidate taken meanwhile) waited on the counts this finish held, the
 * deadlock ended one of them, and a lost finish ran the attempt (a delivery) again. Sent along,
 * it still runs first: the server runs a transaction's statements in order.
 */
function writeOutcomeRows(tx: Tx, items: Array<{ job: JobRow; outcome: JobOutcome }>, now: Date): JobStatus[] {
  const finishes = items.map((item) => finishOf(item.job, item.outcome, now));
  const first = JSON.stringify(finishes[0]);
  if (items.length > 1 && finishes.every((f) => JSON.stringify(f) === first)) {
    sendAlong(
      updateJobOutcomes(
        tx,
        items.map((item) => item.job.id),
        finishes[0]!,
      ),
    );
  } else {
    const order = items.map((item, i) => ({ id: item.job.id, i })).sort((a, b) => (a.id < b.id ? -1 : 1));
    for (const { id, i } of order) sendAlong(updateJobOutcome(tx, id, finishes[i]!));
  }
  return finishes.map((f) => f.status);
}

/**
 * At start: a job left `running` belonged to a process that is gone. It is made due at once
 * (the attempt it was on already counts), so a crash delays work by a restart, not a lease.
 */
export async function recoverJobs(ctx: AppContext): Promise<number> {
  return requeueRunningJobs(ctx.db, ctx.clock.now());
}

/** Deletes finished jobs older than `jobs.retention` (not failed ones holding spooled mail, for `mailroom queue --retry`). */
export async function sweepJobs(ctx: AppContext): Promise<number> {
  const cutoff = new Date(ctx.clock.now().getTime() - ctx.config.jobs.retention).toISOString();
  return deleteFinishedJobs(ctx.db, cutoff);
}

/**
 * Epoch ms of the next time a job becomes claimable after `afterMs`, or undefined when none
 * will. Jobs already due at `afterMs` are not counted: the runner's last claim saw them, and
 * the ones it left were in partitions at their limit, which a finishing job wakes it for.
 */
export async function nextDueAt(ctx: AppContext, afterMs: number): Promise<number | undefined> {
  const next = await findNextWakeTimes(ctx.db, afterMs);
  const times = [next.queued, next.lease].filter((t): t is number => typeof t === 'number');
  return times.length ? Math.min(...times) : undefined;
}

export function listJobs(ctx: AppContext, statuses: JobStatus[], limit = 200): Promise<JobRow[]> {
  return listJobsByStatus(ctx.db, statuses, limit);
}

export function getJob(ctx: AppContext, id: string): Promise<JobRow | undefined> {
  return findJobById(ctx.db, id);
}
