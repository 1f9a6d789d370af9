// The SQLite query plan of the statements a repository function really runs: the store's
// connection records what it prepares while `run` runs, and each statement on `table` is
// (read or updated) is explained with placeholder values. For tests that hold a read to an index (a cost bound).
import type Database from 'better-sqlite3';
import type { Store } from '../../src/store/store.ts';

export async function plansOf(store: Store, table: string, run: () => Promise<unknown>): Promise<string[][]> {
  const client = (store as unknown as { client: Database.Database }).client;
  const prepare = client.prepare.bind(client);
  const seen: string[] = [];
  client.prepare = ((source: string) => (seen.push(source), prepare(source))) as typeof client.prepare;
  try {
    await run();
  } finally {
    client.prepare = prepare;
  }
  return seen
    .filter((s) => new RegExp(`(from|update) "?${table}"?\\b`, 'i').test(s))
    .map((s) => (prepare(`EXPLAIN QUERY PLAN ${s}`).all(...[...s.matchAll(/\?/g)].map(() => 'x')) as Array<{ detail: string }>).map((r) => r.detail));
}
