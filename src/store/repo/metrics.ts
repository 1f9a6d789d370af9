// Storage reads of the Prometheus scrape (src/metrics.ts): the gauges' snapshot (`jobs`,
// `inboxes`, `domains`, counted by status) and the catch-up of the counters kept from the
// append-only logs (`events`, `webhook_attempts`). Read only; nothing here writes.
import { inArray, sql } from 'drizzle-orm';
import { domains, inboxes, jobs } from '../schema.ts';
import { dialectOf, rawRows, type Db } from '../store.ts';

// ---- the gauges ------------------------------------------------------------------------------

/** Jobs by kind and status, every status (done and failed until swept). */
export function countJobsByKindAndStatus(db: Db): Promise<Array<{ kind: string; status: string; n: number }>> {
  // Index-only (jobs_kind_due), whatever the number of finished jobs kept.
  return db
    .select({ kind: jobs.kind, status: jobs.status, n: sql<number>`count(*)` })
    .from(jobs)
    .groupBy(jobs.kind, jobs.status);
}

/** Queued and running jobs by kind and status: the oldest's creation time, and how many are due at `nowMs`. */
export function summarizeLiveJobs(db: Db, nowMs: number): Promise<Array<{ kind: string; status: string; oldest: string | null; due: number }>> {
  // Only the live jobs are read row by row (jobs_due index on status).
  return db
    .select({
      kind: jobs.kind,
      status: jobs.status,
      oldest: sql<string | null>`min(${jobs.createdAt})`,
      due: sql<number>`sum(case when ${jobs.status} = 'queued' and ${jobs.runAt} <= ${nowMs} then 1 else 0 end)`,
    })
    .from(jobs)
    .where(inArray(jobs.status, ['queued', 'running']))
    .groupBy(jobs.kind, jobs.status);
}

export function countInboxesByStatus(db: Db): Promise<Array<{ status: string; n: number }>> {
  return db
    .select({ status: inboxes.status, n: sql<number>`count(*)` })
    .from(inboxes)
    .groupBy(inboxes.status);
}

export function countDomainsBySendingStatus(db: Db): Promise<Array<{ status: string; n: number }>> {
  return db
    .select({ status: domains.sendingStatus, n: sql<number>`count(*)` })
    .from(domains)
    .groupBy(domains.sendingStatus);
}

// ---- the log counters ------------------------------------------------------------------------
//
// A position in a log table orders its rows as they were added. SQLite: the rowid, given in
// insert order. PostgreSQL has none, and there the rows' ids (time-ordered) stand in: a row
// committed late by another node with an earlier id is not counted.

export type LogTable = 'events' | 'webhook_attempts';
export type LogPosition = number | string;

const positionColumn = (db: Db) => (dialectOf(db) === 'sqlite' ? 'rowid' : 'id');

/** A position before every row of a log table. */
export const startOfLog = (db: Db): LogPosition => (dialectOf(db) === 'sqlite' ? 0 : '');

/** The position of the table's last row; null when it is empty. */
export async function findLastLogPosition(db: Db, table: LogTable): Promise<LogPosition | null> {
  const position = positionColumn(db);
  const [[max]] = await rawRows<[LogPosition | null]>(db, `SELECT max(${position}) FROM ${table}`);
  return max;
}

/** The position `rows` rows after `after` (an index range read), if it is at or before `max`. */
export async function findLogPositionAfter(db: Db, table: LogTable, after: LogPosition, max: LogPosition, rows: number): Promise<LogPosition | undefined> {
  const position = positionColumn(db);
  const [end] = await rawRows<[LogPosition]>(db, `SELECT ${position} FROM ${table} WHERE ${position} > ? AND ${position} <= ? ORDER BY ${position} LIMIT 1 OFFSET ${rows - 1}`, [after, max]);
  return end?.[0];
}

/** The rows after position `after` up to `to` (included), counted by the values of `column`. */
export function countLogRowsBetween(db: Db, table: LogTable, column: string, after: LogPosition, to: LogPosition): Promise<Array<[string, number]>> {
  const position = positionColumn(db);
  return rawRows<[string, number]>(db, `SELECT ${column}, count(*) FROM ${table} WHERE ${position} > ? AND ${position} <= ? GROUP BY ${column}`, [after, to]);
}
