// Files a crash left behind. Raw sources and attachment bytes are written (fsynced) before the
// row naming them is committed, so a process killed in between leaves files no row refers to
// (the crash suite counts them). They are removed once older than an hour: no write in flight
// takes that long, so a file still waiting for its commit is never touched. Spooled rows kept as
// sources (src/store/blobs/spooled.ts) whose message is gone are removed the same way.
import { promises as fs } from 'node:fs';
import { join, relative } from 'node:path';
import type { AppContext } from '../../context.ts';
import { removeUnreferenced } from './blob-refs.ts';
import { Blobs, type UnreferencedPage } from './blobs.ts';
import { spooledSourceKey } from './spooled.ts';
import { listUnnamedSpooled } from '../repo/spool.ts';

export const ORPHAN_AGE_MS = 3_600_000;
/** Spooled rows, or blobs kept as rows, looked at per statement: such a table is never read in one. */
export const SWEEP_PAGE = 500;

async function* files(dir: string): AsyncGenerator<string> {
  let entries;
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch {
    return; // not created yet
  }
  for (const e of entries) {
    const abs = join(dir, e.name);
    if (e.isDirectory()) yield* files(abs);
    else if (e.isFile()) yield abs;
  }
}

/** Removes the candidates of every page `next` gives, from the first (after '') to the last; answers how many went. */
async function removePages(ctx: AppContext, next: (after: string) => Promise<UnreferencedPage>): Promise<number> {
  let removed = 0;
  for (let after = ''; ;) {
    const page = await next(after);
    if (page.keys.length) removed += await removeUnreferenced(ctx, page.keys);
    if (page.last === undefined) return removed;
    after = page.last;
  }
}

/** Removes unreferenced blob files (and `.tmp` leftovers, and data_dir/tmp files) older than `ORPHAN_AGE_MS`. */
export async function sweepOrphanBlobs(ctx: AppContext): Promise<{ removed: number }> {
  const cutoff = ctx.clock.now().getTime() - ORPHAN_AGE_MS;
  // Blobs that are rows (every blob on PostgreSQL, small outbound sources on both engines): their age is on them.
  let removed = await removePages(ctx, (after) => ctx.blobs.unreferenced(cutoff, after, SWEEP_PAGE));
  const root = ctx.blobs instanceof Blobs ? ctx.blobs.root : undefined;
  for (const kind of root ? ['raw', 'attachments'] : []) {
    if (!root) break;
    for await (const abs of files(join(root, kind))) {
      const stat = await fs.stat(abs).catch(() => undefined);
      if (!stat || stat.mtimeMs > cutoff) continue;
      if (abs.endsWith('.tmp')) {
        await fs.rm(abs, { force: true });
        removed++;
      } else {
        // Checked and removed in one transaction (a shared file may gain a row any moment).
        removed += await removeUnreferenced(ctx, [relative(root, abs)]);
      }
    }
  }
  // Spooled rows kept as sources whose message was deleted but whose release failed (either engine).
  removed += await removePages(ctx, async (after) => {
    const page = await listUnnamedSpooled(ctx.db, new Date(cutoff).toISOString(), after, SWEEP_PAGE);
    return { keys: page.ids.map(spooledSourceKey), last: page.last };
  });
  // Uploads spooled for an Idempotency-Key hash (src/http/routes.ts) by a process that died.
  for await (const abs of files(join(ctx.config.data_dir, 'tmp'))) {
    const stat = await fs.stat(abs).catch(() => undefined);
    if (!stat || stat.mtimeMs > cutoff) continue;
    await fs.rm(abs, { force: true });
    removed++;
  }
  if (removed) ctx.log.info('orphaned files removed', { removed });
  return { removed };
}
