// Inboxes: one address each, on the shared domain or on a custom domain of the account that is
// verified for sending. Counters for sending live on the row; `sendsToday` counts the current
// UTC day only. Deleting an inbox removes everything under it, files included.
import type { AppContext } from '../../context.ts';
import type { Db } from '../../db/client.ts';
import { forgetIdempotentResponses } from '../accounts/idempotency.ts';
import { newId } from '../../ids.ts';
import { findDomainById, findDomainByName } from '../../store/repo/domains.ts';
import {
  claimInboxSend,
  countInboxesOfAccount,
  deleteInboxOfAccount,
  findInboxByAddress as findInboxRowByAddress,
  findInboxById,
  insertInbox,
  listInboxesNewestFirst,
  listInboxesOfAccount,
  listInboxMessageFiles,
  updateInbox,
  type InboxRow,
} from '../../store/repo/inboxes.ts';
import { isValidLocalPart, readableLocalPart, splitAddress } from '../addresses.ts';
import { BOUNCE_PREFIX, isBounceLocalPart } from '../inbound/bounce-address.ts';
import { assertInboxRoom } from '../accounts/quotas.ts';
import { AppError } from '../errors.ts';
import type { Page, PageResult } from '../pagination.ts';
import { isoNow, utcDay } from '../time.ts';
import { releaseBlobs } from '../../storage/blob-refs.ts';
import { isUniqueViolation } from '../../store/store.ts';
import { CLI_ACTOR, recordAudit } from '../audit/audit.ts';

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

  const address = `${local}@${domainName}`;
  const row: InboxRow = {
    id: newId('inb'),
    accountId,
    address,
    domainId,
    displayName: input.displayName ?? null,
    status: 'active',
    dailySendLimit: ctx.config.limits.daily_send_limit,
    sendsToday: 0,
    sendsDay: null,
    totalSent: 0,
    bounceCount: 0,
    complaintCount: 0,
    createdAt: isoNow(ctx.clock),
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

async function setField(ctx: AppContext, id: string, values: Partial<InboxRow>): Promise<Inbox> {
  const row = await updateInbox(ctx.db, id, values);
  if (!row) throw new AppError('INBOX_NOT_FOUND', `inbox ${id} not found`);
  return inboxView(ctx, row);
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
  return setField(ctx, await resolveInboxId(ctx, inbox), { dailySendLimit: limit });
}

/**
 * Counts one send against the inbox's daily limit (resetting the count on a new UTC day) and
 * its total. Throws DAILY_SEND_LIMIT_EXCEEDED when the limit is reached. Run inside the
 * transaction that stores the message.
 */
export async function countSend(tx: Db, ctx: AppContext, row: InboxRow): Promise<void> {
  const today = utcDay(ctx.clock);
  // Decided and counted by the database in one step, not from `row`: exact whatever else counts
  // at the same moment (two nodes on one database, or a count read earlier).
  if (!(await claimInboxSend(tx, row.id, today))) {
    throw new AppError('DAILY_SEND_LIMIT_EXCEEDED', `inbox ${row.address} reached its daily send limit of ${row.dailySendLimit}; it resets at midnight UTC`);
  }
}
