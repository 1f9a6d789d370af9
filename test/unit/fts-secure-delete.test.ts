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
    for (const table of ['messages_fts', 'attachments_fts']) {
      assert.equal(config(table, 'secure-delete'), 0, `${table}: off while rows are added`);
      assert.equal(config(table, 'version'), 4, `${table}: no added row was looked up as a delete`);
    }

    // A deleted message leaves neither its words nor its attachment's name in the indexes, also
    // once rows are added again (switching the option off writes the deletes out first).
    const doomed = 'zqdoomed7f3a9c1b2e';
    const doomedId = await addMessage(doomed);
    await addMessage('zqbefore1');
    assert.ok(indexHolds('messages_fts', doomed), 'the scan sees the word before the deletion');
    await store.grouped(async (tx) => {
      await rawRun(tx, 'DELETE FROM attachments WHERE message_id = ?', [doomedId]);
      await rawRun(tx, 'DELETE FROM messages WHERE id = ?', [doomedId]);
    });
    for (const table of ['messages_fts', 'attachments_fts']) {
      assert.equal(config(table, 'secure-delete'), 1, `${table}: on after a delete`);
      assert.ok(!indexHolds(table, doomed), `${table}: the deleted term is gone from the index's pages`);
    }
    await Promise.all([addMessage('zqafter1'), addMessage('zqafter2')]);
    for (const table of ['messages_fts', 'attachments_fts']) {
      assert.equal(config(table, 'secure-delete'), 0, `${table}: off again once rows are added`);
      assert.ok(!indexHolds(table, doomed), `${table}: still gone`);
    }
    const match = (q: string) => sqlite.prepare('SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?').pluck().get(q);
    assert.equal(match(doomed), 0);
    assert.equal(match('zqbefore1'), 1);
    assert.equal(match('zqafter2'), 1);
    assert.equal(match('quarterly'), 63, 'every kept message is found');
    for (const table of ['messages_fts', 'attachments_fts']) sqlite.prepare(`INSERT INTO ${table}(${table}, rank) VALUES ('integrity-check', 1)`).run(); // throws if the index disagrees with its rows
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
