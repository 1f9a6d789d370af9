// Custom domains: adding one (DKIM key, ownership token, the records to publish), verifying it
// against DNS (rules in domain-check.ts), listing and deleting it. Deleting moves the domain's
// inboxes to the shared domain and keeps their messages.
import { domainToASCII } from 'node:url';
import type { AppContext } from '../../context.ts';
import type { Tx } from '../../store/client.ts';
import { newId, randomToken } from '../../ids.ts';
import {
  countDomainsOfAccount,
  deleteDomainById,
  findDomainById,
  findDomainByName,
  findDomainIdOfAccount,
  findDomainVerificationToken,
  findVerifiedClaim,
  insertDomain,
  listDomainIdsDueForCheck,
  listDomainsNewestFirst,
  listDomainsOfAccount,
  updateDomain,
  type DomainRow,
} from '../../store/repo/domains.ts';
import { findInboxIdByAddress, listInboxesOfDomain, updateInboxAddress } from '../../store/repo/inboxes.ts';
import { isValidDomainName } from '../addresses.ts';
import { generateDkimKeyPair, isSharedDomain, newSelector, publishedKeyFor } from './dkim-keys.ts';
import {
  checkRecords,
  normalizeHost,
  observeRecords,
  planRecords,
  receivingRecords,
  receivingStatusFrom,
  sendingRecords,
  sendingStatusFrom,
  type DnsRecord,
  type RecordCheck,
  type RecordPlan,
} from './domain-check.ts';
import { AppError } from '../errors.ts';
import { isUniqueViolation } from '../../store/store.ts';
import { recordEvent } from '../events/events.ts';
import { isoNow } from '../time.ts';

export type { DomainRow };

export interface Domain {
  id: string;
  domain: string;
  sendingStatus: string;
  receivingStatus: string;
  /** Backward-compatible alias of sendingStatus (api-spec). */
  verificationStatus: string;
  sendingDnsRecords: DnsRecord[];
  receivingDnsRecords: DnsRecord[];
  dnsRecords: DnsRecord[];
  sendingVerifiedAt: string | null;
  receivingVerifiedAt: string | null;
  /** When DNS was last asked (verify or the background re-check); null before the first check. */
  lastCheckedAt: string | null;
  /** What the last check could not find out (DNS timeout, SERVFAIL); statuses were left as they were. */
  lastCheckError: string | null;
  createdAt: string;
}

/** The verify answer: the Domain plus what DNS showed for each record. */
export interface VerifiedDomain extends Domain {
  dnsCheck: RecordCheck[];
}

function planFor(ctx: AppContext, row: DomainRow): RecordPlan {
  return planRecords({
    domain: row.domain,
    hostname: ctx.config.hostname,
    selector: row.dkimSelector,
    publicKey: row.dkimPublicKey,
    token: row.verificationToken,
    mtaStsMode: ctx.config.inbound.mta_sts_mode,
  });
}

export function domainView(ctx: AppContext, row: DomainRow): Domain {
  const plan = planFor(ctx, row);
  const sending = sendingRecords(plan);
  const receiving = receivingRecords(plan);
  return {
    id: row.id,
    domain: row.domain,
    sendingStatus: row.sendingStatus,
    receivingStatus: row.receivingStatus,
    verificationStatus: row.sendingStatus,
    sendingDnsRecords: sending,
    receivingDnsRecords: receiving,
    dnsRecords: [...sending, ...receiving],
    sendingVerifiedAt: row.sendingVerifiedAt,
    receivingVerifiedAt: row.receivingVerifiedAt,
    lastCheckedAt: row.lastCheckedAt,
    lastCheckError: row.lastCheckError,
    createdAt: row.createdAt,
  };
}

/** Longest label mailroom puts in front of a domain: `<selector>._domainkey.` (RFC 1035: 253). */
const LONGEST_PREFIX = 'mr000000._domainkey.'.length;

/**
 * Lowercase A-label form without the trailing dot; IDNs are converted to punycode (RFC 5891).
 * Refuses anything that is not a host name with at least two labels and a non-numeric TLD.
 */
export function normalizeDomainName(raw: string): string {
  let name = raw.trim().replace(/\.$/, '');
  if (/[^\x00-\x7f]/.test(name)) name = domainToASCII(name);
  name = name.toLowerCase();
  const tld = name.slice(name.lastIndexOf('.') + 1);
  if (!name || !isValidDomainName(name) || /^\d+$/.test(tld)) {
    throw new AppError('VALIDATION_ERROR', '`domain`: must be a domain name such as example.com or mail.example.com');
  }
  if (name.length + LONGEST_PREFIX > 253) {
    throw new AppError('VALIDATION_ERROR', `\`domain\`: too long; its DKIM record name would exceed 253 characters`);
  }
  return name;
}

/**
 * A name is taken for `accountId` when it is the shared domain, when this account claimed it
 * already, or when another account's claim of it is verified. An unverified claim blocks
 * nobody: squatting a name would otherwise shut its real owner out for ever. Of several claims,
 * the first to be verified (its own ownership and DKIM records published) wins; see applyCheck.
 */
async function refuseTaken(ctx: AppContext, accountId: string, name: string): Promise<void> {
  if (isSharedDomain(ctx, name)) throw new AppError('DOMAIN_EXISTS', `${name} is this appliance's shared domain`);
  if (await findDomainIdOfAccount(ctx.db, accountId, name)) throw new AppError('DOMAIN_EXISTS', `domain ${name} has already been added`);
  if (await findVerifiedClaim(ctx.db, name)) throw verifiedElsewhere(name);
}

const verifiedElsewhere = (name: string) => new AppError('DOMAIN_EXISTS', `domain ${name} is verified by another account`);

export async function addDomain(ctx: AppContext, accountId: string, rawName: string): Promise<Domain> {
  const name = normalizeDomainName(rawName);
  await refuseTaken(ctx, accountId, name);
  const pair = await generateDkimKeyPair();
  const row: DomainRow = {
    id: newId('dom'),
    accountId,
    domain: name,
    dkimSelector: newSelector(ctx.clock.now()),
    dkimPrivateKey: pair.privateKey,
    dkimPublicKey: pair.publicKey,
    verificationToken: randomToken(32),
    sendingStatus: 'pending',
    receivingStatus: 'pending',
    sendingVerifiedAt: null,
    receivingVerifiedAt: null,
    lastCheckedAt: null,
    lastCheckError: null,
    createdAt: isoNow(ctx.clock),
  };
  try {
    await insertDomain(ctx.db, row);
  } catch (err) {
    // Another request added the same name while the key was being generated.
    if (isUniqueViolation(err)) throw new AppError('DOMAIN_EXISTS', `domain ${name} has already been added`);
    throw err;
  }
  return domainView(ctx, row);
}

/** The domain row `id` of `accountId` (null = any account: the operator's CLI). */
export async function findDomainRow(ctx: AppContext, accountId: string | null, id: string): Promise<DomainRow> {
  const row = await findDomainById(ctx.db, id);
  // Another account's domain is reported exactly like a missing one.
  if (!row || (accountId !== null && row.accountId !== accountId)) throw new AppError('DOMAIN_NOT_FOUND', `domain ${id} not found`);
  return row;
}

/** CLI lookup: a domain id or a domain name. */
export async function findDomainByIdOrName(ctx: AppContext, idOrName: string): Promise<DomainRow> {
  if (idOrName.startsWith('dom_')) return findDomainRow(ctx, null, idOrName);
  let name = idOrName.trim().toLowerCase().replace(/\.$/, '');
  try {
    name = normalizeDomainName(idOrName);
  } catch {
    // Not a valid name: it cannot match a stored one either; answered as not found below.
  }
  const row = await findDomainByName(ctx.db, name);
  if (!row) throw new AppError('DOMAIN_NOT_FOUND', `domain ${idOrName} not found`);
  return row;
}

export async function getDomain(ctx: AppContext, accountId: string, id: string): Promise<Domain> {
  return domainView(ctx, await findDomainRow(ctx, accountId, id));
}

export async function listDomains(ctx: AppContext, accountId: string): Promise<{ data: Domain[]; total: number }> {
  const rows = await listDomainsOfAccount(ctx.db, accountId);
  const total = await countDomainsOfAccount(ctx.db, accountId);
  return { data: rows.map((r) => domainView(ctx, r)), total };
}

/** Every domain of every account, or of one (CLI). */
export async function listAllDomains(ctx: AppContext, accountId?: string): Promise<Array<Domain & { accountId: string }>> {
  const rows = await listDomainsNewestFirst(ctx.db, accountId);
  return rows.map((r) => ({ ...domainView(ctx, r), accountId: r.accountId }));
}

const roleState = (checks: RecordCheck[], role: RecordCheck['role']) => checks.find((c) => c.role === role)?.state ?? 'missing';

/**
 * Writes the outcome of one DNS check in one transaction with the event it causes. A status
 * DNS could not determine stays as it was; `lastCheckError` says why. `domain.verified` is
 * recorded each time sending goes from not verified to verified, never on a repeat check. A
 * claim whose name another account has verified already is not verified: 409 DOMAIN_EXISTS.
 */
function applyCheck(ctx: AppContext, id: string, name: string, checks: RecordCheck[]): Promise<Domain> {
  const sending = sendingStatusFrom(roleState(checks, 'ownership'), roleState(checks, 'dkim'));
  const receiving = receivingStatusFrom(roleState(checks, 'mx'));
  const problems: string[] = [];
  const unknown = (roles: string[]) => checks.filter((c) => roles.includes(c.role) && c.state === 'unknown').map((c) => c.detail);
  if (!sending) problems.push(`sending status left unchanged: ${unknown(['ownership', 'dkim']).join('; ')}`);
  if (!receiving) problems.push(`receiving status left unchanged: ${unknown(['mx']).join('; ')}`);

  const applied = ctx.store.transaction(async (tx) => {
    // The read-compare-write below must not interleave with another process's check of this
    // name (any account's claim of it).
    await ctx.store.lock(tx, `domain:${name}`);
    const cur = await findDomainById(tx, id);
    if (!cur) throw new AppError('DOMAIN_NOT_FOUND', `domain ${id} not found`);
    const now = isoNow(ctx.clock);
    const set: Partial<DomainRow> = { lastCheckedAt: now, lastCheckError: problems.length ? problems.join('. ') : null };
    const becameVerified = sending === 'verified' && cur.sendingStatus !== 'verified';
    // Another account's claim was verified first: this one stays as it was, and says so.
    if (becameVerified && (await findVerifiedClaim(tx, name, id))) throw verifiedElsewhere(name);
    if (sending) set.sendingStatus = sending;
    if (becameVerified) set.sendingVerifiedAt = now;
    if (receiving) set.receivingStatus = receiving;
    if (receiving === 'verified' && cur.receivingStatus !== 'verified') set.receivingVerifiedAt = now;
    const updated = (await updateDomain(tx, id, set))!;
    const view = domainView(ctx, updated);
    if (becameVerified) await recordEvent(tx, ctx, updated.accountId, 'domain.verified', view);
    return view;
  });
  // Two nodes verifying two claims at once: the unique index lets one through.
  return applied.catch((err: unknown) => {
    throw isUniqueViolation(err) ? verifiedElsewhere(name) : err;
  });
}

/** Asks DNS for every record of the domain and refreshes both statuses (accountId null = CLI). */
export async function verifyDomain(ctx: AppContext, accountId: string | null, id: string): Promise<VerifiedDomain> {
  const row = await findDomainRow(ctx, accountId, id);
  const plan = planFor(ctx, row);
  const checks = checkRecords(plan, ctx.config.hostname, row.dkimPublicKey, await observeRecords(ctx.dns, plan));
  return { ...(await applyCheck(ctx, row.id, row.domain, checks)), dnsCheck: checks };
}

/** `<local>@<shared_domain>`, or `<local>-2@…`, `-3`… when taken (local part kept ≤ 64). */
async function freeSharedAddress(tx: Tx, local: string, shared: string): Promise<string> {
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? '' : `-${n}`;
    const candidate = `${local.slice(0, 64 - suffix.length)}${suffix}@${shared}`;
    if (!(await findInboxIdByAddress(tx, candidate))) return candidate;
  }
}

/**
 * Deletes the domain (accountId null = CLI). Its inboxes move to the shared domain in the same
 * transaction, keeping their ids and messages; the DNS records at the registrar stay.
 */
export function deleteDomain(ctx: AppContext, accountId: string | null, id: string): Promise<{ moved: Array<{ id: string; from: string; to: string }> }> {
  return ctx.store.transaction(async (tx) => {
    // Addresses on the shared domain are chosen below: one move at a time, on every node.
    await ctx.store.lock(tx, 'shared-domain-addresses');
    const row = await findDomainById(tx, id);
    if (!row || (accountId !== null && row.accountId !== accountId)) throw new AppError('DOMAIN_NOT_FOUND', `domain ${id} not found`);
    const shared = normalizeHost(ctx.config.shared_domain);
    const moved: Array<{ id: string; from: string; to: string }> = [];
    for (const inbox of await listInboxesOfDomain(tx, id)) {
      const local = inbox.address.slice(0, inbox.address.lastIndexOf('@'));
      const to = await freeSharedAddress(tx, local, shared);
      await updateInboxAddress(tx, inbox.id, to, null);
      moved.push({ id: inbox.id, from: inbox.address, to });
    }
    await deleteDomainById(tx, id);
    return { moved };
  });
}

// ---------------------------------------------------------------------------------------------
// Records of any domain mailroom signs for (CLI `domains show`, doctor, outbound).

export interface DomainRecords {
  domain: string;
  shared: boolean;
  sending: DnsRecord[];
  receiving: DnsRecord[];
  plan: RecordPlan;
  publicKey: string;
}

/** The records to publish for the shared domain or a custom domain; undefined for others. */
export async function dnsRecordsFor(ctx: AppContext, domainName: string): Promise<DomainRecords | undefined> {
  const name = normalizeHost(domainName);
  const shared = isSharedDomain(ctx, name);
  const key = await publishedKeyFor(ctx, name);
  if (!key) return undefined;
  const token = shared ? undefined : await findDomainVerificationToken(ctx.db, name);
  const plan = planRecords({ domain: name, hostname: ctx.config.hostname, selector: key.selector, publicKey: key.publicKey, token, mtaStsMode: ctx.config.inbound.mta_sts_mode });
  return { domain: name, shared, sending: sendingRecords(plan), receiving: receivingRecords(plan), plan, publicKey: key.publicKey };
}

/** What DNS shows now for each record (no status is changed). */
export async function inspectRecords(ctx: AppContext, records: DomainRecords): Promise<RecordCheck[]> {
  return checkRecords(records.plan, ctx.config.hostname, records.publicKey, await observeRecords(ctx.dns, records.plan));
}

// ---------------------------------------------------------------------------------------------
// Background re-check.

/**
 * Verifies every domain not verified both ways whose last check is older than `everyMs`
 * (never-checked ones first), one at a time. Returns how many were checked.
 */
export async function recheckDueDomains(ctx: AppContext, everyMs: number): Promise<number> {
  const cutoff = new Date(ctx.clock.now().getTime() - everyMs).toISOString();
  const due = await listDomainIdsDueForCheck(ctx.db, cutoff);
  let checked = 0;
  for (const id of due) {
    try {
      await verifyDomain(ctx, null, id);
      checked++;
    } catch (err) {
      // Deleted meanwhile, or a claim another account verified first: nothing to do. Anything
      // else is logged and retried next round.
      const code = (err as AppError).code;
      if (code !== 'DOMAIN_NOT_FOUND' && code !== 'DOMAIN_EXISTS') ctx.log.error('domain re-check failed', { domainId: id, error: (err as Error).message });
    }
  }
  return checked;
}
