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
import { openStore } from '../../src/store/open.ts';
import { listEventsOfAccount, type EventFilter } from '../../src/store/repo/events.ts';
import type { Db } from '../../src/store/store.ts';
import { plansOf } from '../support/query-plan.ts';

test("every read of an account's event feed seeks in (account_id, id): no scan of the account's events, no sort", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-events-plan-'));
  const store = await openStore({ dataDir: dir });
  try {
    const filters: EventFilter[] = [
      { limit: 100 },
      { after: 'evt_01', limit: 100 },
      { after: 'evt_01', types: ['message.received'], limit: 100 },
      { after: 'evt_01', types: ['message.received', 'message.sent'], inboxIds: ['inb_1', 'inb_2'], limit: 100 },
      { after: 'evt_01', inboxId: 'inb_1', limit: 100 },
    ];
    for (const filter of filters) {
      const [plan] = await plansOf(store, 'events', () => listEventsOfAccount(store.db as unknown as Db, 'acc_1', filter));
      assert.ok(plan, `the feed's statement for ${JSON.stringify(filter)} was seen`);
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
