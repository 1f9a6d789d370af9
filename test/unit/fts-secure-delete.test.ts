// FTS5 `secure-delete` on the embedded engine (migration 0028): the triggers that delete from a
// full-text index switch it on, the one that adds to it switches it off. Held on for good, it
// made FTS5 take an added row's long position list for a delete and look the row up in every
// segment (its %_config 'version' turns 5 when that lookup runs), a COMMIT growing with the
// index. Deleted rows must still leave their terms nowhere in the index's pages.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openStore } from '../../src/store/open.ts';
import type { SqliteStore } from '../../src/store/sqlite.ts';
import { rawRun } from '../../src/store/store.ts';

const TEXT = ('The quarterly figures are attached; please review the totals before Friday. '.repeat(2) + '\n').repeat(60);

test('FTS5 secure-delete: added rows are written out with it off, deleted rows with it on, and leave no term behind', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-fts-secure-'));
  const store = (await openStore({ dataDir: dir })) as SqliteStore;
  const sqlite = store.client;
  const config = (table: string, k: string) => sqlite.prepare(`SELECT v FROM ${table}_config WHERE k = ?`).pluck().get(k);
  // The index's pages hold a term whole or prefix-compressed: its tail is looked for too.
  const indexHolds = (table: string, term: string) =>
    [term, term.slice(-12)].some((t) => (sqlite.prepare(`SELECT count(*) FROM ${table}_data WHERE instr(block, ?) > 0`).pluck().get(Buffer.from(t)) as number) > 0);
  const now = new Date().toISOString();
  let n = 0;
  const addMessage = (word: string) =>
    store.grouped(async (tx) => {
      const i = ++n;
      await rawRun(tx, "INSERT INTO threads (id, account_id, inbox_id, subject, message_count, last_message_at, created_at) VALUES (?, 'acc', 'inb', 's', 1, ?, ?)", [`thr${i}`, now, now]);
      await rawRun(
        tx,
        `INSERT INTO messages (id, account_id, inbox_id, thread_id, direction, from_address, subject, body_text, status, message_id_header, size, created_at, updated_at)
         VALUES (?, 'acc', 'inb', ?, 'inbound', 'a@example.org', ?, ?, 'received', ?, 1, ?, ?)`,
        [`msg${i}`, `thr${i}`, `message ${i}`, `${word} ${TEXT}`, `<${i}@x>`, now, now],
      );
      await rawRun(tx, "INSERT INTO attachments (id, account_id, message_id, filename, content_type, size, sha256, storage_path, created_at) VALUES (?, 'acc', ?, ?, 'text/plain', 1, '', ?, ?)", [
        `att${i}`,
        `msg${i}`,
        `${word}.txt`,
        `att/${i}`,
        now,
      ]);
      return `msg${i}`;
    });
  try {
    sqlite.prepare("INSERT INTO accounts (id, name, created_at) VALUES ('acc', 'a', ?)").run(now);
    sqlite.prepare("INSERT INTO inboxes (id, account_id, address, daily_send_limit, created_at) VALUES ('inb', 'acc', 'x@example.org', 100, ?)").run(now);

    // Batches of added messages whose common words have position lists of 64-127 bytes.
    for (let b = 0; b < 3; b++) await Promise.all(Array.from({ length: 20 }, (_, i) => addMessage(`kept${b}x${i}`)));
    for (const table of ['messages_fts', 'attachments_fts']) assert.equal(config(table, 'secure-delete'), 0, `${table}: off while rows are added`);
    // (Filenames are too short to trip FTS5's test, so only the message index shows it.)
    assert.equal(config('messages_fts', 'version'), 4, 'no added message was looked up as a delete');

    const remove = (id: string) =>
      store.grouped(async (tx) => {
        await rawRun(tx, 'DELETE FROM attachments WHERE message_id = ?', [id]);
        await rawRun(tx, 'DELETE FROM messages WHERE id = ?', [id]);
      });
    // A deleted message leaves neither its words nor its attachment's name in the indexes. The
    // words share at most a letter with any other term, so the pages hold their last 12
    // characters whatever FTS5's prefix compression does.
    const doomed = ['qa7f3a9c1b2e5d91', 'qw8e4d0a61c3f27b', 'qx5f7e9a13b8d46c'];
    const doomedIds = [await addMessage(doomed[0]), await addMessage(doomed[1]), await addMessage(doomed[2])];
    await addMessage('zqbefore1');
    for (const word of doomed) assert.ok(indexHolds('messages_fts', word) && indexHolds('attachments_fts', word), `the scan sees ${word} before its deletion`);
    await remove(doomedIds[0]);
    for (const table of ['messages_fts', 'attachments_fts']) {
      assert.equal(config(table, 'secure-delete'), 1, `${table}: on after a delete`);
      assert.ok(!indexHolds(table, doomed[0]), `${table}: the deleted term is gone from the index's pages`);
    }
    // A deletion and then additions in one transaction: switching the option off for the
    // additions writes the deletion out first, with it on.
    await Promise.all([remove(doomedIds[1]), addMessage('zqafter1'), addMessage('zqafter2')]);
    for (const table of ['messages_fts', 'attachments_fts']) {
      assert.equal(config(table, 'secure-delete'), 0, `${table}: off again once rows are added`);
      assert.ok(!indexHolds(table, doomed[1]), `${table}: the term deleted before the additions is gone`);
      assert.ok(!indexHolds(table, doomed[0]), `${table}: the first one still gone`);
    }
    // A batch with a writer that throws is rolled back and run again with a savepoint each: its
    // deletion leaves nothing behind, and the failed writer's deletion is undone.
    const failed = store.grouped(async (tx) => {
      await rawRun(tx, 'DELETE FROM attachments WHERE message_id = ?', ['msg1']);
      await rawRun(tx, 'DELETE FROM messages WHERE id = ?', ['msg1']);
      throw new Error('this writer fails');
    });
    const [, , outcome] = await Promise.allSettled([remove(doomedIds[2]), addMessage('zqafter3'), failed]);
    assert.equal(outcome.status, 'rejected');
    for (const table of ['messages_fts', 'attachments_fts']) assert.ok(!indexHolds(table, doomed[2]), `${table}: the term deleted in a batch run again is gone`);
    const match = (q: string) => sqlite.prepare('SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?').pluck().get(q);
    for (const word of doomed) assert.equal(match(word), 0, word);
    for (const word of ['kept0x0', 'zqbefore1', 'zqafter2', 'zqafter3']) assert.equal(match(word), 1, word);
    assert.equal(match('quarterly'), 64, 'every kept message is found');
    for (const table of ['messages_fts', 'attachments_fts']) sqlite.prepare(`INSERT INTO ${table}(${table}, rank) VALUES ('integrity-check', 1)`).run(); // throws if the index disagrees with its rows
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
