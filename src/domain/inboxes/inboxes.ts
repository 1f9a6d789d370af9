// Inboxes: one address each, on the shared domain or on a custom domain of the account that is
// verified for sending. Counters for sending live on the row; `sendsToday` counts the current
// UTC day only. Deleting an inbox removes everything under it, files included.
import type { AppContext } from '../../context.ts';
import type { Db } from '../../store/client.ts';
import { forgetIdempotentResponses } from '../accounts/idempotency.ts';
import { newId } from '../../ids.ts';
import { findAccountById } from '../../store/repo/accounts.ts';
import { findDomainById, findDomainByName } from '../../store/repo/domains.ts';
import {
  claimAccountSend,
  claimInboxSend,
  countInboxesOfAccount,
  findAddressPolicy,
  upsertAddressPolicy,
  deleteInboxOfAccount,
  findInboxByAddress as findInboxRowByAddress,
  findInboxById,
  findRecipientByAddress as findRecipientRowByAddress,
  insertInbox,
  listInboxesNewestFirst,
  listInboxesOfAccount,
  listInboxMessageFiles,
  updateInbox,
  type InboxRow,
} from '../../store/repo/inboxes.ts';
import { isValidLocalPart, readableLocalPart, splitAddress } from '../addresses.ts';
import { BOUNCE_PREFIX, isBounceLocalPart } from '../inbound/bounce-address.ts';
import { isServiceLocalPart } from '../inbound/service-address.ts';
import { assertInboxRoom } from '../accounts/quotas.ts';
import { AppError } from '../errors.ts';
import type { Page, PageResult } from '../pagination.ts';
import { isoNow, utcDay } from '../time.ts';
import { releaseBlobs } from '../../store/blobs/blob-refs.ts';
import { isUniqueViolation } from '../../store/store.ts';
import { CLI_ACTOR, recordAudit, type Actor } from '../audit/audit.ts';
import { screeningModeOf, type ScreeningMode } from '../screening/hold.ts';

export type { InboxRow };

export interface Inbox {
  id: string;
  address: string;
  displayName: string | null;
  domainId: string | null;
  status: string;
  dailySendLimit: number;
  sendsToday: number;
  totalSent: number;
  bounceCount: number;
  complaintCount: number;
  createdAt: string;
  sendPolicy: SendPolicy;
  screening: ScreeningMode;
}

export const APPROVALS = ['none', 'first_contact', 'always'] as const;
export interface SendPolicy {
  /** Stored and shown; holding sends for a person is not enforced yet. */
  approval: (typeof APPROVALS)[number];
  /** Sends per UTC clock hour; null: none. */
  hourlySendLimit: number | null;
}

export function inboxView(ctx: AppContext, row: InboxRow): Inbox {
  return {
    id: row.id,
    address: row.address,
    displayName: row.displayName,
    domainId: row.domainId,
    status: row.status,
    dailySendLimit: row.dailySendLimit,
    sendsToday: row.sendsDay !== null && row.sendsDay === utcDay(ctx.clock) ? row.sendsToday : 0,
    totalSent: row.totalSent,
    bounceCount: row.bounceCount,
    complaintCount: row.complaintCount,
    createdAt: row.createdAt,
    sendPolicy: { approval: row.approval as SendPolicy['approval'], hourlySendLimit: row.hourlySendLimit },
    screening: screeningModeOf(ctx, row),
  };
}

export interface CreateInboxInput {
  address?: string;
  displayName?: string | null;
  domainId?: string;
}

/** The domain row an inbox may use, checked for ownership and sending verification. */
async function usableDomain(ctx: AppContext, accountId: string, where: { id?: string; name?: string }) {
  const row = where.id ? await findDomainById(ctx.db, where.id) : await findDomainByName(ctx.db, where.name!);
  if (!row || row.accountId !== accountId) return undefined;
  if (row.sendingStatus !== 'verified') {
    throw new AppError('DOMAIN_NOT_VERIFIED', `domain ${row.domain} is not verified for sending yet; publish its DNS records and verify it`);
  }
  return row;
}

export async function createInbox(ctx: AppContext, accountId: string, input: CreateInboxInput): Promise<Inbox> {
  await assertInboxRoom(ctx, accountId);
  const shared = ctx.config.shared_domain.toLowerCase();
  let local: string;
  let domainName = shared;
  let domainId: string | null = null;

  if (input.domainId) {
    const d = await usableDomain(ctx, accountId, { id: input.domainId });
    if (!d) throw new AppError('DOMAIN_NOT_FOUND', `domain ${input.domainId} not found`);
    domainName = d.domain;
    domainId = d.id;
  }

  const given = input.address?.trim().toLowerCase();
  if (!given) {
    local = readableLocalPart();
  } else if (given.includes('@')) {
    const parts = splitAddress(given);
    if (!parts) throw new AppError('INVALID_ADDRESS', `\`address\` is not a valid email address`);
    local = parts.local;
    if (domainId) {
      if (parts.domain !== domainName) {
        throw new AppError('INVALID_ADDRESS', `\`address\` must be on the domain of \`domainId\` (${domainName})`);
      }
    } else if (parts.domain !== shared) {
      const d = await usableDomain(ctx, accountId, { name: parts.domain });
      if (!d) {
        throw new AppError('INVALID_ADDRESS', `\`address\` must be on ${shared} or on a verified domain of this account`);
      }
      domainName = d.domain;
      domainId = d.id;
    }
  } else {
    local = given;
  }
  if (!isValidLocalPart(local)) {
    throw new AppError('INVALID_ADDRESS', '`address` local part may use letters, digits and . _ + - (at most 64 characters)');
  }
  if (isBounceLocalPart(local)) {
    throw new AppError('INVALID_ADDRESS', `\`address\` local parts starting with "${BOUNCE_PREFIX}" are reserved for bounce handling`);
  }
  if (isServiceLocalPart(local)) {
    throw new AppError('INVALID_ADDRESS', '`address` local parts "dmarc-reports", "tls-reports" and those starting with "unsubscribe+" are reserved for reports and unsubscribes');
  }

  const address = `${local}@${domainName}`;
  // A suspension or lowered limit set on this address by support stays with it (issue 29).
  const policy = await findAddressPolicy(ctx.db, address);
  const row: InboxRow = {
    id: newId('inb'),
    accountId,
    address,
    domainId,
    displayName: input.displayName ?? null,
    status: policy?.status ?? 'active',
    dailySendLimit: policy?.dailySendLimit ?? ctx.config.limits.daily_send_limit,
    sendsToday: 0,
    sendsDay: null,
    totalSent: 0,
    bounceCount: 0,
    complaintCount: 0,
    createdAt: isoNow(ctx.clock),
    approval: 'none',
    hourlySendLimit: policy?.hourlySendLimit ?? null,
    sendsThisHour: 0,
    sendsHour: null,
    screening: null,
  };
  try {
    await insertInbox(ctx.db, row);
  } catch (err) {
    if (isUniqueViolation(err)) {
      throw new AppError('ADDRESS_TAKEN', `address ${address} is already in use`);
    }
    throw err;
  }
  return inboxView(ctx, row);
}

export async function findInboxRow(ctx: AppContext, accountId: string, id: string): Promise<InboxRow> {
  const row = await findInboxById(ctx.db, id);
  // Another account's inbox is reported exactly like a missing one.
  if (!row || row.accountId !== accountId) throw new AppError('INBOX_NOT_FOUND', `inbox ${id} not found`);
  return row;
}

export async function getInbox(ctx: AppContext, accountId: string, id: string): Promise<Inbox> {
  return inboxView(ctx, await findInboxRow(ctx, accountId, id));
}

/** The inbox that receives mail for an address (case-insensitive), whatever its status. */
export async function findInboxByAddress(ctx: AppContext, address: string): Promise<InboxRow | undefined> {
  return findInboxRowByAddress(ctx.db, address.toLowerCase());
}

/** findInboxByAddress, with the bytes the inbox's account stores (what RCPT checks against its quota). */
export async function findRecipientByAddress(ctx: AppContext, address: string): Promise<{ inbox: InboxRow; storedBytes: number } | undefined> {
  return findRecipientRowByAddress(ctx.db, address.toLowerCase());
}

export async function listInboxes(ctx: AppContext, accountId: string, page: Page): Promise<PageResult<Inbox>> {
  const rows = await listInboxesOfAccount(ctx.db, accountId, page);
  const total = await countInboxesOfAccount(ctx.db, accountId);
  return { data: rows.map((r) => inboxView(ctx, r)), total, ...page };
}

/** Every inbox of every account, or of one (CLI). */
export async function listAllInboxes(ctx: AppContext, accountId?: string): Promise<Array<Inbox & { accountId: string }>> {
  const rows = await listInboxesNewestFirst(ctx.db, accountId);
  return rows.map((r) => ({ ...inboxView(ctx, r), accountId: r.accountId }));
}

export async function deleteInbox(ctx: AppContext, accountId: string, id: string): Promise<void> {
  await findInboxRow(ctx, accountId, id);
  // Collect the files first; rows go in one transaction (cascades remove threads, messages
  // and their attachments), then the files, so a crash leaves at worst an orphan file.
  const files = await ctx.store.transaction(async (tx) => {
    const { messageIds, files } = await listInboxMessageFiles(tx, id);
    await deleteInboxOfAccount(tx, accountId, id);
    await forgetIdempotentResponses(tx, messageIds);
    return files;
  });
  await releaseBlobs(ctx, files);
  // secure_delete zeroed the freed pages; the write-ahead log still holds the old page images
  // until it is checkpointed and truncated (a busy reader may postpone it to the next one).
  await ctx.store.checkpoint();
}

/** An inbox named by id or by address (case-insensitive), of any account (support actions). */
export async function resolveInboxId(ctx: AppContext, idOrAddress: string): Promise<string> {
  if (!idOrAddress.includes('@')) return idOrAddress;
  const row = await findInboxByAddress(ctx, idOrAddress);
  if (!row) throw new AppError('INBOX_NOT_FOUND', `inbox ${idOrAddress} not found`);
  return row.id;
}

/** Largest daily send limit accepted (the column is a 32-bit count in practice). */
export const MAX_DAILY_SEND_LIMIT = 1_000_000_000;

/** Support actions (CLI only; the API offers no way to change status or limits). Each takes an id or an address. */
export const suspendInbox = async (ctx: AppContext, inbox: string) => setStatusAudited(ctx, await resolveInboxId(ctx, inbox), 'suspended');
export const unsuspendInbox = async (ctx: AppContext, inbox: string) => setStatusAudited(ctx, await resolveInboxId(ctx, inbox), 'active');

/** A support action of the CLI on an inbox's status, with its audit entry in the same transaction. */
async function setStatusAudited(ctx: AppContext, id: string, status: 'suspended' | 'active'): Promise<Inbox> {
  const row = await ctx.store.transaction(async (tx) => {
    const updated = await updateInbox(tx, id, { status });
    if (updated) await upsertAddressPolicy(tx, updated.address, { status, updatedAt: isoNow(ctx.clock) });
    if (updated) await recordAudit(ctx, tx, updated.accountId, CLI_ACTOR, status === 'suspended' ? 'inbox.suspended' : 'inbox.unsuspended', updated.id, { address: updated.address });
    return updated;
  });
  if (!row) throw new AppError('INBOX_NOT_FOUND', `inbox ${id} not found`);
  return inboxView(ctx, row);
}
export async function setDailyLimit(ctx: AppContext, inbox: string, limit: number): Promise<Inbox> {
  // Worded like the API's validation errors: VALIDATION_ERROR naming the field.
  if (!Number.isSafeInteger(limit) || limit < 0 || limit > MAX_DAILY_SEND_LIMIT) {
    throw new AppError('VALIDATION_ERROR', `\`dailySendLimit\`: must be a whole number from 0 to ${MAX_DAILY_SEND_LIMIT}, got ${JSON.stringify(limit)}`);
  }
  const id = await resolveInboxId(ctx, inbox);
  const row = await ctx.store.transaction(async (tx) => {
    const updated = await updateInbox(tx, id, { dailySendLimit: limit });
    // Kept for the address: a re-created inbox gets it again instead of the default.
    if (updated) await upsertAddressPolicy(tx, updated.address, { dailySendLimit: limit, updatedAt: isoNow(ctx.clock) });
    return updated;
  });
  if (!row) throw new AppError('INBOX_NOT_FOUND', `inbox ${id} not found`);
  return inboxView(ctx, row);
}

export interface UpdateInboxInput {
  displayName?: string | null;
  sendPolicy?: SendPolicy;
  screening?: ScreeningMode;
}

/** PATCH /inboxes/{id} (scope `manage`): the changed fields go to the audit log in the same transaction. */
export async function updateInboxSettings(ctx: AppContext, accountId: string, id: string, input: UpdateInboxInput, actor: Actor): Promise<Inbox> {
  const row = await ctx.store.transaction(async (tx) => {
    const before = await findInboxById(tx, id);
    if (!before || before.accountId !== accountId) throw new AppError('INBOX_NOT_FOUND', `inbox ${id} not found`);
    const values: Partial<InboxRow> = {};
    if (input.displayName !== undefined && input.displayName !== before.displayName) values.displayName = input.displayName;
    if (input.sendPolicy) {
      if (input.sendPolicy.approval !== before.approval) values.approval = input.sendPolicy.approval;
      if (input.sendPolicy.hourlySendLimit !== before.hourlySendLimit) values.hourlySendLimit = input.sendPolicy.hourlySendLimit;
    }
    if (input.screening !== undefined && input.screening !== before.screening) values.screening = input.screening;
    if (!Object.keys(values).length) return before;
    const updated = (await updateInbox(tx, id, values))!;
    await recordAudit(ctx, tx, accountId, actor, 'inbox.updated', id, values);
    return updated;
  });
  return inboxView(ctx, row);
}

/**
 * Refuses a send the inbox's daily or hourly limit would refuse, from `row` as read: an early
 * check that spares building a message (API) or taking its data (SMTP MAIL FROM); countSend
 * decides, in the transaction.
 */
export function assertSendRoom(ctx: AppContext, row: InboxRow): void {
  if (inboxView(ctx, row).sendsToday >= row.dailySendLimit) {
    throw new AppError('DAILY_SEND_LIMIT_EXCEEDED', `inbox ${row.address} reached its daily send limit of ${row.dailySendLimit}; it resets at midnight UTC`);
  }
  const hour = ctx.clock.now().toISOString().slice(0, 13);
  if (row.hourlySendLimit !== null && row.sendsHour === hour && row.sendsThisHour >= row.hourlySendLimit) {
    throw new AppError('HOURLY_SEND_LIMIT_EXCEEDED', `inbox ${row.address} reached its hourly send limit of ${row.hourlySendLimit}; it resets at the start of the next UTC hour`);
  }
}

/**
 * Counts one send against the inbox's daily and hourly limits (resetting each count on a new UTC
 * day or hour), its total, and the account's daily limit. Throws HOURLY_SEND_LIMIT_EXCEEDED or
 * DAILY_SEND_LIMIT_EXCEEDED when one is reached (nothing counted: the transaction rolls back).
 * Run inside the transaction that stores the message (every sending path comes here).
 */
export async function countSend(tx: Db, ctx: AppContext, row: InboxRow): Promise<void> {
  const now = ctx.clock.now().toISOString();
  const today = now.slice(0, 10);
  const hour = now.slice(0, 13);
  // Decided and counted by the database in one step, not from `row`: exact whatever else counts
  // at the same moment (two nodes on one database, or a count read earlier).
  if (!(await claimInboxSend(tx, row.id, today, hour))) {
    const fresh = (await findInboxById(tx, row.id)) ?? row;
    const dayCount = fresh.sendsDay === today ? fresh.sendsToday : 0;
    if (dayCount >= fresh.dailySendLimit) {
      throw new AppError('DAILY_SEND_LIMIT_EXCEEDED', `inbox ${row.address} reached its daily send limit of ${fresh.dailySendLimit}; it resets at midnight UTC`);
    }
    throw new AppError('HOURLY_SEND_LIMIT_EXCEEDED', `inbox ${row.address} reached its hourly send limit of ${fresh.hourlySendLimit}; it resets at the start of the next UTC hour`);
  }
  if (!(await claimAccountSend(tx, row.accountId, today, ctx.config.limits.account_daily_send_limit))) {
    const own = (await findAccountById(tx, row.accountId))?.dailySendLimit ?? null;
    const which = own === null ? `${ctx.config.limits.account_daily_send_limit} (limits.account_daily_send_limit)` : `${own} (its own, set by support)`;
    throw new AppError('DAILY_SEND_LIMIT_EXCEEDED', `the account reached its daily send limit of ${which}, all its inboxes together; it resets at midnight UTC`);
  }
}
