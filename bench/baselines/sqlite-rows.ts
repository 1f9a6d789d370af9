// The store behind the bare HTTP baselines: one SQLite file (WAL, synchronous=FULL like
// mailroom) with the columns of mailroom's inboxes and messages tables, seeded with the same
// values as the mailroom scenario (bench/seed.ts), and the prepared statements the endpoints
// need. Reads return the API's JSON shape (camelCase fields, address lists as arrays, the
// same fields per message), so a baseline sends the same bytes mailroom does: it differs in
// doing no authentication, rate limiting, logging or metrics, not in the size of its answer.
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { seedBody } from '../seed.ts';

export interface RowStore {
  inboxId: string;
  getInbox(id: string): unknown;
  listMessages(inboxId: string, limit: number, offset: number): unknown[];
  createInbox(displayName: string | null): unknown;
}

const INBOX_FIELDS = `id, address, display_name AS displayName, domain_id AS domainId, status, daily_send_limit AS dailySendLimit,
  sends_today AS sendsToday, total_sent AS totalSent, bounce_count AS bounceCount, complaint_count AS complaintCount, created_at AS createdAt`;

interface MessageRow {
  id: string;
  inboxId: string;
  threadId: string;
  direction: string;
  fromAddress: string;
  fromName: string | null;
  toAddresses: string;
  ccAddresses: string;
  subject: string;
  bodyText: string | null;
  bodyHtml: string | null;
  status: string;
  messageIdHeader: string;
  inReplyTo: string | null;
  authentication: string | null;
  size: number;
  unread: number;
  createdAt: string;
  updatedAt: string;
}

export function openRowStore(messageCount = 1000): RowStore {
  const db = new Database(join(mkdtempSync(join(tmpdir(), 'mailroom-bench-')), 'baseline.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE inboxes (id TEXT PRIMARY KEY, account_id TEXT NOT NULL, address TEXT NOT NULL UNIQUE, domain_id TEXT,
             display_name TEXT, status TEXT NOT NULL, daily_send_limit INTEGER NOT NULL, sends_today INTEGER NOT NULL DEFAULT 0,
             sends_day TEXT, total_sent INTEGER NOT NULL DEFAULT 0, bounce_count INTEGER NOT NULL DEFAULT 0,
             complaint_count INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
           CREATE TABLE messages (id TEXT PRIMARY KEY, account_id TEXT NOT NULL, inbox_id TEXT NOT NULL, thread_id TEXT NOT NULL,
             direction TEXT NOT NULL, from_address TEXT NOT NULL, from_name TEXT, to_addresses TEXT NOT NULL DEFAULT '[]',
             cc_addresses TEXT NOT NULL DEFAULT '[]', bcc_addresses TEXT NOT NULL DEFAULT '[]', subject TEXT NOT NULL DEFAULT '',
             body_text TEXT, body_html TEXT, delivery TEXT, status TEXT NOT NULL, message_id_header TEXT NOT NULL,
             in_reply_to TEXT, "references" TEXT NOT NULL DEFAULT '[]', recipients TEXT NOT NULL DEFAULT '[]', authentication TEXT,
             raw_path TEXT, size INTEGER NOT NULL DEFAULT 0, unread INTEGER NOT NULL DEFAULT 1, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
           CREATE INDEX messages_inbox_created ON messages (inbox_id, created_at);`);
  const insertInbox = db.prepare(`INSERT INTO inboxes (id, account_id, address, display_name, status, daily_send_limit, created_at) VALUES (?, 'acc_bench', ?, ?, 'active', 100, ?)`);
  const getInbox = db.prepare(`SELECT ${INBOX_FIELDS} FROM inboxes WHERE id = ?`);
  const newInbox = (displayName: string | null) => {
    const id = 'inb_' + randomBytes(13).toString('hex');
    insertInbox.run(id, `${id}@agents.bench`, displayName, new Date().toISOString());
    return getInbox.get(id);
  };
  const inboxId = (newInbox('bench') as { id: string }).id;
  const insertMessage = db.prepare(
    `INSERT INTO messages (id, account_id, inbox_id, thread_id, direction, from_address, from_name, to_addresses, subject,
       body_text, status, message_id_header, size, created_at, updated_at)
     VALUES (?, 'acc_bench', ?, ?, 'inbound', ?, ?, ?, ?, ?, 'received', ?, ?, ?, ?)`,
  );
  const to = JSON.stringify([`${inboxId}@agents.bench`]);
  db.transaction(() => {
    for (let i = 0; i < messageCount; i++) {
      const id = `msg_${String(i).padStart(26, '0')}`;
      const at = new Date(Date.now() - (messageCount - i) * 1000).toISOString();
      const body = seedBody(i);
      const thread = `thr_${String(Math.floor(i / 10)).padStart(26, '0')}`;
      insertMessage.run(id, inboxId, thread, `sender${i % 97}@example.org`, `Sender ${i % 97}`, to, `Thread ${Math.floor(i / 10)}`, body, `<${id}@example.org>`, body.length + 400, at, at);
    }
  })();
  const list = db.prepare(
    `SELECT id, inbox_id AS inboxId, thread_id AS threadId, direction, from_address AS fromAddress, from_name AS fromName,
       to_addresses AS toAddresses, cc_addresses AS ccAddresses, subject, body_text AS bodyText, body_html AS bodyHtml, status,
       message_id_header AS messageIdHeader, in_reply_to AS inReplyTo, authentication, size, unread, created_at AS createdAt, updated_at AS updatedAt
     FROM messages WHERE inbox_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
  );
  // The message shape of the API (fields in the same order as mailroom's).
  const message = (r: MessageRow) => ({
    id: r.id,
    inboxId: r.inboxId,
    threadId: r.threadId,
    direction: r.direction,
    fromAddress: r.fromAddress,
    fromName: r.fromName,
    toAddresses: JSON.parse(r.toAddresses) as string[],
    ccAddresses: JSON.parse(r.ccAddresses) as string[],
    subject: r.subject,
    bodyText: r.bodyText,
    bodyHtml: r.bodyHtml,
    status: r.status,
    attachments: [],
    messageIdHeader: r.messageIdHeader,
    inReplyTo: r.inReplyTo,
    unread: r.unread === 1,
    labels: [],
    size: r.size,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    authentication: r.authentication ? (JSON.parse(r.authentication) as unknown) : null,
    // What mailroom's list answers carry besides (src/domain/mail/messages.ts): for a message
    // that is no reply, the extraction is the body itself; nothing here is cut.
    extractedText: r.bodyText,
    extractedHtml: r.bodyHtml,
    bodyTruncated: false,
  });
  return {
    inboxId,
    getInbox: (id) => getInbox.get(id),
    listMessages: (id, limit, offset) => (list.all(id, limit, offset) as MessageRow[]).map(message),
    createInbox: newInbox,
  };
}
