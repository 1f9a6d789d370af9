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
//
// Received mail is checked twice. At RCPT the envelope sender (MAIL FROM) is all there is, and
// anybody can type any address there; so once the message is in, the header From (what the
// reader sees) is checked too: a block entry matching it refuses the message, and an allow
// entry lets it in only when it matches the header From and, when the entry has `requireAuth`
// (the default), the From domain is authenticated: DMARC pass, or a passing SPF check or DKIM
// signature aligned with it (src/domain/inbound/authentication.ts). An entry without
// `requireAuth` matches the envelope sender or the header From, unauthenticated, as lists did
// before. Refused: 550 5.7.1 at the end of DATA, nothing stored.
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import {
  countListEntriesOfAccount,
  deleteListEntryOfAccount,
  findSameListEntry,
  insertListEntry,
  listApplicableListEntries,
  listListEntriesOfAccount,
  type ApplicableListEntry,
  type ListEntryRow,
} from '../../store/repo/inboxes.ts';
import { isValidDomainName, normalizeRecipient } from '../addresses.ts';
import { AppError } from '../errors.ts';
import { findInboxRow } from './inboxes.ts';
import type { Page, PageResult } from '../pagination.ts';
import { isoNow } from '../time.ts';
import { SYSTEM_ACTOR, recordAudit, type Actor } from '../audit/audit.ts';
import { changed, rememberedOf } from '../remembered.ts';

export const LIST_DIRECTIONS = ['receive', 'send'] as const;
export const LIST_KINDS = ['allow', 'block'] as const;
export type ListDirection = (typeof LIST_DIRECTIONS)[number];
export type ListKind = (typeof LIST_KINDS)[number];

export interface ListEntry {
  id: string;
  direction: ListDirection;
  kind: ListKind;
  entry: string;
  /** null: the entry applies to every inbox of the account. */
  inboxId: string | null;
  /** Receive allow entries: the sender must be authenticated for the entry to match (false on every other entry). */
  requireAuth: boolean;
  createdAt: string;
}

export interface CreateListEntryInput {
  direction: ListDirection;
  kind: ListKind;
  entry: string;
  inboxId?: string | null;
  requireAuth?: boolean;
}

export interface ListEntryFilters extends Page {
  direction?: ListDirection;
  kind?: ListKind;
  inboxId?: string;
  /** The entries of these inboxes (a key limited to several). */
  inboxIds?: readonly string[];
}

const view = (r: ListEntryRow): ListEntry => ({
  id: r.id,
  direction: r.direction as ListDirection,
  kind: r.kind as ListKind,
  entry: r.entry,
  inboxId: r.inboxId,
  requireAuth: usesAuth(r) && r.requireAuth,
  createdAt: r.createdAt,
});

/** Only receive allow entries say anything about a sender's authenticity. */
const usesAuth = (r: { direction: string; kind: string }) => r.direction === 'receive' && r.kind === 'allow';

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

// ---- API -------------------------------------------------------------------------------------

/**
 * POST /lists. Adding an entry that exists already (same inbox or whole account, direction,
 * kind and entry) changes nothing and answers it: `created` false (200 rather than 201).
 */
export async function createListEntry(ctx: AppContext, accountId: string, input: CreateListEntryInput, actor: Actor = SYSTEM_ACTOR): Promise<{ entry: ListEntry; created: boolean }> {
  const entry = normalizeEntry(input.entry);
  const inboxId = input.inboxId ?? null;
  if (input.requireAuth && !usesAuth(input)) throw new AppError('VALIDATION_ERROR', '`requireAuth`: applies to receive allow entries only');
  if (inboxId !== null) await findInboxRow(ctx, accountId, inboxId);
  const wanted = { direction: input.direction, kind: input.kind, entry, inboxId };
  const added = await ctx.store.transaction(async (tx) => {
    const existing = await findSameListEntry(tx, accountId, wanted);
    if (existing) return { entry: view(existing), created: false };
    const row: ListEntryRow = { id: newId('lst'), accountId, ...wanted, requireAuth: usesAuth(input) && input.requireAuth !== false, createdAt: isoNow(ctx.clock) };
    await insertListEntry(tx, row);
    await recordAudit(ctx, tx, accountId, actor, 'list.added', row.id, { direction: row.direction, kind: row.kind, entry: row.entry, inboxId: row.inboxId });
    return { entry: view(row), created: true };
  });
  if (added.created) changed(ctx, KIND);
  return added;
}

/** GET /lists: newest first, optionally one direction, kind or inbox (its own entries). */
export async function listListEntries(ctx: AppContext, accountId: string, opts: ListEntryFilters): Promise<PageResult<ListEntry>> {
  if (opts.inboxId !== undefined) await findInboxRow(ctx, accountId, opts.inboxId);
  const rows = await listListEntriesOfAccount(ctx.db, accountId, opts);
  const total = await countListEntriesOfAccount(ctx.db, accountId, opts);
  return { data: rows.map(view), total, limit: opts.limit, offset: opts.offset };
}

export async function deleteListEntry(ctx: AppContext, accountId: string, id: string, actor: Actor = SYSTEM_ACTOR): Promise<void> {
  await ctx.store.transaction(async (tx) => {
    const removed = await deleteListEntryOfAccount(tx, accountId, id);
    if (!removed) throw new AppError('LIST_ENTRY_NOT_FOUND', `list entry ${id} not found`);
    await recordAudit(ctx, tx, accountId, actor, 'list.removed', id);
  });
  changed(ctx, KIND);
}

// ---- the entries that apply, remembered --------------------------------------------------------

/** What one process remembers at most, counted as a list's entries plus one: a longer list is read each time. */
const REMEMBERED_SIZE = 50_000;
/** What a change of a list announces to the other processes of the database. */
const KIND = 'lists';

/**
 * The entries that apply to an inbox in `direction` (its own and the account's). Every RCPT TO
 * and every received message asks, most often of an account without lists: two statements a
 * message, remembered per (account, direction, inbox) instead, as src/domain/remembered.ts
 * says (read again after any change, and after TTL_MS whatever happens).
 */
async function applicableEntries(ctx: AppContext, accountId: string, direction: ListDirection, inboxId: string): Promise<ApplicableListEntry[]> {
  const memory = rememberedOf<ApplicableListEntry[]>(ctx, KIND, REMEMBERED_SIZE, (entries) => entries.length + 1);
  const key = `${accountId} ${direction} ${inboxId}`;
  const now = ctx.clock.now().getTime();
  const known = memory.get(key, now);
  if (known) return known;
  const generation = memory.generation;
  const entries = await listApplicableListEntries(ctx.db, accountId, direction, inboxId);
  memory.put(key, entries, generation, now);
  return entries;
}

// ---- the rules -------------------------------------------------------------------------------

/**
 * Whether the lists of `inboxId` (and of its account) let `address` through in `direction`:
 * not matched by a block entry, and matched by an allow entry when any applies.
 */
export async function listsAdmit(ctx: AppContext, accountId: string, inboxId: string, direction: ListDirection, address: string): Promise<boolean> {
  const entries = await applicableEntries(ctx, accountId, direction, inboxId);
  if (!entries.length) return true;
  if (entries.some((e) => e.kind === 'block' && entryMatches(e.entry, address))) return false;
  const allow = entries.filter((e) => e.kind === 'allow');
  return !allow.length || allow.some((e) => entryMatches(e.entry, address));
}

/** What the receive lists know of a received message's sender once its content is in. */
export interface MessageSender {
  /** The envelope sender ('' for the null sender). */
  mailFrom: string;
  /** The header From addresses. */
  from: string[];
  /** The From domain the message authenticates (AuthenticationResults.fromDomain), if any. */
  authenticatedDomain: string | undefined;
}

function allowEntryAdmits(e: ApplicableListEntry, sender: MessageSender): boolean {
  // One From address, or none can be said to be the sender's.
  const from = sender.from.length === 1 ? sender.from[0]!.toLowerCase() : undefined;
  const fromMatches = from !== undefined && entryMatches(e.entry, from);
  if (!e.requireAuth) return fromMatches || entryMatches(e.entry, sender.mailFrom);
  return fromMatches && sender.authenticatedDomain === from!.slice(from!.lastIndexOf('@') + 1);
}

/**
 * A message's From addresses, and every domain they are at or under (what a domain entry
 * matches: entryMatches), as sets built once per message: a From field can hold some 90,000
 * addresses (mailparser's 1 MB header bound), and comparing each entry with each address, for
 * each recipient inbox, took 4.1 s per inbox with 1,000 entries.
 */
const fromIndexes = new WeakMap<readonly string[], { addresses: Set<string>; domains: Set<string> }>();
function fromIndex(from: readonly string[]): { addresses: Set<string>; domains: Set<string> } {
  let index = fromIndexes.get(from);
  if (index) return index;
  index = { addresses: new Set(), domains: new Set() };
  for (const address of from) {
    const a = address.toLowerCase();
    index.addresses.add(a);
    for (let domain = a.slice(a.lastIndexOf('@') + 1); domain; domain = domain.includes('.') ? domain.slice(domain.indexOf('.') + 1) : '') index.domains.add(domain);
  }
  fromIndexes.set(from, index);
  return index;
}

/** Whether a block entry among `entries` matches one of the `from` addresses (entryMatches, one lookup per entry). */
export function blocksAny(entries: ReadonlyArray<{ kind: string; entry: string }>, from: readonly string[]): boolean {
  const index = fromIndex(from);
  return entries.some((e) => e.kind === 'block' && (e.entry.includes('@') ? index.addresses.has(e.entry) : index.domains.has(e.entry)));
}

/**
 * Whether the receive lists of `inboxId` (and its account) let a received message in, by its
 * header From and its authentication (the envelope sender passed them at RCPT already).
 */
export async function receiveListsAdmit(ctx: AppContext, accountId: string, inboxId: string, sender: MessageSender): Promise<boolean> {
  const entries = await applicableEntries(ctx, accountId, 'receive', inboxId);
  if (!entries.length) return true;
  if (blocksAny(entries, sender.from)) return false;
  const allow = entries.filter((e) => e.kind === 'allow');
  return !allow.length || allow.some((e) => allowEntryAdmits(e, sender));
}

/** The refusal (SMTP 550 5.7.1) of a sender the receive lists do not let in. */
export const senderNotAccepted = () => new AppError('FORBIDDEN', 'sender not accepted by this mailbox (blocked, or not on its allow list)');

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
  if (!(await listsAdmit(ctx, accountId, inboxId, 'receive', sender))) throw senderNotAccepted();
}
