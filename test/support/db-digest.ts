// Database checks for suites that must prove a refused request changed nothing: a digest of
// every row of every table, and a wait until the job table is idle (background work is over).
import { createHash } from 'node:crypto';
import type { AppContext } from '../../src/context.ts';

/** sha256 over every row of every table (api_keys.last_used_at aside: any request with a key touches it). */
export function dbDigest(ctx: AppContext): string {
  const sqlite = ctx.db.$client;
  const hash = createHash('sha256');
  const tables = sqlite.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all() as string[];
  for (const name of tables) {
    hash.update(`\n#${name}\n`);
    // WITHOUT ROWID tables (FTS5's shadow tables) are ordered by all their columns instead.
    const withoutRowid = !sqlite.prepare(`SELECT 1 FROM pragma_table_list WHERE name = ? AND wr = 0`).get(name);
    const order = withoutRowid ? Array.from({ length: (sqlite.prepare(`SELECT count(*) FROM pragma_table_info(?)`).pluck().get(name) as number) }, (_v, i) => i + 1).join(', ') : 'rowid';
    for (const row of sqlite.prepare(`SELECT * FROM "${name}" ORDER BY ${order}`).all() as Array<Record<string, unknown>>) {
      if (name === 'api_keys') row.last_used_at = null;
      hash.update(JSON.stringify(row, (_k, v) => (typeof v === 'bigint' ? String(v) : v)));
    }
  }
  return hash.digest('hex');
}

/** Waits until no job is queued or running. */
export async function settleJobs(ctx: AppContext, timeoutMs = 10_000): Promise<void> {
  const sqlite = ctx.db.$client;
  const deadline = Date.now() + timeoutMs;
  while ((sqlite.prepare(`SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')`).pluck().get() as number) > 0) {
    if (Date.now() > deadline) throw new Error('background jobs did not settle');
    await new Promise((r) => setTimeout(r, 25));
  }
}
