// Bulk-loads stored messages straight into a mailroom database (the scale and HTTP scenarios):
// one prepared statement per table, 50,000 rows per transaction, with the server stopped
// (the schema's triggers keep the per-inbox counts in step, as for any other insert).
// Rows look like received mail: a 10-message thread each, ~1 KB of text body (or a short one
// where only the count matters, to keep loading a million rows quick).
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { newId } from '../src/ids.ts';

/** The body every seeded message (and every baseline row) carries, so JSON sizes match. */
export function seedBody(i: number): string {
  return `Message ${i}. ` + 'The quick brown fox jumps over the lazy dog. '.repeat(22);
}

const THREAD_SIZE = 10;
const BATCH = 50_000;

/** Inserts `count` received messages into `inboxId`; returns one message id from the middle. */
export function seedMessages(dataDir: string, accountId: string, inboxId: string, count: number, opts: { shortBodies?: boolean } = {}): { middleId: string; seconds: number } {
  const t0 = performance.now();
  const db = new Database(join(dataDir, 'mailroom.db'));
  db.pragma('journal_mode = WAL');
  // Bench data: no fsync while loading (the server reopens it with synchronous=FULL).
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -262144');
  const insertThread = db.prepare('INSERT INTO threads (id, account_id, inbox_id, subject, message_count, last_message_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const insertMessage = db.prepare(
    `INSERT INTO messages (id, account_id, inbox_id, thread_id, direction, from_address, from_name, to_addresses, subject,
       body_text, status, message_id_header, raw_path, size, created_at, updated_at)
     VALUES (?, ?, ?, ?, 'inbound', ?, ?, ?, ?, ?, 'received', ?, NULL, ?, ?, ?)`,
  );
  const inbox = db.prepare('SELECT address FROM inboxes WHERE id = ?').get(inboxId) as { address: string };
  const to = JSON.stringify([inbox.address]);
  // Spread creation times over the past year, oldest first, so ids and timestamps both ascend.
  const start = Date.now() - 365 * 86_400_000;
  const step = Math.max(1, Math.floor((365 * 86_400_000) / count));
  let middleId = '';
  let threadId = '';
  for (let done = 0; done < count;) {
    const n = Math.min(BATCH, count - done);
    db.transaction(() => {
      for (let i = done; i < done + n; i++) {
        const ms = start + i * step;
        const at = new Date(ms).toISOString();
        if (i % THREAD_SIZE === 0) {
          threadId = newId('thr', ms);
          insertThread.run(threadId, accountId, inboxId, `Thread ${i / THREAD_SIZE}`, Math.min(THREAD_SIZE, count - i), at, at);
        }
        const id = newId('msg', ms);
        if (i === Math.floor(count / 2)) middleId = id;
        const body = opts.shortBodies ? `Message ${i}. The quick brown fox jumps over the lazy dog.` : seedBody(i);
        insertMessage.run(
          id,
          accountId,
          inboxId,
          threadId,
          `sender${i % 97}@example.org`,
          `Sender ${i % 97}`,
          to,
          `Thread ${Math.floor(i / THREAD_SIZE)}`,
          body,
          `<${id}@example.org>`,
          body.length + 400,
          at,
          at,
        );
      }
    })();
    done += n;
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  return { middleId, seconds: (performance.now() - t0) / 1000 };
}

/** The account that owns an inbox (read before seeding). */
export function accountOfInbox(dataDir: string, inboxId: string): string {
  const db = new Database(join(dataDir, 'mailroom.db'), { readonly: true });
  try {
    return (db.prepare('SELECT account_id FROM inboxes WHERE id = ?').get(inboxId) as { account_id: string }).account_id;
  } finally {
    db.close();
  }
}
