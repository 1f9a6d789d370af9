// Who an API key is, kept in memory so that a request does not read the api_keys table (on
// PostgreSQL: wait for a round trip) every time. Reading the key was the largest piece of work
// an API request did beyond what a bare tinyhttp server does (bench (b), docs/performance.md).
//
// Only keys found valid are kept: an unknown, revoked or expired key is looked up in the
// database on every request, and a database that fails then still answers 503. An entry is
// dropped, and the key read again, when:
// - a key is revoked in this process (revokeApiKey empties the cache once the UPDATE is
//   committed);
// - another process committed anything to a SQLite database (the CLI revoking a key): its
//   `PRAGMA data_version` changes, read at the first lookup of each turn of the event loop;
// - another node on PostgreSQL revoked a key: revokeApiKey announces 'apikeys' (NOTIFY) and
//   every other node empties its cache when it hears it, milliseconds later;
// - it is TTL_MS old, whatever happened: the bound for a change nobody announced (a NOTIFY
//   sent while a node's LISTEN connection was down, a row edited by hand).
// A lookup that read the database before an emptying does not store what it read (generation).
import type { AppContext } from '../../context.ts';
import type { Store } from '../../store/store.ts';
import type { Scope } from './apikeys.ts';

export interface CachedKey {
  accountId: string;
  keyId: string;
  readOnly: boolean;
  scopes: ReadonlySet<Scope>;
  /** null: every inbox of the account. */
  inboxIds: ReadonlySet<string> | null;
  /** Unix ms, or null for a key that never expires. */
  expiresAt: number | null;
  /** Unix ms of the last lastUsedAt this process knows of (written at most once a second). */
  lastUsed: number;
  /** Unix ms at which the entry was read from the database. */
  filled: number;
}

export const TTL_MS = 10_000;
/** Beyond this many keys in use at once the oldest entries go (their next request reads again). */
const MAX_ENTRIES = 10_000;
/** What revokeApiKey announces to the other processes of the database. */
const SIGNAL = 'apikeys';

export class AuthCache {
  private readonly entries = new Map<string, CachedKey>();
  /** Bumped on every emptying; a fill started under another generation is not stored. */
  generation = 0;

  private readonly committedElsewhere: () => boolean;

  constructor(committedElsewhere: () => boolean) {
    this.committedElsewhere = committedElsewhere;
  }

  /** True while this turn of the event loop has looked at commits made elsewhere already. */
  private looked = false;
  private readonly lookAgain = () => {
    this.looked = false;
  };

  /** The entry of a key's SHA-256 digest, if it is still to be trusted at `now`. */
  get(digest: string, now: number): CachedKey | undefined {
    // Once per turn, not per request: the pragma is a statement step (~2.5 µs, 6% of a GET's
    // CPU in bench (b)), and the requests of one turn arrived together, before or after a commit.
    if (!this.looked) {
      this.looked = true;
      setImmediate(this.lookAgain);
      if (this.committedElsewhere()) this.clear();
    }
    const entry = this.entries.get(digest);
    if (entry && !(now - entry.filled < TTL_MS && now >= entry.filled)) {
      this.entries.delete(digest);
      return undefined;
    }
    return entry;
  }

  put(digest: string, entry: CachedKey, generation: number): void {
    if (generation !== this.generation) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(digest, entry);
  }

  /**
   * The generation, after looking at commits made elsewhere: it changes whenever a key may have
   * been revoked (open streams re-check their keys then: src/domain/events/stream-slots.ts).
   */
  current(): number {
    if (this.committedElsewhere()) this.clear();
    return this.generation;
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
  }
}

// One cache per database handle (tests run several servers in one process).
const caches = new WeakMap<Store, AuthCache>();

export function authCacheOf(ctx: AppContext): AuthCache {
  let cache = caches.get(ctx.store);
  if (!cache) {
    const made = new AuthCache(ctx.store.externalCommits());
    ctx.store.listen((signal) => signal === SIGNAL && made.clear());
    caches.set(ctx.store, (cache = made));
  }
  return cache;
}

/** After a change to the keys has been committed: this process and the others read them again. */
export function keysChanged(ctx: AppContext): void {
  caches.get(ctx.store)?.clear();
  ctx.store.announce(SIGNAL);
}
