// Which rows name a stored file. A file may be shared: one raw message by every inbox one
// delivery reached, one attachment by every message that carried the same bytes
// (Blobs.contentKey). It is removed when the last row naming it goes.
import type { AppContext } from '../context.ts';
import { errorFields } from '../log.ts';

const NAMED = 'SELECT 1 FROM messages WHERE raw_path = @rel UNION ALL SELECT 1 FROM attachments WHERE storage_path = @rel LIMIT 1';

/** True when a message or attachment row names `rel`. */
export function blobReferenced(ctx: AppContext, rel: string): boolean {
  return ctx.db.$client.prepare(NAMED).pluck().get({ rel }) !== undefined;
}

/**
 * After rows were deleted (or never committed): removes the files among `rels` that no row
 * names now. Never throws: it runs after a commit that has already happened, and a file it
 * could not remove is left to the hourly orphan sweep (src/storage/orphans.ts).
 */
export function releaseBlobs(ctx: AppContext, rels: Iterable<string | null | undefined>): void {
  try {
    ctx.blobs.removeUnreferenced(rels, (rel) => blobReferenced(ctx, rel));
  } catch (err) {
    ctx.log.warn('stored files not removed; the orphan sweep will', errorFields(err));
  }
}
