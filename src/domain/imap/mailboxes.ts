// IMAP access to an inbox (PRODUCT.md "IMAP", docs/imap.md): who may log in (an inbox address and
// an API key of its account with `read`), which folders an inbox has (INBOX: received mail; Sent:
// sent mail; Drafts; one folder per label), their stable UIDs (src/store/repo/imap.ts), and how
// IMAP flags map to the API's marks: \Seen is `unread` inverted, \Flagged is the label `flagged`,
// every other keyword is the label of its (lowercased) name. Held mail is in no folder.
import type { AppContext } from '../../context.ts';
import { authenticateKey, seesInbox, type Principal, type Scope } from '../accounts/apikeys.ts';
import { AppError } from '../errors.ts';
import { findInboxByAddress } from '../inboxes/inboxes.ts';
import { LABEL_PATTERN, labelsOfMessages, type Marks } from '../mail/labels.ts';
import { deleteMessage, updateMessage } from '../mail/messages.ts';
import {
  countUnseen,
  deleteMailbox,
  ensureMailbox,
  listLabelsOfInbox,
  listMailboxNames,
  listMessagesByUid,
  listUids,
  renumberMailbox,
  sumSizes,
  uidsOfMessages,
  type FolderScope,
  type ImapMessageRow,
} from '../../store/repo/imap.ts';

export type { ImapMessageRow };

/** Who an IMAP session logged in as. */
export interface ImapUser {
  accountId: string;
  inboxId: string;
  address: string;
  keyId: string;
  /**
   * The key's scopes, as the API reads them: `send` marks messages (STORE, as PATCH /messages)
   * and APPENDs to Sent and Drafts; `manage` deletes them (EXPUNGE, as DELETE /messages/{id}).
   * Without `send` every folder opens read-only.
   */
  scopes: ReadonlySet<Scope>;
}

/**
 * Checks LOGIN credentials: `username` an inbox address, `password` an API key of its account with
 * `read` and this inbox (when limited), not revoked nor expired. Every refusal is the same
 * UNAUTHORIZED, as for SMTP submission.
 */
export async function authenticateImapUser(ctx: AppContext, username: string, password: string): Promise<ImapUser> {
  const inbox = await findInboxByAddress(ctx, username.trim());
  const principal = await authenticateKey(ctx, password);
  if (!inbox || !principal || principal.accountId !== inbox.accountId || !mayRead(principal, inbox.id)) {
    throw new AppError('UNAUTHORIZED', 'authentication credentials invalid');
  }
  return { accountId: inbox.accountId, inboxId: inbox.id, address: inbox.address.toLowerCase(), keyId: principal.keyId, scopes: principal.scopes };
}

/** Whether a session's key still stands (the auth cache makes this a map lookup); a database failure throws. */
export async function imapUserStillValid(ctx: AppContext, who: ImapUser, presentedKey: string): Promise<boolean> {
  const principal = await authenticateKey(ctx, presentedKey);
  return principal !== undefined && principal.keyId === who.keyId && mayRead(principal, who.inboxId);
}

const mayRead = (principal: Principal, inboxId: string): boolean => principal.scopes.has('read') && seesInbox(principal, inboxId);

/** The folders every inbox has, with their RFC 6154 special use. */
export const SYSTEM_FOLDERS = [
  { name: 'INBOX', use: '' },
  { name: 'Sent', use: '\\Sent' },
  { name: 'Drafts', use: '\\Drafts' },
  { name: 'Trash', use: '\\Trash' },
] as const;

/** Outbound messages that never left are not in Sent. */
const NOT_SENT = ['held', 'scheduled', 'canceled'];

/** The label `\Flagged` is stored as. */
export const FLAGGED_LABEL = 'flagged';

/** INBOX is case-insensitive (RFC 9051 §5.1); other names are exact. */
export const canonicalName = (name: string): string => (name.toUpperCase() === 'INBOX' ? 'INBOX' : name);

/** Which messages folder `name` holds, or undefined when it is not a folder name at all. */
export function folderScope(name: string): FolderScope | undefined {
  if (name === 'INBOX') return { kind: 'direction', direction: 'inbound', excluded: ['held'] };
  if (name === 'Sent') return { kind: 'direction', direction: 'outbound', excluded: NOT_SENT };
  // Always empty: what a client moves there is deleted (moveToFolder).
  if (name === 'Drafts' || name === 'Trash') return { kind: 'empty' };
  return LABEL_PATTERN.test(name) ? { kind: 'label', label: name } : undefined;
}

/** The folders of an inbox: the system ones, then its labels and the folders made with CREATE. */
export async function listFolders(ctx: AppContext, who: ImapUser): Promise<Array<{ name: string; use: string }>> {
  const labels = new Set([...(await listLabelsOfInbox(ctx.db, who.inboxId)), ...(await listMailboxNames(ctx.db, who.inboxId))]);
  for (const f of SYSTEM_FOLDERS) labels.delete(f.name);
  return [
    ...SYSTEM_FOLDERS,
    ...[...labels]
      .filter((l) => folderScope(l)?.kind === 'label')
      .sort()
      .map((name) => ({ name, use: '' })),
  ];
}

/** A new label folder (CREATE); it lists while empty. */
export async function createFolder(ctx: AppContext, who: ImapUser, name: string): Promise<void> {
  if (folderScope(name)?.kind !== 'label') throw new AppError('VALIDATION_ERROR', `a folder is a label: ${LABEL_PATTERN.source}`);
  await ensureMailbox(ctx.db, who.inboxId, name, newUidValidity(ctx));
}

/** DELETE of a label folder: the label is taken off its messages (they stay in INBOX or Sent). */
export async function deleteFolder(ctx: AppContext, who: ImapUser, name: string): Promise<void> {
  if (folderScope(name)?.kind !== 'label') throw new AppError('FORBIDDEN', 'only label folders can be deleted');
  const snapshot = await syncFolder(ctx, who, name);
  for (const row of await messagesByUid(ctx, who, name, snapshot.uids)) await updateMessage(ctx, who.accountId, row.id, { removeLabels: [name] });
  await deleteMailbox(ctx.db, who.inboxId, name);
}

/** Seconds since the epoch: a new folder's UIDVALIDITY (32 bits until 2106, and never 0). */
const newUidValidity = (ctx: AppContext): number => Math.max(1, Math.floor(ctx.clock.now().getTime() / 1000));

export interface FolderSnapshot {
  uidValidity: number;
  uidNext: number;
  /** Ascending; sequence number n is uids[n - 1]. */
  uids: number[];
}

/**
 * The folder as it is now: messages that entered it since anyone last looked are numbered (one
 * node at a time, under the folder's lock), then its UIDs are read.
 */
export async function syncFolder(ctx: AppContext, who: ImapUser, name: string): Promise<FolderSnapshot> {
  const scope = folderScope(name);
  if (!scope) throw new AppError('NOT_FOUND', `no folder ${name}`);
  const box = await ctx.store.transaction(async (tx) => {
    await ctx.store.lock(tx, `imap:${who.inboxId}/${name}`);
    return renumberMailbox(tx, who.inboxId, name, scope, newUidValidity(ctx));
  });
  return { ...box, uids: await listUids(ctx.db, who.inboxId, name) };
}

/** The messages of these UIDs of the folder, ascending. */
export function messagesByUid(ctx: AppContext, who: ImapUser, name: string, uids: readonly number[]): Promise<ImapMessageRow[]> {
  return listMessagesByUid(ctx.db, who.inboxId, name, uids);
}

/** The IMAP flags of each message: \Seen, \Flagged and the labels as keywords. */
export async function flagsOf(ctx: AppContext, rows: ImapMessageRow[]): Promise<Map<string, string[]>> {
  const labels = await labelsOfMessages(
    ctx,
    rows.map((r) => r.id),
  );
  return new Map(
    rows.map((r) => {
      const flags = (labels.get(r.id) ?? []).map((l) => (l === FLAGGED_LABEL ? '\\Flagged' : l));
      if (!r.unread) flags.unshift('\\Seen');
      return [r.id, flags];
    }),
  );
}

/** The flags a session may set and that are kept (\Deleted lives in the session until EXPUNGE). */
export const PERMANENT_FLAGS = ['\\Seen', '\\Flagged', '\\Deleted', '\\*'];

/**
 * The marks a STORE makes: `mode` '+' adds the flags, '-' removes them, '' sets exactly them
 * (given the message's current flags). \Deleted, \Answered, \Draft and \Recent are not stored
 * here. A keyword that is no label name is refused (VALIDATION_ERROR).
 */
export function marksOfStore(mode: '+' | '-' | '', flags: string[], current: string[]): Marks {
  const wanted = new Set<string>();
  let seen: boolean | undefined;
  for (const f of flags) {
    const lower = f.toLowerCase();
    if (lower === '\\seen') seen = true;
    else if (lower === '\\flagged') wanted.add(FLAGGED_LABEL);
    else if (lower.startsWith('\\')) continue;
    else if (!LABEL_PATTERN.test(lower)) throw new AppError('VALIDATION_ERROR', `keyword ${f} is not a label name (${LABEL_PATTERN.source})`);
    else wanted.add(lower);
  }
  const labelsNow = current.filter((f) => !f.startsWith('\\')).concat(current.includes('\\Flagged') ? [FLAGGED_LABEL] : []);
  if (mode === '+') return { ...(seen ? { unread: false } : {}), addLabels: [...wanted].filter((l) => !labelsNow.includes(l)) };
  if (mode === '-') return { ...(seen ? { unread: true } : {}), removeLabels: [...wanted].filter((l) => labelsNow.includes(l)) };
  return { unread: !seen, addLabels: [...wanted].filter((l) => !labelsNow.includes(l)), removeLabels: labelsNow.filter((l) => !wanted.has(l)) };
}

/** Applies a STORE's marks to one message (the API's PATCH: the label bound holds). */
export async function storeMarks(ctx: AppContext, who: ImapUser, messageId: string, marks: Marks): Promise<void> {
  await updateMessage(ctx, who.accountId, messageId, marks);
}

/**
 * EXPUNGE of a message marked \Deleted: in INBOX or Sent the message is deleted as DELETE
 * /messages/{id} deletes it; in a label folder its label is taken off (it stays in INBOX).
 */
export async function expungeMessage(ctx: AppContext, who: ImapUser, folder: string, messageId: string): Promise<void> {
  if (folderScope(folder)?.kind === 'label') await updateMessage(ctx, who.accountId, messageId, { removeLabels: [folder] });
  else await deleteMessage(ctx, who.accountId, messageId);
}

/** COPY or MOVE into a label folder: the label is added (the message is the same message). */
export async function copyToFolder(ctx: AppContext, who: ImapUser, target: string, messageIds: string[]): Promise<void> {
  if (folderScope(target)?.kind !== 'label') throw new AppError('FORBIDDEN', 'messages can be copied only to label folders');
  for (const id of messageIds) await updateMessage(ctx, who.accountId, id, { addLabels: [target] });
}

/**
 * MOVE (RFC 6851) of messages out of folder `from`: into Trash they are deleted (as EXPUNGE in
 * INBOX or Sent: the key needs `manage`); from one label folder to another the label is swapped.
 * A message cannot leave INBOX or Sent for a label folder (it would stay in them): CANNOT.
 */
export async function moveToFolder(ctx: AppContext, who: ImapUser, from: string, target: string, messageIds: string[]): Promise<void> {
  if (target === 'Trash') {
    if (!who.scopes.has('manage')) throw new AppError('INSUFFICIENT_SCOPE', 'this API key lacks the `manage` scope');
    for (const id of messageIds) await deleteMessage(ctx, who.accountId, id);
    return;
  }
  if (folderScope(target)?.kind !== 'label' || folderScope(from)?.kind !== 'label') throw new AppError('FORBIDDEN', 'messages move only into Trash (deleted) or from one label folder to another');
  if (target === from) return;
  for (const id of messageIds) await updateMessage(ctx, who.accountId, id, { addLabels: [target], removeLabels: [from] });
}

/** The stored source of a message, or undefined when it has none (yet). */
export async function rawSource(ctx: AppContext, row: ImapMessageRow): Promise<Buffer | undefined> {
  if (!row.rawPath) return undefined;
  try {
    return await ctx.blobs.read(row.rawPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Unread messages of a folder, as it was last numbered (STATUS UNSEEN). */
export function unseenCount(ctx: AppContext, who: ImapUser, name: string): Promise<number> {
  return countUnseen(ctx.db, who.inboxId, name);
}

/** Bytes of a folder's messages, as it was last numbered (STATUS SIZE). */
export function folderSize(ctx: AppContext, who: ImapUser, name: string): Promise<number> {
  return sumSizes(ctx.db, who.inboxId, name);
}

/** The UIDs these messages have in folder `name` after numbering it (COPYUID, APPENDUID). */
export async function uidsIn(ctx: AppContext, who: ImapUser, name: string, messageIds: readonly string[]): Promise<{ uidValidity: number; uids: Map<string, number> }> {
  const snap = await syncFolder(ctx, who, name);
  return { uidValidity: snap.uidValidity, uids: await uidsOfMessages(ctx.db, who.inboxId, name, messageIds) };
}
