// Database checks for suites that must prove a refused request changed nothing: a digest of
// every row of every table, and a wait until the job table is idle (background work is over).
import { createHash } from 'node:crypto';
import type { AppContext } from '../../src/context.ts';
import { rawRows } from '../../src/store/store.ts';
import { guard } from './wait.ts';

/** The tables and the order their rows are read in, on either engine. */
async function tablesOf(ctx: AppContext): Promise<Array<{ name: string; order: string }>> {
  if (ctx.store.dialect === 'postgres') {
    const rows = await rawRows<[string, number]>(
      ctx.db,
      `SELECT table_name, (SELECT count(*) FROM information_schema.columns c WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name)
         FROM information_schema.tables t WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`,
    );
    return rows.map(([name, columns]) => ({ name, order: Array.from({ length: columns }, (_v, i) => i + 1).join(', ') }));
  }
  const rows = await rawRows<[string, number, number]>(
    ctx.db,
    `SELECT name, (SELECT wr FROM pragma_table_list WHERE pragma_table_list.name = m.name), (SELECT count(*) FROM pragma_table_info(m.name))
       FROM sqlite_master m WHERE type = 'table' ORDER BY name`,
  );
  // WITHOUT ROWID tables (FTS5's shadow tables) are ordered by all their columns instead.
  return rows.map(([name, withoutRowid, columns]) => ({ name, order: withoutRowid ? Array.from({ length: columns }, (_v, i) => i + 1).join(', ') : 'rowid' }));
}

/** sha256 over every row of every table (api_keys.last_used_at aside: any request with a key touches it). */
export async function dbDigest(ctx: AppContext): Promise<string> {
  const hash = createHash('sha256');
  for (const { name, order } of await tablesOf(ctx)) {
    // The shared DKIM key is made in the background after start (PostgreSQL keeps it there).
    if (name === 'secrets') continue;
    hash.update(`\n#${name}\n`);
    const lastUsed = name === 'api_keys' ? await columnIndex(ctx, name, 'last_used_at') : -1;
    for (const row of await rawRows(ctx.db, `SELECT * FROM "${name}" ORDER BY ${order}`)) {
      if (lastUsed >= 0) row[lastUsed] = null;
      hash.update(JSON.stringify(row, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)));
    }
  }
  return hash.digest('hex');
}

async function columnIndex(ctx: AppContext, table: string, column: string): Promise<number> {
  const rows =
    ctx.store.dialect === 'postgres'
      ? await rawRows<[string]>(ctx.db, `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`, [table])
      : await rawRows<[string]>(ctx.db, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, [table]);
  return rows.findIndex(([name]) => name === column);
}

/** Waits until no job is queued or running. */
export async function settleJobs(ctx: AppContext, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + guard(timeoutMs);
  while ((await rawRows<[number]>(ctx.db, `SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')`))[0][0] > 0) {
    if (Date.now() > deadline) throw new Error('background jobs did not settle');
    await new Promise((r) => setTimeout(r, 25));
  }
}
