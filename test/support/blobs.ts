// The stored blobs of a test server, whichever engine holds them: files under data_dir/<kind>
// and small outbound sources as rows of blob_chunks (embedded SQLite), or rows of blob_chunks
// for all (PostgreSQL). Keys are the relative paths rows name.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { AppContext } from '../../src/context.ts';
import { DbBlobs } from '../../src/store/blobs/pg-blobs.ts';
import { rawRows } from '../../src/store/store.ts';

/** Keys and sizes of the blobs under `kind` (raw sources, attachment bytes). */
export async function storedBlobs(ctx: AppContext, kind: 'raw' | 'attachments'): Promise<Array<{ key: string; size: number }>> {
  const rows = (await rawRows<[string, number]>(ctx.db, 'SELECT key, sum(length(data)) FROM blob_chunks WHERE key LIKE ? GROUP BY key', [`${kind}/%`])).map(([key, size]) => ({
    key,
    size: Number(size),
  }));
  const root = join(ctx.config.data_dir, kind);
  // Embedded SQLite keeps only small outbound sources as rows (Blobs.rowKey); the rest are files.
  const files =
    ctx.blobs instanceof DbBlobs || !existsSync(root)
      ? []
      : readdirSync(root, { recursive: true, withFileTypes: true })
          .filter((e) => e.isFile())
          .map((e) => join(e.parentPath, e.name))
          .map((abs) => ({ key: relative(ctx.config.data_dir, abs), size: statSync(abs).size }));
  return [...rows, ...files].sort((a, b) => (a.key < b.key ? -1 : 1));
}

/** Removes one blob behind the server's back (a lost file, a failed disk). */
export function loseBlob(ctx: AppContext, key: string): Promise<number> {
  return ctx.store.transaction((tx) => ctx.blobs.remove(tx, key));
}
