// The event feed (GET /events, the SSE stream, wait_for_message, IMAP IDLE) reads "this
// account's events after id X" on every wake-up. On embedded SQLite that read must seek in
// (account_id, id) and stop at its limit (migration 0024), whatever the account's history:
// with only (account_id, created_at) SQLite read all of the account's events and sorted them,
// 1.7 ms a read at 13,000 events and growing. Asserted on the query plan of the statements
// listEventsOfAccount really runs.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type Database from 'better-sqlite3';
import { openStore } from '../../src/store/open.ts';
import { listEventsOfAccount, type EventFilter } from '../../src/store/repo/events.ts';
import type { Db } from '../../src/store/store.ts';

test("every read of an account's event feed seeks in (account_id, id): no scan of the account's events, no sort", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-events-plan-'));
  const store = await openStore({ dataDir: dir });
  try {
    const client = (store as unknown as { client: Database.Database }).client;
    const seen: string[] = [];
    const prepare = client.prepare.bind(client);
    client.prepare = ((source: string) => (seen.push(source), prepare(source))) as typeof client.prepare;
    const filters: EventFilter[] = [
      { limit: 100 },
      { after: 'evt_01', limit: 100 },
      { after: 'evt_01', types: ['message.received'], limit: 100 },
      { after: 'evt_01', types: ['message.received', 'message.sent'], inboxIds: ['inb_1', 'inb_2'], limit: 100 },
      { after: 'evt_01', inboxId: 'inb_1', limit: 100 },
    ];
    for (const filter of filters) {
      seen.length = 0;
      await listEventsOfAccount(store.db as unknown as Db, 'acc_1', filter);
      const source = seen.find((s) => /from "events"/i.test(s));
      assert.ok(source, `the feed's statement for ${JSON.stringify(filter)} was seen`);
      const params = [...source.matchAll(/\?/g)].map(() => 'x');
      const plan = (prepare(`EXPLAIN QUERY PLAN ${source}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail);
      const main = plan.find((d) => /^(SEARCH|SCAN) events\b/.test(d));
      assert.match(
        main ?? '',
        filter.after ? /^SEARCH events USING INDEX events_account_id \(account_id=\? AND id>\?\)$/ : /^SEARCH events USING INDEX events_account_id \(account_id=\?\)$/,
        plan.join('\n'),
      );
      assert.ok(!plan.some((d) => d.includes('TEMP B-TREE')), `no sort: ${plan.join('; ')}`);
    }
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
