// Which rows name a stored file. A file may be shared: one raw message by every inbox one
// delivery reached, one attachment by every message that carried the same bytes
// (Blobs.contentKey). It is removed when the last row naming it goes.
import type { AppContext } from '../../context.ts';
import type { Db } from '../client.ts';
import { errorFields } from '../../log.ts';
import { isBlobNamed } from '../repo/blob-refs.ts';

/** True when a message or attachment row names `rel`. */
export function blobReferenced(db: Db, rel: string): Promise<boolean> {
  return isBlobNamed(db, rel);
}

/**
 * Removes the files among `rels` that no row names now. Checked and removed inside one
 * transaction: no commit of a row naming the file can come in between (such a commit puts a
 * shared file back if it is gone, Blobs.ensureSync, and it runs in a transaction too).
 */
export function removeUnreferenced(ctx: AppContext, rels: Iterable<string | null | undefined>): Promise<number> {
  return ctx.store.transaction(async (tx) => {
    let removed = 0;
    // In key order, as every transaction takes blob locks: two never wait for each other.
    for (const rel of [...new Set(rels)].sort()) {
      if (!rel) continue;
      // The blob's lock first (PostgreSQL; SQLite's writer lock holds it already): a row naming
      // it cannot commit between the check and the removal.
      await ctx.store.lock(tx, `blob:${rel}`);
      if (!(await blobReferenced(tx, rel))) removed += await ctx.blobs.remove(tx, rel);
    }
    return removed;
  });
}

/**
 * After rows were deleted (or never committed): removes the files among `rels` that no row
 * names now. Never throws: it runs after a commit that has already happened, and a file it
 * could not remove is left to the hourly orphan sweep (src/store/blobs/orphans.ts).
 */
export async function releaseBlobs(ctx: AppContext, rels: Iterable<string | null | undefined>): Promise<void> {
  const list = [...rels].filter(Boolean);
  // Nothing to look at: no transaction either.
  if (!list.length) return;
  try {
    await removeUnreferenced(ctx, list);
  } catch (err) {
    ctx.log.warn('stored files not removed; the orphan sweep will', errorFields(err));
  }
}
