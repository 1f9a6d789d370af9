// Files a crash left behind. Raw sources and attachment bytes are written (fsynced) before the
// row naming them is committed, so a process killed in between leaves files no row refers to
// (the crash suite counts them). They are removed once older than an hour: no write in flight
// takes that long, so a file still waiting for its commit is never touched.
import { promises as fs } from 'node:fs';
import { basename, join, relative } from 'node:path';
import type { AppContext } from '../context.ts';

export const ORPHAN_AGE_MS = 3_600_000;

/** The row that may name a file: raw/<…>/<message id>.eml, attachments/<…>/<attachment id>. */
const OWNERS = {
  raw: { sql: 'SELECT raw_path FROM messages WHERE id = ?', id: (name: string) => name.replace(/\.eml$/, '') },
  attachments: { sql: 'SELECT storage_path FROM attachments WHERE id = ?', id: (name: string) => name },
} as const;

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

/** Removes unreferenced blob files (and `.tmp` leftovers, and data_dir/tmp files) older than `ORPHAN_AGE_MS`. */
export async function sweepOrphanBlobs(ctx: AppContext): Promise<{ removed: number }> {
  const root = ctx.blobs.root;
  const cutoff = ctx.clock.now().getTime() - ORPHAN_AGE_MS;
  let removed = 0;
  for (const [kind, owner] of Object.entries(OWNERS)) {
    const lookup = ctx.db.$client.prepare(owner.sql).pluck();
    for await (const abs of files(join(root, kind))) {
      const stat = await fs.stat(abs).catch(() => undefined);
      if (!stat || stat.mtimeMs > cutoff) continue;
      const rel = relative(root, abs);
      const name = basename(abs);
      const referenced = !name.endsWith('.tmp') && lookup.get(owner.id(name)) === rel;
      if (referenced) continue;
      await fs.rm(abs, { force: true });
      removed++;
    }
  }
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
