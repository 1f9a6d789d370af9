// Storage of the reports receivers send about a custom domain: DMARC aggregate reports
// (dmarc_reports, dmarc_records) and TLS-RPT reports (tls_reports), for
// src/domain/domains/dmarc-reports.ts and tls-reports.ts. The rules stay there.
import { and, asc, count, desc, eq, gte, inArray, lt, sql } from 'drizzle-orm';
import { dmarcRecords, dmarcReports, messages, tlsReports } from '../schema.ts';
import { changes, rawRun, type Db } from '../store.ts';

export type DmarcReportRow = typeof dmarcReports.$inferSelect;
export type DmarcRecordRow = typeof dmarcRecords.$inferSelect;
export type TlsReportRow = typeof tlsReports.$inferSelect;

/** Stores a report and its rows; false (nothing written) when the domain has it already (same org and report id). */
export async function insertDmarcReport(db: Db, report: DmarcReportRow, records: DmarcRecordRow[]): Promise<boolean> {
  if (changes(await db.insert(dmarcReports).values(report).onConflictDoNothing().run()) === 0) return false;
  // Chunks keep each statement under SQLite's bound-parameter limit.
  for (let i = 0; i < records.length; i += 500)
    await db
      .insert(dmarcRecords)
      .values(records.slice(i, i + 500))
      .run();
  return true;
}

const num = (expr: ReturnType<typeof sql>) => sql<number>`coalesce(sum(${expr}), 0)`.mapWith(Number);
const pass = (col: typeof dmarcRecords.dkim | typeof dmarcRecords.spf) => num(sql`case when ${col} = 'pass' then ${dmarcRecords.count} else 0 end`);
/** DMARC passes when either aligned identifier passes (RFC 7489 §6.6.2). */
const dmarcPass = num(sql`case when ${dmarcRecords.dkim} = 'pass' or ${dmarcRecords.spf} = 'pass' then ${dmarcRecords.count} else 0 end`);
const disposed = (d: string) => num(sql`case when ${dmarcRecords.disposition} = ${d} then ${dmarcRecords.count} else 0 end`);

export interface DmarcTotals {
  messages: number;
  dmarcPass: number;
  dkimAligned: number;
  spfAligned: number;
  quarantined: number;
  rejected: number;
}

const totals = {
  messages: num(sql`${dmarcRecords.count}`),
  dmarcPass,
  dkimAligned: pass(dmarcRecords.dkim),
  spfAligned: pass(dmarcRecords.spf),
  quarantined: disposed('quarantine'),
  rejected: disposed('reject'),
};

const inWindow = (domainId: string, since: string) => and(eq(dmarcReports.domainId, domainId), gte(dmarcReports.beginAt, since));

/** Per UTC day (of the report's begin), oldest first. */
export function dmarcTotalsByDay(db: Db, domainId: string, since: string): Promise<Array<DmarcTotals & { day: string }>> {
  const day = sql<string>`substr(${dmarcReports.beginAt}, 1, 10)`;
  return db
    .select({ day, ...totals })
    .from(dmarcRecords)
    .innerJoin(dmarcReports, eq(dmarcRecords.reportId, dmarcReports.id))
    .where(inWindow(domainId, since))
    .groupBy(day)
    .orderBy(asc(day))
    .all();
}

/** Per sending IP, most messages first, at most `limit`. */
export function dmarcTotalsBySource(db: Db, domainId: string, since: string, limit: number): Promise<Array<DmarcTotals & { sourceIp: string }>> {
  return db
    .select({ sourceIp: dmarcRecords.sourceIp, ...totals })
    .from(dmarcRecords)
    .innerJoin(dmarcReports, eq(dmarcRecords.reportId, dmarcReports.id))
    .where(inWindow(domainId, since))
    .groupBy(dmarcRecords.sourceIp)
    .orderBy(desc(totals.messages), asc(dmarcRecords.sourceIp))
    .limit(limit)
    .all();
}

/** The reports of the window, newest first, at most `limit`. */
export function listDmarcReports(db: Db, domainId: string, since: string, limit: number): Promise<DmarcReportRow[]> {
  return db.select().from(dmarcReports).where(inWindow(domainId, since)).orderBy(desc(dmarcReports.beginAt), desc(dmarcReports.id)).limit(limit).all();
}

/** Stores a TLS-RPT report; false when the domain has it already (same org and report id). */
export async function insertTlsReport(db: Db, row: TlsReportRow): Promise<boolean> {
  return changes(await db.insert(tlsReports).values(row).onConflictDoNothing().run()) > 0;
}

/** TLS-RPT reports whose range begins at `since` or later, newest first, at most `limit`. */
export function listTlsReports(db: Db, domainId: string, since: string, limit: number): Promise<TlsReportRow[]> {
  return db
    .select()
    .from(tlsReports)
    .where(and(eq(tlsReports.domainId, domainId), gte(tlsReports.beginAt, since)))
    .orderBy(desc(tlsReports.beginAt), desc(tlsReports.id))
    .limit(limit)
    .all();
}

/** Outbound messages created since `since` that were handed to delivery (sent on, or failed there), and those of them an ARF report marked `complained` (doctor's complaint rate). */
export async function countOutcomesSince(db: Db, since: string): Promise<{ sent: number; complained: number }> {
  const rows = await db
    .select({ status: messages.status, n: count() })
    .from(messages)
    .where(and(eq(messages.direction, 'outbound'), gte(messages.createdAt, since), inArray(messages.status, ['sent', 'delivered', 'bounced', 'complained'])))
    .groupBy(messages.status)
    .all();
  const by = new Map(rows.map((r) => [r.status, Number(r.n)]));
  return { sent: [...by.values()].reduce((a, b) => a + b, 0), complained: by.get('complained') ?? 0 };
}

/** Deletes the reports (and their rows) received before `cutoff`; how many reports went. */
export async function deleteReportsReceivedBefore(db: Db, cutoff: string): Promise<number> {
  // Rows first: they need not rely on the engine's cascade.
  await rawRun(db, 'DELETE FROM dmarc_records WHERE report_id IN (SELECT id FROM dmarc_reports WHERE received_at < ?)', [cutoff]);
  const dmarc = changes(await db.delete(dmarcReports).where(lt(dmarcReports.receivedAt, cutoff)).run());
  return dmarc + changes(await db.delete(tlsReports).where(lt(tlsReports.receivedAt, cutoff)).run());
}
