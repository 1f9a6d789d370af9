// What an account holds open: GET /events/stream, long-polls (`wait`) and MCP wait_for_message
// calls each take a slot while they last. At most `[limits] streams_per_account` per account at
// once in this process (one key cannot take every connection of the server); the next is
// refused with 429 TOO_MANY_STREAMS. A slot is released once, by whoever ends first (the client
// leaving, the timeout, an error, shutdown).
//
// A slot also ends when its key is revoked or expires, within SLOT_SETTINGS.keyCheckMs plus a
// query: a timer (running only while slots are open) looks at the auth cache's generation, which
// changes on every revocation, by this process, the CLI (SQLite's data_version) or another node
// (NOTIFY); then, and every TTL_MS anyway (a row edited by hand), it reads the active keys of
// each account holding slots. Nothing is read while no key changed.
import type { AppContext } from '../../context.ts';
import { errorFields } from '../../log.ts';
import { listActiveApiKeysOfAccount } from '../../store/repo/accounts.ts';
import { authCacheOf, TTL_MS } from '../accounts/auth-cache.ts';
import type { Principal } from '../accounts/apikeys.ts';
import { AppError } from '../errors.ts';

/** How often open slots look at their keys; tests shorten it. */
export const SLOT_SETTINGS = { keyCheckMs: 2000 };

/** Who holds a slot: an account, through one of its keys. */
export type StreamOwner = Pick<Principal, 'accountId' | 'keyId'>;

export interface StreamSlot {
  /** Resolves when the key that opened the slot was revoked or expired: end the stream. */
  readonly revoked: Promise<void>;
  /** Frees the slot (idempotent). */
  release(): void;
}

interface Slot {
  keyId: string;
  /** Unix ms, learned at the first check; null: never expires. */
  expiresAt?: number | null;
  end(): void;
}

interface Slots {
  byAccount: Map<string, Set<Slot>>;
  /** Accounts with a slot whose key was not read yet. */
  unchecked: Set<string>;
  timer?: NodeJS.Timeout;
  checking: boolean;
  generation: number;
  checkedAt: number;
}

const registry = new WeakMap<AppContext, Slots>();

function slotsOf(ctx: AppContext): Slots {
  let s = registry.get(ctx);
  if (!s) registry.set(ctx, (s = { byAccount: new Map(), unchecked: new Set(), checking: false, generation: -1, checkedAt: 0 }));
  return s;
}

/** Takes a slot for `who`'s account, or throws TOO_MANY_STREAMS. */
export function openStreamSlot(ctx: AppContext, who: StreamOwner): StreamSlot {
  const slots = slotsOf(ctx);
  const limit = ctx.config.limits.streams_per_account;
  let open = slots.byAccount.get(who.accountId);
  if (open && open.size >= limit) {
    throw new AppError('TOO_MANY_STREAMS', `this account already holds ${limit} event streams, long-polls and wait_for_message calls open (limits.streams_per_account); close one first`);
  }
  if (!open) slots.byAccount.set(who.accountId, (open = new Set()));
  let revoke!: () => void;
  const revoked = new Promise<void>((resolve) => (revoke = resolve));
  const slot: Slot = { keyId: who.keyId, end: () => revoke() };
  open.add(slot);
  slots.unchecked.add(who.accountId);
  if (!slots.timer) {
    slots.timer = setInterval(() => void checkKeys(ctx, slots), SLOT_SETTINGS.keyCheckMs);
    slots.timer.unref();
  }
  let released = false;
  return {
    revoked,
    release() {
      if (released) return;
      released = true;
      open.delete(slot);
      if (open.size === 0 && slots.byAccount.get(who.accountId) === open) slots.byAccount.delete(who.accountId);
      if (slots.byAccount.size === 0 && slots.timer) {
        clearInterval(slots.timer);
        slots.timer = undefined;
      }
    },
  };
}

/** Ends the slots whose key was revoked or expired; reads keys only when one may have changed. */
async function checkKeys(ctx: AppContext, slots: Slots): Promise<void> {
  if (slots.checking) return;
  slots.checking = true;
  try {
    const now = ctx.clock.now().getTime();
    const generation = authCacheOf(ctx).current();
    const all = generation !== slots.generation || now - slots.checkedAt >= TTL_MS;
    const accounts = all ? [...slots.byAccount.keys()] : [...slots.unchecked];
    if (all) {
      slots.generation = generation;
      slots.checkedAt = now;
    }
    slots.unchecked.clear();
    for (const accountId of accounts) {
      const open = slots.byAccount.get(accountId);
      if (!open) continue;
      const active = new Map((await listActiveApiKeysOfAccount(ctx.db, accountId)).map((k) => [k.id, k.expiresAt ? Date.parse(k.expiresAt) : null]));
      for (const slot of open) slot.expiresAt = active.has(slot.keyId) ? active.get(slot.keyId) : now;
    }
    for (const open of slots.byAccount.values()) {
      for (const slot of open) if (slot.expiresAt != null && slot.expiresAt <= now) slot.end();
    }
  } catch (err) {
    // The database failed: streams go on, and the next tick reads again.
    slots.generation = -1;
    ctx.log.error('checking the keys of open streams failed', errorFields(err));
  } finally {
    slots.checking = false;
  }
}

/** The slots `accountId` holds open in this process (tests see a wait begin through it). */
export function openStreamCount(ctx: AppContext, accountId: string): number {
  return registry.get(ctx)?.byAccount.get(accountId)?.size ?? 0;
}
