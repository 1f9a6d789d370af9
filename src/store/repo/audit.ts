// Storage of the audit log: reads and writes the `audit_log` table for src/domain/audit/audit.ts.
import { and, desc, eq, lt } from 'drizzle-orm';
import { auditLog } from '../schema.ts';
import { changes, type Db } from '../store.ts';

export type AuditRow = typeof auditLog.$inferSelect;

export async function insertAuditEntry(db: Db, row: AuditRow): Promise<void> {
  await db.insert(auditLog).values(row).run();
}

/** The account's entries, newest first (ids are time-ordered); only `action`, only older than entry `before`. */
export function listAuditEntries(db: Db, accountId: string, opts: { action?: string; before?: string; limit: number }): Promise<AuditRow[]> {
  const conds = [eq(auditLog.accountId, accountId)];
  if (opts.action) conds.push(eq(auditLog.action, opts.action));
  if (opts.before) conds.push(lt(auditLog.id, opts.before));
  return db
    .select()
    .from(auditLog)
    .where(and(...conds))
    .orderBy(desc(auditLog.id))
    .limit(opts.limit);
}

/** Deletes the entries written before `cutoff`; answers how many. */
export async function deleteAuditEntriesCreatedBefore(db: Db, cutoff: string): Promise<number> {
  return changes(await db.delete(auditLog).where(lt(auditLog.createdAt, cutoff)).run());
}
