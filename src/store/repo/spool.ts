// The inbound spool's rows, for src/domain/inbound/spool.ts: the bytes of mail answered 250, kept
// as the stored source once processed (table spooled_messages, one row per `inbound` job, keyed by
// the job's id; src/store/blobs/spooled.ts),
// and the recipient inboxes a spooled envelope names (table inboxes). The job itself is in the
// job table (src/store/repo/jobs.ts).
import { eq, sql } from 'drizzle-orm';
import { preparedQuery } from '../prepared.ts';
import { spooledMessages } from '../schema.ts';
import { PLAN_EACH_TIME, insertRows, rawRows, rawRun, type Db } from '../store.ts';

// Once per spooled message each: prepared once (src/store/prepared.ts).
const insertSpooled = (db: Db) =>
  db
    .insert(spooledMessages)
    .values({ jobId: sql.placeholder('jobId'), raw: sql.placeholder('raw'), createdAt: sql.placeholder('createdAt') })
    .prepare();
const spooledRaw = (db: Db) =>
  db
    .select({ raw: spooledMessages.raw })
    .from(spooledMessages)
    .where(eq(spooledMessages.jobId, sql.placeholder('jobId')))
    .prepare();
/** Keeps the bytes of the message job `jobId` processes. */
export async function insertSpooledMessage(db: Db, jobId: string, raw: Buffer, createdAt: string): Promise<void> {
  await preparedQuery(db, insertSpooled).run({ jobId, raw, createdAt });
}

/** Keeps the bytes of several messages, one row per job, in one statement (the spool's batch). */
export async function insertSpooledMessages(db: Db, rows: Array<{ jobId: string; raw: Buffer; createdAt: string }>): Promise<void> {
  if (rows.length === 1) return insertSpooledMessage(db, rows[0].jobId, rows[0].raw, rows[0].createdAt);
  await insertRows(
    db,
    'spooled_messages',
    ['job_id', 'raw', 'created_at'],
    rows.map((r) => [r.jobId, r.raw, r.createdAt]),
  );
}

/** The spooled bytes of the jobs of `jobIds` still kept, by job id. Planned for each run (PLAN_EACH_TIME), as the job claim is. */
export async function listSpooledRaw(db: Db, jobIds: string[]): Promise<Map<string, Buffer>> {
  const rows = await rawRows<[string, Buffer]>(db, `${PLAN_EACH_TIME}SELECT job_id, raw FROM spooled_messages WHERE job_id IN (SELECT value FROM json_each(?))`, [JSON.stringify(jobIds)]);
  return new Map(rows);
}

/** The spooled bytes of job `jobId`, while they are kept. */
export async function findSpooledRaw(db: Db, jobId: string): Promise<Buffer | undefined> {
  return (await preparedQuery(db, spooledRaw).get({ jobId }))?.raw;
}

/** Deletes the spooled row of job `jobId`; answers 1, or 0 when it was not there. */
export function deleteSpooledMessage(db: Db, jobId: string): Promise<number> {
  return rawRun(db, 'DELETE FROM spooled_messages WHERE job_id = ?', [jobId]);
}

/** True while job `jobId` has spooled bytes. */
export async function spooledMessageExists(db: Db, jobId: string): Promise<boolean> {
  return (await db.select({ id: spooledMessages.jobId }).from(spooledMessages).where(eq(spooledMessages.jobId, jobId)).get()) !== undefined;
}

/** Blob keys of spooled rows kept as messages' sources: this prefix and the job id (src/store/blobs/spooled.ts). */
export const SPOOLED_SOURCE_PREFIX = 'raw/spooled/';

/**
 * Up to `limit` spooled rows, by job id after `after`, spooled before `before` (ISO), whose job is
 * gone or done and that no message names as its source (src/store/blobs/spooled.ts): what a
 * failed release left behind. A page at a time, so a large table is never read in one statement.
 */
export async function listUnnamedSpooled(db: Db, before: string, after: string, limit: number): Promise<{ ids: string[]; last: string | undefined }> {
  // The age last: most rows are named, and created_at lies past the bytes in the row (SQLite
  // would read a row's overflow pages to reach it).
  const rows = await rawRows<[string, number]>(
    db,
    `SELECT s.job_id,
            CASE WHEN NOT EXISTS (SELECT 1 FROM messages m WHERE m.raw_path = ? || s.job_id)
                  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = s.job_id AND j.status <> 'done')
                  AND s.created_at < ?
                 THEN 1 ELSE 0 END
       FROM spooled_messages s WHERE s.job_id > ? ORDER BY s.job_id LIMIT ?`,
    [SPOOLED_SOURCE_PREFIX, before, after, limit],
  );
  return { ids: rows.filter(([, unnamed]) => Number(unnamed) === 1).map(([id]) => id), last: rows.length === limit ? rows[rows.length - 1][0] : undefined };
}

/**
 * In the transaction storing job `jobId`'s message: true while its spooled row is there and no
 * message names it yet (false: the job ran twice, its lease having run out, and the other run
 * stored it; or the row went since it was read).
 */
export async function spooledSourceUnclaimed(tx: Db, jobId: string): Promise<boolean> {
  const rows = await rawRows<[number]>(tx, 'SELECT 1 FROM spooled_messages s WHERE s.job_id = ? AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.raw_path = ?)', [
    jobId,
    SPOOLED_SOURCE_PREFIX + jobId,
  ]);
  return rows.length > 0;
}
