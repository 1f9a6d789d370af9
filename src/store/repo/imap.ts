// Storage of IMAP folders and UIDs (`imap_mailboxes`, `imap_uids`) for src/domain/imap/: which
// messages a folder holds, numbering the ones that entered it since the last look, and what a
// FETCH or SEARCH reads of them.
import { rawRows, rawRun, type Db } from '../store.ts';

/** Which messages of an inbox a folder shows: by direction (INBOX, Sent) or by label. */
export type FolderScope = { kind: 'direction'; direction: 'inbound' | 'outbound'; excluded: readonly string[] } | { kind: 'label'; label: string } | { kind: 'empty' };

/**
 * The (id, created_at) of every message of the folder, as SQL with its parameters. Held mail (and,
 * for Sent, what never left) is left out by status.
 */
function members(inboxId: string, scope: FolderScope): { sql: string; params: unknown[] } {
  if (scope.kind === 'direction') {
    const marks = scope.excluded.map(() => '?').join(', ');
    return {
      sql: `SELECT m.id, m.created_at FROM messages m WHERE m.inbox_id = ? AND m.direction = ? AND m.status NOT IN (${marks})`,
      params: [inboxId, scope.direction, ...scope.excluded],
    };
  }
  if (scope.kind === 'empty') return { sql: 'SELECT m.id, m.created_at FROM messages m WHERE 1 = 0', params: [] };
  return {
    sql: `SELECT m.id, m.created_at FROM message_labels l JOIN messages m ON m.id = l.message_id WHERE l.inbox_id = ? AND l.label = ? AND m.status <> 'held'`,
    params: [inboxId, scope.label],
  };
}

export interface MailboxRow {
  uidValidity: number;
  uidNext: number;
}

/** The folder's row, made with `uidValidity` when it has none yet. */
export async function ensureMailbox(db: Db, inboxId: string, name: string, uidValidity: number): Promise<MailboxRow> {
  await rawRun(db, 'INSERT INTO imap_mailboxes (inbox_id, name, uid_validity, uid_next) VALUES (?, ?, ?, 1) ON CONFLICT DO NOTHING', [inboxId, name, uidValidity]);
  const [row] = await rawRows<[number, number]>(db, 'SELECT uid_validity, uid_next FROM imap_mailboxes WHERE inbox_id = ? AND name = ?', [inboxId, name]);
  return { uidValidity: Number(row[0]), uidNext: Number(row[1]) };
}

/**
 * Brings the folder's UIDs up to date (the caller holds the folder's lock in a transaction):
 * drops those of messages that left it, numbers the ones that entered it from uid_next on, in
 * arrival order. Answers the folder's row afterwards.
 */
export async function renumberMailbox(db: Db, inboxId: string, name: string, scope: FolderScope, uidValidity: number): Promise<MailboxRow> {
  const box = await ensureMailbox(db, inboxId, name, uidValidity);
  const m = members(inboxId, scope);
  await rawRun(db, `DELETE FROM imap_uids WHERE inbox_id = ? AND mailbox = ? AND message_id NOT IN (SELECT id FROM (${m.sql}) AS cur)`, [inboxId, name, ...m.params]);
  const added = await rawRun(
    db,
    `INSERT INTO imap_uids (inbox_id, mailbox, uid, message_id)
     SELECT ?, ?, ? + row_number() OVER (ORDER BY n.created_at, n.id) - 1, n.id
     FROM (${m.sql}) AS n WHERE NOT EXISTS (SELECT 1 FROM imap_uids u WHERE u.message_id = n.id AND u.mailbox = ?)`,
    [inboxId, name, box.uidNext, ...m.params, name],
  );
  if (added === 0) return box;
  await rawRun(db, 'UPDATE imap_mailboxes SET uid_next = uid_next + ? WHERE inbox_id = ? AND name = ?', [added, inboxId, name]);
  return { uidValidity: box.uidValidity, uidNext: box.uidNext + added };
}

/** The folder's UIDs, ascending (a session's sequence numbers are their positions). */
export async function listUids(db: Db, inboxId: string, name: string): Promise<number[]> {
  const rows = await rawRows<[number]>(db, 'SELECT uid FROM imap_uids WHERE inbox_id = ? AND mailbox = ? ORDER BY uid', [inboxId, name]);
  return rows.map((r) => Number(r[0]));
}

/** What FETCH and STORE read of one message of a folder. */
export interface ImapMessageRow {
  uid: number;
  id: string;
  accountId: string;
  unread: boolean;
  size: number;
  createdAt: string;
  rawPath: string | null;
}

/** The messages of these UIDs of the folder (UIDs it no longer has are left out), ascending. */
export async function listMessagesByUid(db: Db, inboxId: string, name: string, uids: readonly number[]): Promise<ImapMessageRow[]> {
  if (!uids.length) return [];
  const rows = await rawRows<[number, string, string, number, number, string, string | null]>(
    db,
    `SELECT u.uid, m.id, m.account_id, m.unread, m.size, m.created_at, m.raw_path FROM imap_uids u JOIN messages m ON m.id = u.message_id
     WHERE u.inbox_id = ? AND u.mailbox = ? AND u.uid IN (${uids.map(() => '?').join(', ')}) ORDER BY u.uid`,
    [inboxId, name, ...uids],
  );
  return rows.map((r) => ({ uid: Number(r[0]), id: r[1], accountId: r[2], unread: Number(r[3]) === 1, size: Number(r[4]), createdAt: r[5], rawPath: r[6] }));
}

/** The labels an inbox's messages carry, sorted (its label folders). */
export async function listLabelsOfInbox(db: Db, inboxId: string): Promise<string[]> {
  const rows = await rawRows<[string]>(db, 'SELECT DISTINCT label FROM message_labels WHERE inbox_id = ? ORDER BY label', [inboxId]);
  return rows.map((r) => r[0]);
}

/** The folders an inbox has a row for (selected once, or made with CREATE). */
export async function listMailboxNames(db: Db, inboxId: string): Promise<string[]> {
  const rows = await rawRows<[string]>(db, 'SELECT name FROM imap_mailboxes WHERE inbox_id = ? ORDER BY name', [inboxId]);
  return rows.map((r) => r[0]);
}

/** Forgets a folder (DELETE of a label folder): its row and its UIDs. */
export async function deleteMailbox(db: Db, inboxId: string, name: string): Promise<void> {
  await rawRun(db, 'DELETE FROM imap_uids WHERE inbox_id = ? AND mailbox = ?', [inboxId, name]);
  await rawRun(db, 'DELETE FROM imap_mailboxes WHERE inbox_id = ? AND name = ?', [inboxId, name]);
}

/** Unread messages of a folder (STATUS UNSEEN). */
export async function countUnseen(db: Db, inboxId: string, name: string): Promise<number> {
  const [row] = await rawRows<[number]>(db, 'SELECT count(*) FROM imap_uids u JOIN messages m ON m.id = u.message_id WHERE u.inbox_id = ? AND u.mailbox = ? AND m.unread = 1', [inboxId, name]);
  return Number(row?.[0] ?? 0);
}

/** The inbox's sent message of this Message-ID, if any (APPEND to Sent of what was sent). */
export async function findSentByMessageId(db: Db, inboxId: string, messageIdHeader: string): Promise<string | undefined> {
  const [row] = await rawRows<[string]>(db, "SELECT id FROM messages WHERE inbox_id = ? AND direction = 'outbound' AND message_id_header = ? LIMIT 1", [inboxId, messageIdHeader]);
  return row?.[0];
}

/** Bytes of a folder's messages (STATUS SIZE). */
export async function sumSizes(db: Db, inboxId: string, name: string): Promise<number> {
  const [row] = await rawRows<[number]>(db, 'SELECT coalesce(sum(m.size), 0) FROM imap_uids u JOIN messages m ON m.id = u.message_id WHERE u.inbox_id = ? AND u.mailbox = ?', [inboxId, name]);
  return Number(row?.[0] ?? 0);
}

/** The UID of each of these messages in a folder (COPYUID, APPENDUID). */
export async function uidsOfMessages(db: Db, inboxId: string, name: string, messageIds: readonly string[]): Promise<Map<string, number>> {
  if (!messageIds.length) return new Map();
  const rows = await rawRows<[string, number]>(db, `SELECT message_id, uid FROM imap_uids WHERE inbox_id = ? AND mailbox = ? AND message_id IN (${messageIds.map(() => '?').join(', ')})`, [
    inboxId,
    name,
    ...messageIds,
  ]);
  return new Map(rows.map((r) => [r[0], Number(r[1])]));
}
