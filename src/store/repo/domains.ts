// Storage of custom domains: reads and writes the `domains` table for
// src/domain/domains/domains.ts (adding, verifying, listing, deleting) and dkim-keys.ts (the
// keys mail is signed with). Moving a deleted domain's inboxes is written by the inbox
// repository (inboxes.ts); the rules (names, DNS checks, statuses) stay in the domain.
import { and, count, desc, eq, isNull, lte, ne, or, sql } from 'drizzle-orm';
import { domains } from '../schema.ts';
import { PLAN_EACH_TIME, rawRows, type Db } from '../store.ts';

export type DomainRow = typeof domains.$inferSelect;

/**
 * Several accounts may claim one name until one claim is verified (the partial unique index
 * domains_domain_verified): a lookup by name answers the verified claim when there is one, else
 * the oldest.
 */
const verifiedFirst = [desc(sql`${domains.sendingStatus} = 'verified'`), domains.createdAt, domains.id];
const byName = (name: string) => eq(domains.domain, name);

export async function insertDomain(db: Db, row: DomainRow): Promise<void> {
  await db.insert(domains).values(row).run();
}

export function findDomainById(db: Db, id: string): Promise<DomainRow | undefined> {
  return db.select().from(domains).where(eq(domains.id, id)).get();
}

/** The domain named `name` (stored lowercase, without the trailing dot): its verified claim first. */
export function findDomainByName(db: Db, name: string): Promise<DomainRow | undefined> {
  return db
    .select()
    .from(domains)
    .where(byName(name))
    .orderBy(...verifiedFirst)
    .get();
}

/** The claim of `name` verified for sending, by whichever account, other than `exceptId`. */
export function findVerifiedClaim(db: Db, name: string, exceptId = ''): Promise<{ id: string; accountId: string } | undefined> {
  return db
    .select({ id: domains.id, accountId: domains.accountId })
    .from(domains)
    .where(and(byName(name), eq(domains.sendingStatus, 'verified'), ne(domains.id, exceptId)))
    .get();
}

/** The id of the account's own claim of `name`, if it has one. */
export async function findDomainIdOfAccount(db: Db, accountId: string, name: string): Promise<string | undefined> {
  return (
    await db
      .select({ id: domains.id })
      .from(domains)
      .where(and(byName(name), eq(domains.accountId, accountId)))
      .get()
  )?.id;
}

/** The ownership token of the domain named `name` (its verified claim first). */
export async function findDomainVerificationToken(db: Db, name: string): Promise<string | undefined> {
  return (
    await db
      .select({ t: domains.verificationToken })
      .from(domains)
      .where(byName(name))
      .orderBy(...verifiedFirst)
      .get()
  )?.t;
}

/** The DKIM selector and public key of the domain named `name` (what its DNS record publishes; its verified claim first). */
export function findDomainPublicKey(db: Db, name: string): Promise<{ selector: string; publicKey: string } | undefined> {
  return db
    .select({ selector: domains.dkimSelector, publicKey: domains.dkimPublicKey })
    .from(domains)
    .where(byName(name))
    .orderBy(...verifiedFirst)
    .get();
}

/** The DKIM selector and private key of the domain named `name` (what its mail is signed with; its verified claim first). */
export function findDomainSigningKey(db: Db, name: string): Promise<{ selector: string; privateKey: string } | undefined> {
  return db
    .select({ selector: domains.dkimSelector, privateKey: domains.dkimPrivateKey })
    .from(domains)
    .where(byName(name))
    .orderBy(...verifiedFirst)
    .get();
}

/** The account's domains, newest first. */
export function listDomainsOfAccount(db: Db, accountId: string): Promise<DomainRow[]> {
  return db.select().from(domains).where(eq(domains.accountId, accountId)).orderBy(desc(domains.createdAt), desc(domains.id));
}

/**
 * The names of the domains of each of `accountIds` (an account without any is absent). Read for
 * every screened inbound message (src/domain/screening/hold.ts screenTargets), for the messages
 * of a moment at once. Planned for each run (PLAN_EACH_TIME), as the job claim is.
 */
export async function listDomainNamesOfAccounts(db: Db, accountIds: string[]): Promise<Map<string, string[]>> {
  const rows = await rawRows<[string, string]>(db, `${PLAN_EACH_TIME}SELECT account_id, domain FROM domains WHERE account_id IN (SELECT value FROM json_each(?))`, [JSON.stringify(accountIds)]);
  const names = new Map<string, string[]>();
  for (const [accountId, domain] of rows) {
    const list = names.get(accountId);
    if (list) list.push(domain);
    else names.set(accountId, [domain]);
  }
  return names;
}

export async function countDomainsOfAccount(db: Db, accountId: string): Promise<number> {
  return (await db.select({ n: count() }).from(domains).where(eq(domains.accountId, accountId)).get())!.n;
}

/** Every domain, or every domain of one account, newest first. */
export function listDomainsNewestFirst(db: Db, accountId?: string): Promise<DomainRow[]> {
  const q = db.select().from(domains);
  return (accountId ? q.where(eq(domains.accountId, accountId)) : q).orderBy(desc(domains.createdAt));
}

/**
 * The ids of the domains not verified both ways whose last check was at or before `cutoff`,
 * never-checked ones first, then the longest unchecked.
 */
export async function listDomainIdsDueForCheck(db: Db, cutoff: string): Promise<string[]> {
  const due = await db
    .select({ id: domains.id })
    .from(domains)
    .where(and(or(ne(domains.sendingStatus, 'verified'), ne(domains.receivingStatus, 'verified')), or(isNull(domains.lastCheckedAt), lte(domains.lastCheckedAt, cutoff))))
    // Never-checked ones first, on either engine (they order NULLs differently).
    .orderBy(sql`${domains.lastCheckedAt} IS NOT NULL`, domains.lastCheckedAt);
  return due.map((d) => d.id);
}

/** Sets `values` on domain `id`; answers the row as it now is, or undefined when there is none. */
export function updateDomain(db: Db, id: string, values: Partial<DomainRow>): Promise<DomainRow | undefined> {
  return db.update(domains).set(values).where(eq(domains.id, id)).returning().get();
}

export async function deleteDomainById(db: Db, id: string): Promise<void> {
  await db.delete(domains).where(eq(domains.id, id)).run();
}
