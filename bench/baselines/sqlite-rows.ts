// The store behind the bare HTTP baselines: one SQLite file (WAL, synchronous=FULL like
// mailroom) with an inbox-like table and a message-like table seeded with the same bodies
// as the mailroom scenario, and the three prepared statements the endpoints need.
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { seedBody } from '../seed.ts';

export interface RowStore {
  inboxId: string;
  getInbox(id: string): unknown;
  listMessages(inboxId: string, limit: number): unknown[];
  createInbox(displayName: string | null): unknown;
}

export function openRowStore(messageCount = 1000): RowStore {
  const db = new Database(join(mkdtempSync(join(tmpdir(), 'mailroom-bench-')), 'baseline.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE inboxes (id TEXT PRIMARY KEY, address TEXT NOT NULL UNIQUE, display_name TEXT, status TEXT NOT NULL,
             daily_send_limit INTEGER NOT NULL, sends_today INTEGER NOT NULL, total_sent INTEGER NOT NULL, created_at TEXT NOT NULL);
           CREATE TABLE messages (id TEXT PRIMARY KEY, inbox_id TEXT NOT NULL, from_address TEXT NOT NULL, subject TEXT NOT NULL,
             body_text TEXT, status TEXT NOT NULL, created_at TEXT NOT NULL);
           CREATE INDEX messages_inbox_created ON messages (inbox_id, created_at);`);
  const insertInbox = db.prepare('INSERT INTO inboxes VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  const newInbox = (displayName: string | null) => {
    const id = 'inb_' + randomBytes(12).toString('hex');
    const row = { id, address: `${id}@agents.bench`, display_name: displayName, status: 'active', daily_send_limit: 100, sends_today: 0, total_sent: 0, created_at: new Date().toISOString() };
    insertInbox.run(row.id, row.address, row.display_name, row.status, row.daily_send_limit, row.sends_today, row.total_sent, row.created_at);
    return row;
  };
  const inboxId = newInbox('bench').id;
  const insertMessage = db.prepare('INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)');
  db.transaction(() => {
    for (let i = 0; i < messageCount; i++) {
      insertMessage.run(`msg_${String(i).padStart(8, '0')}`, inboxId, `sender${i % 97}@example.org`, `Thread ${Math.floor(i / 10)}`, seedBody(i), 'received', new Date(Date.now() - (messageCount - i) * 1000).toISOString());
    }
  })();
  const get = db.prepare('SELECT * FROM inboxes WHERE id = ?');
  const list = db.prepare('SELECT * FROM messages WHERE inbox_id = ? ORDER BY created_at DESC LIMIT ?');
  return {
    inboxId,
    getInbox: (id) => get.get(id),
    listMessages: (id, limit) => list.all(id, limit),
    createInbox: newInbox,
  };
}
