// The inbound spool's rows, for src/domain/inbound/spool.ts: the bytes of mail answered 250 and
// not processed yet (table spooled_messages, one row per `inbound` job, keyed by the job's id),
// and the recipient inboxes a spooled envelope names (table inboxes). The job itself is in the
// job table (src/store/repo/jobs.ts).
import { eq, sql } from 'drizzle-orm';
import { preparedQuery } from '../prepared.ts';
import { spooledMessages } from '../schema.ts';
import { rawRun, type Db } from '../store.ts';

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
const deleteSpooled = (db: Db) =>
  db
    .delete(spooledMessages)
    .where(eq(spooledMessages.jobId, sql.placeholder('jobId')))
    .prepare();
/** Keeps the bytes of the message job `jobId` processes. */
export async function insertSpooledMessage(db: Db, jobId: string, raw: Buffer, createdAt: string): Promise<void> {
  await preparedQuery(db, insertSpooled).run({ jobId, raw, createdAt });
}

/** Keeps the bytes of several messages, one row per job, in one statement (the spool's batch). */
export async function insertSpooledMessages(db: Db, rows: Array<{ jobId: string; raw: Buffer; createdAt: string }>): Promise<void> {
  if (rows.length === 1) return insertSpooledMessage(db, rows[0].jobId, rows[0].raw, rows[0].createdAt);
  await rawRun(
    db,
    `INSERT INTO spooled_messages (job_id, raw, created_at) VALUES ${rows.map(() => '(?, ?, ?)').join(', ')}`,
    rows.flatMap((r) => [r.jobId, r.raw, r.createdAt]),
  );
}

/** The spooled bytes of job `jobId`, while they are kept. */
export async function findSpooledRaw(db: Db, jobId: string): Promise<Buffer | undefined> {
  return (await preparedQuery(db, spooledRaw).get({ jobId }))?.raw;
}

export async function deleteSpooledMessage(db: Db, jobId: string): Promise<void> {
  await preparedQuery(db, deleteSpooled).run({ jobId });
}

/** True while job `jobId` has spooled bytes. */
export async function spooledMessageExists(db: Db, jobId: string): Promise<boolean> {
  return (await db.select({ id: spooledMessages.jobId }).from(spooledMessages).where(eq(spooledMessages.jobId, jobId)).get()) !== undefined;
}
