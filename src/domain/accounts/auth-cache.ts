// Who an API key is, kept in memory so that a request does not read the api_keys table (on
// PostgreSQL: wait for a round trip) every time. Reading the key was the largest piece of work
// an API request did beyond what a bare tinyhttp server does (bench (b), docs/performance.md).
//
// Only keys found valid are kept: an unknown, revoked or expired key is looked up in the
// database on every request, and a database that fails then still answers 503. An entry is
// dropped, and the key read again, as src/domain/remembered.ts says: a key revoked in this
// process (revokeApiKey calls keysChanged once the UPDATE is committed), a commit by another
// process to a SQLite database (the CLI revoking a key), an announcement by another node on
// PostgreSQL, or TTL_MS after it was read.
import type { AppContext } from '../../context.ts';
import { changed, rememberedOf, type Remembered } from '../remembered.ts';
import type { Scope } from './apikeys.ts';

export { TTL_MS } from '../remembered.ts';

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
}

/** Beyond this many keys in use at once the oldest entries go (their next request reads again). */
const MAX_ENTRIES = 10_000;
/** What revokeApiKey announces to the other processes of the database. */
const KIND = 'apikeys';

/** The keys this process remembers, by the SHA-256 digest of the key. */
export function authCacheOf(ctx: AppContext): Remembered<CachedKey> {
  return rememberedOf<CachedKey>(ctx, KIND, MAX_ENTRIES);
}

/** After a change to the keys has been committed: this process and the others read them again. */
export function keysChanged(ctx: AppContext): void {
  changed(ctx, KIND);
}
