// Allow and block lists (PRODUCT.md "Allow and block lists"): entries of an account, each an
// address or a domain, for one inbox or the whole account, for mail received or sent.
//
//   receive: a block entry matching the envelope sender refuses it at RCPT (550 5.7.1); when
//            any receive-allow entry applies to the inbox, only senders matching one get in.
//   send:    the same rule over every recipient of a send; a refused one is 403
//            RECIPIENT_BLOCKED naming it, and nothing is stored or queued.
//
// Block wins over allow. A domain entry matches the domain and its subdomains. Entries are
// lowercase, so matching is case-insensitive (PRODUCT.md: addresses compare that way).
import { and, count, desc, eq, isNull, or, sql, type SQL } from 'drizzle-orm';
import type { AppContext } from '../../context.ts';
import type { Db, Tx } from '../../db/client.ts';
import { preparedQuery } from '../../db/prepared.ts';
import { listEntries } from '../../db/schema.ts';
import { newId } from '../../ids.ts';
import { changes } from '../../store/store.ts';
import { isValidDomainName, normalizeRecipient } from '../addresses.ts';
import { AppError } from '../errors.ts';
import { findInboxRow } from './inboxes.ts';
import type { Page, PageResult } from '../pagination.ts';
import { isoNow } from '../time.ts';

export const LIST_DIRECTIONS = ['receive', 'send'] as const;
export const LIST_KINDS = ['allow', 'block'] as const;
export type ListDirection = (typeof LIST_DIRECTIONS)[number];
export type ListKind = (typeof LIST_KINDS)[number];

type ListEntryRow = typeof listEntries.$inferSelect;

export interface ListEntry {
  id: string;
  direction: ListDirection;
  kind: ListKind;
  entry: string;
  /** null: the entry applies to every inbox of the account. */
  inboxId: string | null;
  createdAt: string;
}

export interface CreateListEntryInput {
  direction: ListDirection;
  kind: ListKind;
  entry: string;
  inboxId?: string | null;
}

export interface ListEntryFilters extends Page {
  direction?: ListDirection;
  kind?: ListKind;
  inboxId?: string;
}

const view = (r: ListEntryRow): ListEntry => ({
  id: r.id,
  direction: r.direction as ListDirection,
  kind: r.kind as ListKind,
  entry: r.entry,
  inboxId: r.inboxId,
  createdAt: r.createdAt,
});

/**
 * An entry as stored: a full address (`someone@example.com`) or a domain (`example.com`, also
 * written `@example.com`), lowercase. Anything else is 400 naming `entry`.
 */
export function normalizeEntry(raw: string): string {
  const value = raw.trim().toLowerCase();
  const domain = value.startsWith('@') ? value.slice(1) : value;
  if (!domain.includes('@')) {
    if (isValidDomainName(domain)) return domain;
  } else {
    try {
      return normalizeRecipient('entry', value).toLowerCase();
    } catch {
      /* reported below, in the words of this field */
    }
  }
  throw new AppError('VALIDATION_ERROR', `\`entry\`: must be an email address or a domain name, got ${JSON.stringify(raw).slice(0, 100)}`);
}

/** Whether `address` (any case) is matched by `entry`: the same address, or an address at the entry's domain or below it. */
export function entryMatches(entry: string, address: string): boolean {
  const a = address.toLowerCase();
  if (entry.includes('@')) return a === entry;
  const domain = a.slice(a.lastIndexOf('@') + 1);
  return domain === entry || domain.endsWith(`.${entry}`);
}

// ---- storage: each takes the transaction (or handle) it runs on ------------------------------

async function insertEntry(tx: Tx, row: ListEntryRow): Promise<void> {
  await tx.insert(listEntries).values(row).run();
}

function sameEntry(tx: Tx, accountId: string, input: Required<CreateListEntryInput>): Promise<ListEntryRow | undefined> {
  return tx
    .select()
    .from(listEntries)
    .where(
      and(
        eq(listEntries.accountId, accountId),
        input.inboxId === null ? isNull(listEntries.inboxId) : eq(listEntries.inboxId, input.inboxId),
        eq(listEntries.direction, input.direction),
        eq(listEntries.kind, input.kind),
        eq(listEntries.entry, input.entry),
      ),
    )
    .get();
}

async function deleteEntryRow(tx: Tx, accountId: string, id: string): Promise<boolean> {
  return changes(await tx.delete(listEntries).where(and(eq(listEntries.id, id), eq(listEntries.accountId, accountId))).run()) > 0;
}

// Every RCPT TO and every send asks: prepared once (src/db/prepared.ts), one index range read.
const entriesFor = (db: Db) =>
  db
    .select({ kind: listEntries.kind, entry: listEntries.entry })
    .from(listEntries)
    .where(
      and(
        eq(listEntries.accountId, sql.placeholder('accountId')),
        eq(listEntries.direction, sql.placeholder('direction')),
        or(isNull(listEntries.inboxId), eq(listEntries.inboxId, sql.placeholder('inboxId'))),
      ),
    )
    .prepare();

// ---- API -------------------------------------------------------------------------------------

/**
 * POST /lists. Adding an entry that exists already (same inbox or whole account, direction,
 * kind and entry) changes nothing and answers it: `created` false (200 rather than 201).
 */
export async function createListEntry(ctx: AppContext, accountId: string, input: CreateListEntryInput): Promise<{ entry: ListEntry; created: boolean }> {
  const entry = normalizeEntry(input.entry);
  const inboxId = input.inboxId ?? null;
  if (inboxId !== null) await findInboxRow(ctx, accountId, inboxId);
  const wanted = { direction: input.direction, kind: input.kind, entry, inboxId };
  return ctx.store.transaction(async (tx) => {
    const existing = await sameEntry(tx, accountId, wanted);
    if (existing) return { entry: view(existing), created: false };
    const row: ListEntryRow = { id: newId('lst'), accountId, ...wanted, createdAt: isoNow(ctx.clock) };
    await insertEntry(tx, row);
    return { entry: view(row), created: true };
  });
}

/** GET /lists: newest first, optionally one direction, kind or inbox (its own entries). */
export async function listListEntries(ctx: AppContext, accountId: string, opts: ListEntryFilters): Promise<PageResult<ListEntry>> {
  if (opts.inboxId !== undefined) await findInboxRow(ctx, accountId, opts.inboxId);
  const conds: SQL[] = [eq(listEntries.accountId, accountId)];
  if (opts.direction) conds.push(eq(listEntries.direction, opts.direction));
  if (opts.kind) conds.push(eq(listEntries.kind, opts.kind));
  if (opts.inboxId !== undefined) conds.push(eq(listEntries.inboxId, opts.inboxId));
  const where = and(...conds);
  const rows = await ctx.db.select().from(listEntries).where(where).orderBy(desc(listEntries.createdAt), desc(listEntries.id)).limit(opts.limit).offset(opts.offset);
  const total = (await ctx.db.select({ n: count() }).from(listEntries).where(where).get())!.n;
  return { data: rows.map(view), total, limit: opts.limit, offset: opts.offset };
}

export async function deleteListEntry(ctx: AppContext, accountId: string, id: string): Promise<void> {
  const removed = await deleteEntryRow(ctx.db, accountId, id);
  if (!removed) throw new AppError('LIST_ENTRY_NOT_FOUND', `list entry ${id} not found`);
}

// ---- the rules -------------------------------------------------------------------------------

/**
 * Whether the lists of `inboxId` (and of its account) let `address` through in `direction`:
 * not matched by a block entry, and matched by an allow entry when any applies.
 */
export async function listsAdmit(ctx: AppContext, accountId: string, inboxId: string, direction: ListDirection, address: string): Promise<boolean> {
  const entries = await preparedQuery(ctx.db, entriesFor).all({ accountId, direction, inboxId });
  if (!entries.length) return true;
  if (entries.some((e) => e.kind === 'block' && entryMatches(e.entry, address))) return false;
  const allow = entries.filter((e) => e.kind === 'allow');
  return !allow.length || allow.some((e) => entryMatches(e.entry, address));
}

/** The first of `addresses` the send lists refuse, or undefined. */
export async function refusedRecipient(ctx: AppContext, accountId: string, inboxId: string, addresses: string[]): Promise<string | undefined> {
  for (const a of addresses) if (!(await listsAdmit(ctx, accountId, inboxId, 'send', a))) return a;
  return undefined;
}

/** Throws 403 RECIPIENT_BLOCKED naming the first recipient the send lists refuse. */
export async function assertRecipientsAllowed(ctx: AppContext, accountId: string, inboxId: string, addresses: string[]): Promise<void> {
  const refused = await refusedRecipient(ctx, accountId, inboxId, addresses);
  if (refused !== undefined) {
    throw new AppError('RECIPIENT_BLOCKED', `recipient ${refused} is refused by the send allow/block lists of this inbox or account (GET /lists?direction=send)`);
  }
}

/**
 * At RCPT TO: throws FORBIDDEN (SMTP 550 5.7.1) when the receive lists of the inbox refuse the
 * envelope sender. The null sender of bounces ('') matches no entry: an allow list keeps it out.
 */
export async function assertSenderAccepted(ctx: AppContext, accountId: string, inboxId: string, sender: string): Promise<void> {
  if (!(await listsAdmit(ctx, accountId, inboxId, 'receive', sender))) throw new AppError('FORBIDDEN', 'sender not accepted by this mailbox (blocked, or not on its allow list)');
}
