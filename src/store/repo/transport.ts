// Storage of outbound transport security: cached MTA-STS policies and TLS-RPT session counts
// (src/outbound/mta-sts.ts, src/outbound/tls-rpt.ts hold the rules).
import { asc, eq, lte, sql } from 'drizzle-orm';
import { mtaStsPolicies, tlsResults } from '../schema.ts';
import type { Db } from '../store.ts';

export type MtaStsPolicyRow = typeof mtaStsPolicies.$inferSelect;
export type TlsResultRow = typeof tlsResults.$inferSelect;

export function findMtaStsPolicy(db: Db, domain: string): Promise<MtaStsPolicyRow | undefined> {
  return db.select().from(mtaStsPolicies).where(eq(mtaStsPolicies.domain, domain)).get();
}

export async function saveMtaStsPolicy(db: Db, row: MtaStsPolicyRow): Promise<void> {
  await db
    .insert(mtaStsPolicies)
    .values(row)
    .onConflictDoUpdate({ target: mtaStsPolicies.domain, set: { policyId: row.policyId, policy: row.policy, expiresAt: row.expiresAt } })
    .run();
}

export async function deleteMtaStsPolicy(db: Db, domain: string): Promise<void> {
  await db.delete(mtaStsPolicies).where(eq(mtaStsPolicies.domain, domain)).run();
}

/** Adds `sessions` to each row's counter (creating it), keeping the latest policy and detail. */
export async function addTlsResults(db: Db, rows: TlsResultRow[]): Promise<void> {
  for (const row of rows) {
    await db
      .insert(tlsResults)
      .values(row)
      .onConflictDoUpdate({
        target: [tlsResults.day, tlsResults.policyDomain, tlsResults.policyType, tlsResults.resultType, tlsResults.receivingMx, tlsResults.receivingIp],
        set: {
          sessions: sql`${tlsResults.sessions} + excluded.sessions`,
          policyStrings: sql`excluded.policy_strings`,
          mxHosts: sql`excluded.mx_hosts`,
          detail: sql`coalesce(excluded.detail, ${tlsResults.detail})`,
        },
      })
      .run();
  }
}

/** Every row of days up to `day` (reports of days a stopped appliance missed go out too). */
export function listTlsResultsUpTo(db: Db, day: string): Promise<TlsResultRow[]> {
  return db.select().from(tlsResults).where(lte(tlsResults.day, day)).orderBy(asc(tlsResults.day), asc(tlsResults.policyDomain)).all();
}

export async function deleteTlsResultsUpTo(db: Db, day: string): Promise<void> {
  await db.delete(tlsResults).where(lte(tlsResults.day, day)).run();
}
