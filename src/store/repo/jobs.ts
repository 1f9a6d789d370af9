// The job table's reads and writes (table `jobs`), for src/jobs/table.ts (enqueue, claim,
// finish, recover, sweep) and for the domain modules that look at jobs of their own kind: the
// inbound spool (src/domain/inbound/spool.ts: its depth, a retry), scheduled send
// (src/domain/sending/scheduled.ts: retiring a release job) and webhook replays
// (src/domain/webhooks/webhook-fanout.ts: the deliveries still to come). Which job is claimed,
// and what an outcome makes of it, is decided in src/jobs/table.ts.
import { and, asc, eq, inArray, lte, sql, type Placeholder, type SQL } from 'drizzle-orm';
import { preparedQuery, tableColumns } from '../prepared.ts';
import { jobs } from '../schema.ts';
import { PLAN_EACH_TIME, changes, dialectOf, insertRows, rawRows, rawRun, type Db } from '../store.ts';

export type JobRow = typeof jobs.$inferSelect;

/** What a claim is told about a due job before it is claimed. */
export type JobCandidate = Pick<JobRow, 'id' | 'kind' | 'partition' | 'attempts' | 'runAt'>;

/** A new job's row: due at `runAt`, `updatedAt` is its `createdAt`. */
export interface NewJob {
  id: string;
  kind: string;
  /** JSON text. */
  payload: string;
  partition: string;
  maxAttempts: number;
  runAt: number;
  createdAt: string;
}

/** Inserts a job; on a transaction's handle it commits with that transaction. */
export async function insertJob(db: Db, job: NewJob): Promise<void> {
  await preparedQuery(db, insertJobQuery).run({ ...job, status: 'queued', attempts: 0, leaseUntil: null, updatedAt: job.createdAt });
}

/** A job inserted already claimed (insertClaimedJobs). */
export type ClaimedJob = NewJob & { leaseUntil: number; updatedAt: string };

/**
 * Inserts jobs already claimed: each running its first attempt under a lease until `leaseUntil`,
 * due again at `runAt` should that attempt not finish (what claimJobs makes of a queued job).
 * One row alone goes by a statement prepared once.
 */
export async function insertClaimedJobs(db: Db, rows: ClaimedJob[]): Promise<void> {
  if (rows.length === 1) return void (await preparedQuery(db, insertJobQuery).run({ ...rows[0], status: 'running', attempts: 1 }));
  await insertRows(
    db,
    'jobs',
    ['id', 'kind', 'payload', 'partition', 'status', 'attempts', 'max_attempts', 'run_at', 'lease_until', 'created_at', 'updated_at'],
    rows.map((j) => [j.id, j.kind, j.payload, j.partition, 'running', 1, j.maxAttempts, j.runAt, j.leaseUntil, j.createdAt, j.updatedAt]),
  );
}

/**
 * Claimed jobs given back unstarted (`running` as claimed, attempts as the claim left them):
 * queued again, due at `now`, the claim's attempt not counted.
 */
export function unclaimJobs(db: Db, ids: string[], now: Date): Promise<number> {
  return rawRun(
    db,
    "UPDATE jobs SET status = 'queued', attempts = attempts - 1, lease_until = NULL, run_at = ?, updated_at = ? WHERE status = 'running' AND attempts > 0 AND id IN (SELECT value FROM json_each(?))",
    [now.getTime(), now.toISOString(), JSON.stringify(ids)],
  );
}

/**
 * Inserts several jobs in one statement (the spool's batch: src/domain/inbound/spool.ts). On a
 * transaction's handle they commit with it.
 */
export async function insertJobs(db: Db, rows: NewJob[]): Promise<void> {
  if (rows.length === 1) return insertJob(db, rows[0]);
  await insertRows(
    db,
    'jobs',
    ['id', 'kind', 'payload', 'partition', 'max_attempts', 'run_at', 'created_at', 'updated_at'],
    rows.map((j) => [j.id, j.kind, j.payload, j.partition, j.maxAttempts, j.runAt, j.createdAt, j.createdAt]),
  );
}

/** Inserts a job unless one with its id exists (a daily job every node and restart enqueues); answers whether it did. */
export async function insertJobOnce(db: Db, job: NewJob): Promise<boolean> {
  return (
    changes(
      await db
        .insert(jobs)
        .values({ ...job, updatedAt: job.createdAt })
        .onConflictDoNothing()
        .run(),
    ) > 0
  );
}

// One per spooled message, send and webhook delivery: prepared once (src/store/prepared.ts;
// drizzle built this insert anew per call, a sixth of the SMTP spool path's CPU in bench/).
const insertJobQuery = (db: Db) =>
  db
    .insert(jobs)
    .values({
      id: sql.placeholder('id'),
      kind: sql.placeholder('kind'),
      payload: sql.placeholder('payload'),
      partition: sql.placeholder('partition'),
      maxAttempts: sql.placeholder('maxAttempts'),
      runAt: sql.placeholder('runAt'),
      status: sql.placeholder('status'),
      attempts: sql.placeholder('attempts'),
      leaseUntil: sql.placeholder('leaseUntil'),
      createdAt: sql.placeholder('createdAt'),
      updatedAt: sql.placeholder('updatedAt'),
    })
    .prepare();

// The runner looks for work after every finished job and every enqueue, so the queries are
// prepared once (src/store/prepared.ts) and each reads the index (status, run_at) in order from its
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
const leaseExpired = (db: Db) => candidates(db, leaseOver(sql.placeholder('now')));

/** Up to `limit` queued jobs due at `now`, earliest first. */
export function listDueJobs(db: Db, now: number, limit: number): Promise<JobCandidate[]> {
  return preparedQuery(db, dueQueued).all({ now, limit });
}

/** Up to `limit` running jobs whose lease ended by `now`, earliest due first. */
export function listLeaseExpiredJobs(db: Db, now: number, limit: number): Promise<JobCandidate[]> {
  return preparedQuery(db, leaseExpired).all({ now, limit });
}

const CANDIDATE_COLUMNS = 'id, kind, partition, attempts, run_at';
const expiredBranch = `SELECT ${CANDIDATE_COLUMNS} FROM jobs WHERE status = 'running' AND lease_until <= ? ORDER BY run_at LIMIT ?`;
const dueOfKindBranch = `SELECT ${CANDIDATE_COLUMNS} FROM jobs WHERE kind = ? AND status = 'queued' AND run_at <= ? ORDER BY run_at LIMIT ?`;
/** By the number of kinds: the statement's text, made once. */
const candidateStatements = new Map<number, string>();
/**
 * PostgreSQL's form: the kinds as an array, each kind's branch one LATERAL subquery. Planned
 * for each run as the other, it is planned once instead of once per kind: the UNION ALL of a
 * lease branch and seven kinds took 0.44 ms of the database's CPU to plan and 0.21 ms to run
 * (pg_stat_statements with track_planning, bench (o) at 6,000 messages).
 */
const CANDIDATES_LATERAL = `${PLAN_EACH_TIME}SELECT * FROM (${expiredBranch}) AS b0
  UNION ALL SELECT d.* FROM unnest(CAST(? AS text[])) AS k(kind)
  CROSS JOIN LATERAL (SELECT ${CANDIDATE_COLUMNS} FROM jobs WHERE jobs.kind = k.kind AND status = 'queued' AND run_at <= ? ORDER BY run_at LIMIT ?) AS d`;

/**
 * What a claim looks at, in one statement: up to `limit` running jobs whose lease ended by
 * `now`, and for each of `kinds` up to `limit` of its queued jobs due at `now`, earliest due
 * first within each. Each branch reads its own index range as the separate queries did (one
 * per kind, so a backlog of one kind cannot hide another's); one statement instead of one per
 * kind and one for leases is one round trip per claim on PostgreSQL, and on SQLite a claim's
 * reads cost a fifth of the CPU they did per send in bench/ scenario (c). Planned for each run
 * on PostgreSQL (PLAN_EACH_TIME): the generic plan took 2.0–2.1 ms a claim in bench (o) at 6,000
 * messages (pg_stat_statements, 1,025 and 1,439 claims), planned with its values 0.26–0.28 ms.
 */
export async function listClaimCandidates(db: Db, now: number, kinds: string[], limit: number): Promise<JobCandidate[]> {
  const params: unknown[] = [now, limit];
  let source: string | undefined;
  if (dialectOf(db) === 'postgres') {
    source = CANDIDATES_LATERAL;
    params.push(kinds, now, limit);
  } else {
    source = candidateStatements.get(kinds.length);
    if (!source) {
      // Each branch a subquery: ORDER BY and LIMIT apply to it alone (both engines want the alias).
      const branches = [expiredBranch, ...kinds.map(() => dueOfKindBranch)].map((b, i) => `SELECT * FROM (${b}) AS b${i}`);
      candidateStatements.set(kinds.length, (source = PLAN_EACH_TIME + branches.join(' UNION ALL ')));
    }
    for (const kind of kinds) params.push(kind, now, limit);
  }
  const rows = await rawRows<[string, string, string, number, number]>(db, source, params);
  return rows.map(([id, kind, partition, attempts, runAt]) => ({ id, kind, partition, attempts, runAt }));
}

/**
 * The first partition after `after` (every partition, the empty one included, when null) with
 * a queued job of `kind`: one seek in jobs_kind_partition_due, however many jobs a partition
 * holds, so a claim can step past a partition whose backlog it cannot take (claimDue).
 */
export async function nextQueuedPartition(db: Db, kind: string, after: string | null): Promise<string | undefined> {
  const [row] = await rawRows<[string]>(db, `SELECT partition FROM jobs WHERE kind = ? AND status = 'queued' AND partition ${after === null ? '>=' : '>'} ? ORDER BY partition LIMIT 1`, [
    kind,
    after ?? '',
  ]);
  return row?.[0];
}

/** Up to `limit` queued jobs of one partition of `kind` due at `now`, earliest first. */
export async function listDueOfPartition(db: Db, kind: string, partition: string, now: number, limit: number): Promise<JobCandidate[]> {
  const rows = await rawRows<[string, string, string, number, number]>(
    db,
    `SELECT ${CANDIDATE_COLUMNS} FROM jobs WHERE kind = ? AND status = 'queued' AND partition = ? AND run_at <= ? ORDER BY run_at LIMIT ?`,
    [kind, partition, now, limit],
  );
  return rows.map(([id, k, p, attempts, runAt]) => ({ id, kind: k, partition: p, attempts, runAt }));
}

/**
 * Claims the listed jobs still as they were read (another process, the CLI, may have changed
 * them): one statement for all jobs of a claim that had the same attempts and get the same
 * retry time, not one per job (a round trip and a statement's work on both sides each).
 * Planned for each run (PLAN_EACH_TIME), as lockFreeJobs is: a generic plan made while the table
 * was small scanned it whole as it grew (pg_stat_statements, bench (o): 1.35 ms a claim). The
 * state test is a CASE, which no index serves: written as `(status = 'queued' AND run_at <= ?)
 * OR …`, SQLite read it through jobs_due, every queued job due (a burst's whole backlog) for
 * each claim, instead of the listed ids' primary keys (0.6 ms a claim of 7 jobs at a backlog of
 * 3,000; test/unit/job-claim-plan.test.ts holds the plan).
 */
const JOB_COLUMNS = tableColumns<JobRow>(jobs);
const CLAIM_LISTED = `${PLAN_EACH_TIME}UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, run_at = ?, updated_at = ?
  WHERE id IN (SELECT value FROM json_each(?)) AND attempts = ? AND CASE status WHEN 'queued' THEN run_at <= ? WHEN 'running' THEN lease_until <= ? ELSE false END
  RETURNING ${JOB_COLUMNS.list}`;

export interface JobClaim {
  ids: string[];
  /** The attempts the jobs had when they were read: a job changed since is not claimed. */
  attempts: number;
  now: number;
  leaseUntil: number;
  /** When they are due again should this attempt not finish. */
  runAt: number;
  updatedAt: string;
}

/** Marks the listed jobs running (one more attempt) while they are still due as read; the rows of those it did, in no order. */
export async function claimJobs(db: Db, c: JobClaim): Promise<JobRow[]> {
  const rows = await rawRows<unknown[]>(db, CLAIM_LISTED, [c.leaseUntil, c.runAt, c.updatedAt, JSON.stringify(c.ids), c.attempts, c.now, c.now]);
  return rows.map(JOB_COLUMNS.row);
}

/**
 * PostgreSQL only, inside a transaction: locks the jobs of `ids` no other transaction holds and
 * answers their ids (FOR UPDATE SKIP LOCKED: a row another node is claiming is left to it).
 * Planned for each run (PLAN_EACH_TIME), as listMessageBodies is: a generic plan made while the
 * table was small scanned every job for each claim (bench (o), 10,000 messages: 4.3 ms a claim).
 */
export async function lockFreeJobs(db: Db, ids: string[]): Promise<string[]> {
  const rows = await rawRows<[string]>(db, `${PLAN_EACH_TIME}SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?)) FOR UPDATE SKIP LOCKED`, [JSON.stringify(ids)]);
  return rows.map(([id]) => id);
}

/** Jobs running under a lease that lasts past `now`, counted per kind and partition (of `partitions`). */
export function countRunningByPartition(db: Db, now: number, partitions: string[]): Promise<Array<[kind: string, partition: string, n: number]>> {
  return rawRows<[string, string, number]>(
    db,
    "SELECT kind, partition, count(*) FROM jobs WHERE status = 'running' AND lease_until > ? AND partition IN (SELECT value FROM json_each(?)) GROUP BY kind, partition",
    [now, JSON.stringify(partitions)],
  );
}

/** Sets the lease of the running jobs of `ids` to end at `leaseUntil`; answers how many. */
export function renewJobLeases(db: Db, ids: string[], leaseUntil: number): Promise<number> {
  return rawRun(db, "UPDATE jobs SET lease_until = ? WHERE status = 'running' AND id IN (SELECT value FROM json_each(?))", [leaseUntil, JSON.stringify(ids)]);
}

/** A job's end (or its return to the queue); null keeps a column as it is. */
export interface JobFinish {
  status: string;
  lastError: string | null;
  runAt: number | null;
  finishedAt: string | null;
  updatedAt: string;
}

/** Records an attempt's result and drops the lease. */
export async function updateJobOutcome(db: Db, id: string, finish: JobFinish): Promise<void> {
  await preparedQuery(db, finishOne).run({ ...finish, id });
}

/**
 * Records the same result for the listed jobs and drops their leases: one statement for the
 * outcomes of a moment that came out alike (finishJobsTogether). On PostgreSQL the rows are
 * locked in the order of their ids, as the primary key is probed in that order.
 */
export async function updateJobOutcomes(db: Db, ids: string[], f: JobFinish): Promise<void> {
  await rawRun(db, FINISH_LISTED, [f.status, f.lastError, f.runAt, f.finishedAt, f.updatedAt, JSON.stringify(ids)]);
}

/** Planned for each run (PLAN_EACH_TIME), as CLAIM_LISTED is. */
const FINISH_LISTED = `${PLAN_EACH_TIME}UPDATE jobs SET status = ?, lease_until = NULL, last_error = coalesce(?, last_error), run_at = coalesce(?, run_at),
  finished_at = coalesce(?, finished_at), updated_at = ? WHERE id IN (SELECT value FROM json_each(?))`;

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

/** Every running job back to queued, due by `now` at the latest; answers how many. */
export async function requeueRunningJobs(db: Db, now: Date): Promise<number> {
  const r = await db
    .update(jobs)
    .set({ status: 'queued', leaseUntil: null, runAt: sql`CASE WHEN ${jobs.runAt} < ${now.getTime()} THEN ${jobs.runAt} ELSE ${now.getTime()} END`, updatedAt: now.toISOString() })
    .where(eq(jobs.status, 'running'))
    .run();
  return changes(r);
}

/** Deletes the jobs that finished (done or failed) by `cutoff`, except failed ones holding spooled mail; answers how many. */
export async function deleteFinishedJobs(db: Db, cutoff: string): Promise<number> {
  const r = await db
    .delete(jobs)
    // A failed job whose message bytes are still spooled (src/domain/inbound/spool.ts) is kept: those
    // bytes are mail answered 250, waiting for `mailroom queue --retry`. A done job's spooled row,
    // if it is still there, is its message's stored source, which does not need the job.
    .where(and(inArray(jobs.status, ['done', 'failed']), lte(jobs.finishedAt, cutoff), sql`(${jobs.status} = 'done' OR NOT EXISTS (SELECT 1 FROM spooled_messages WHERE job_id = ${jobs.id}))`))
    .run();
  return changes(r);
}

/**
 * The earliest due time of a queued job after `after` and the earliest end of a running job's
 * lease after it (epoch ms, null for none), in one statement: the runner asks after every claim.
 */
export async function findNextWakeTimes(db: Db, after: number): Promise<{ queued: number | null; lease: number | null }> {
  const [row] = await rawRows<[number | null, number | null]>(
    db,
    "SELECT (SELECT min(run_at) FROM jobs WHERE status = 'queued' AND run_at > ?), (SELECT min(lease_until) FROM jobs WHERE status = 'running' AND lease_until > ?)",
    [after, after],
  );
  return { queued: row?.[0] ?? null, lease: row?.[1] ?? null };
}

/** Jobs in one of `statuses`, earliest due first. */
export function listJobsByStatus(db: Db, statuses: string[], limit: number): Promise<JobRow[]> {
  return db.select().from(jobs).where(inArray(jobs.status, statuses)).orderBy(asc(jobs.runAt)).limit(limit).all();
}

export function findJobById(db: Db, id: string): Promise<JobRow | undefined> {
  return db.select().from(jobs).where(eq(jobs.id, id)).get();
}

/** Queued and running jobs of `kind`. */
export async function countUnfinishedJobsOfKind(db: Db, kind: string): Promise<number> {
  return (await db
    .select({ n: sql<number>`count(*)` })
    .from(jobs)
    .where(sql`${jobs.kind} = ${kind} AND ${jobs.status} IN ('queued', 'running')`)
    .get())!.n;
}

/** The payloads and attempt budgets of the queued and running jobs of `kind`. */
export function listUnfinishedJobsOfKind(db: Db, kind: string): Promise<Array<Pick<JobRow, 'payload' | 'maxAttempts'>>> {
  return db
    .select({ payload: jobs.payload, maxAttempts: jobs.maxAttempts })
    .from(jobs)
    .where(and(eq(jobs.kind, kind), inArray(jobs.status, ['queued', 'running'])));
}

/** The job queued again as new: no attempts made, due at `now`. */
export async function requeueJob(db: Db, id: string, now: Date): Promise<void> {
  await db.update(jobs).set({ status: 'queued', attempts: 0, runAt: now.getTime(), leaseUntil: null, finishedAt: null, updatedAt: now.toISOString() }).where(eq(jobs.id, id)).run();
}

/** The queued jobs of `kind` whose payload names message `messageId` become done, with `reason` as their last error. */
export async function retireQueuedJobsOfMessage(db: Db, kind: string, messageId: string, now: Date, reason: string): Promise<void> {
  await db
    .update(jobs)
    .set({ status: 'done', lastError: reason, leaseUntil: null, finishedAt: now.toISOString(), updatedAt: now.toISOString() })
    .where(and(eq(jobs.kind, kind), eq(jobs.status, 'queued'), sql`json_extract(${jobs.payload}, '$.messageId') = ${messageId}`))
    .run();
}
