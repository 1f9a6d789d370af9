// One IMAP connection (RFC 9051, IMAP4rev1 clients served): the states (not authenticated,
// authenticated, selected, logout), the commands of each, and what a session holds: its
// folder's UIDs (sequence number n is uids[n - 1]), the UIDs marked \Deleted, nothing else.
// Commands run one at a time; the rules live in src/domain/imap/mailboxes.ts.
import type { Socket } from 'node:net';
import { TLSSocket, createSecureContext, type SecureContext } from 'node:tls';
import type { AppContext } from '../context.ts';
import { isAppError } from '../domain/errors.ts';
import { watchEvents } from '../domain/events/event-feed.ts';
import {
  authenticateImapUser,
  canonicalName,
  copyToFolder,
  createFolder,
  deleteFolder,
  expungeMessage,
  flagsOf,
  folderScope,
  folderSize,
  imapUserStillValid,
  listFolders,
  marksOfStore,
  messagesByUid,
  moveToFolder,
  PERMANENT_FLAGS,
  rawSource,
  storeMarks,
  syncFolder,
  uidsIn,
  unseenCount,
  type ImapUser,
} from '../domain/imap/mailboxes.ts';
import { isStorageUnavailable } from '../store/store.ts';
import { errorFields } from '../log.ts';
import { countImapLogin } from '../metrics.ts';
import { AuthFailures, loginKey } from '../smtp/auth-failures.ts';
import { isLoopback } from '../smtp/submission.ts';
import { clientKey } from '../client-address.ts';
import { fetchItems, fetchValues, needsSource } from './fetch.ts';
import type { ImapValue } from './mime.ts';
import { mailboxMatcher } from './mailbox-pattern.ts';
import { compactSet, resolveSet } from './sequence.ts';
import { atom, CommandReader, encode, parseCommand, tagOf, utf8, WireError, type ImapCommand, type ImapNode } from './wire.ts';
import { searchFolder } from './search.ts';
import { appendMessage } from './append.ts';

/**
 * Messages read from the database per step of a FETCH, STORE or EXPUNGE: with one stored source
 * held at a time, what a FETCH of 10,000 messages holds is this many rows, not the folder.
 */
export const BATCH = 100;

/** What the listeners share with their sessions. */
export interface SessionHost {
  ctx: AppContext;
  /** The STARTTLS context (undefined: no certificate, no STARTTLS). */
  tlsContext(): SecureContext | undefined;
  failures: AuthFailures;
  /** Logs in one more session of the account, or answers false past imap.connections_per_account. */
  takeAccountSlot(accountId: string): boolean;
  releaseAccountSlot(accountId: string): void;
  /** Every live session, to say BYE at shutdown. */
  sessions: Set<ImapSession>;
  /** How often a logged-in session's key is checked again. */
  keyRecheckMs: number;
}

interface Selected {
  name: string;
  readOnly: boolean;
  uidValidity: number;
  uidNext: number;
  uids: number[];
  deleted: Set<number>;
}

/** The commands of the selected state (RFC 9051 §6.4). */
const SELECTED_COMMANDS = new Set(['FETCH', 'STORE', 'SEARCH', 'COPY', 'MOVE', 'EXPUNGE', 'CLOSE', 'UNSELECT', 'UID']);

class Refusal extends Error {
  readonly kind: 'NO' | 'BAD';
  readonly code?: string;
  constructor(kind: 'NO' | 'BAD', message: string, code?: string) {
    super(message);
    this.kind = kind;
    this.code = code;
  }
}
const no = (message: string, code?: string) => new Refusal('NO', message, code);
const badArgs = (message: string) => new Refusal('BAD', message);

export class ImapSession {
  private socket: Socket;
  private readonly reader: CommandReader;
  private user?: ImapUser;
  private key = '';
  private selected?: Selected;
  private secure: boolean;
  private done = false;
  private keyTimer?: NodeJS.Timeout;
  private readonly remote: string;
  /** ENABLE IMAP4rev2 was given: ESEARCH answers SEARCH, no RECENT (RFC 9051 §6.3.1). */
  private rev2 = false;
  /** The last SEARCH ... RETURN (SAVE) result, named `$` (SEARCHRES, RFC 5182). */
  private saved: number[] = [];
  private readonly host: SessionHost;

  constructor(host: SessionHost, socket: Socket, info: { secure: boolean; remoteAddress: string | undefined }) {
    this.host = host;
    this.socket = socket;
    this.secure = info.secure;
    this.remote = info.remoteAddress ?? '';
    const cfg = host.ctx.config.imap;
    this.reader = new CommandReader({ maxLine: cfg.max_line_bytes, maxLiteral: cfg.max_literal_bytes }, (line) => this.write([line]));
    this.reader.attach(socket);
  }

  private get ctx(): AppContext {
    return this.host.ctx;
  }

  /** Loopback clients may log in without TLS (as for SMTP submission). */
  private get mayLogin(): boolean {
    return this.secure || isLoopback(this.remote);
  }

  private capabilities(): string {
    const caps = ['IMAP4rev1', 'IMAP4rev2', 'LITERAL+', 'SASL-IR', 'IDLE', 'NAMESPACE', 'UNSELECT', 'MOVE', 'UIDPLUS', 'ENABLE', 'ID', 'SPECIAL-USE'];
    caps.push('ESEARCH', 'SEARCHRES', 'LIST-EXTENDED', 'LIST-STATUS', 'STATUS=SIZE', 'BINARY', 'CHILDREN');
    if (!this.user) {
      if (!this.secure && this.host.tlsContext()) caps.push('STARTTLS');
      if (this.mayLogin) caps.push('AUTH=PLAIN');
      else caps.push('LOGINDISABLED');
    }
    return caps.join(' ');
  }

  /** Writes raw response parts; answers whether the socket took them without queueing. */
  private write(parts: Array<string | Buffer>): boolean {
    if (this.socket.destroyed || !this.socket.writable) return false;
    return this.socket.write(parts.length === 1 ? parts[0] : Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p))));
  }

  /** Waits until the client has read what was written (bounded memory for big FETCHes). */
  private async flush(wrote: boolean): Promise<void> {
    if (wrote || this.socket.destroyed) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.socket.off('drain', done).off('close', done);
        resolve();
      };
      this.socket.once('drain', done).once('close', done);
    });
  }

  private untagged(text: string): boolean {
    return this.write([`* ${text}\r\n`]);
  }

  /** Ends the session with BYE (a revoked key, the idle timeout, shutdown). */
  bye(text: string): void {
    if (this.done) return;
    this.untagged(`BYE ${text}`);
    this.close();
  }

  private close(): void {
    this.done = true;
    if (this.keyTimer) clearInterval(this.keyTimer);
    this.socket.end();
    // A client that never reads its answers cannot hold the connection open.
    setTimeout(() => this.socket.destroy(), 1000).unref();
  }

  async run(): Promise<void> {
    this.host.sessions.add(this);
    const idle = this.ctx.config.imap.idle_timeout;
    const onTimeout = () => this.bye('autologout: idle for too long');
    this.socket.setTimeout(idle, onTimeout);
    this.untagged(`OK [CAPABILITY ${this.capabilities()}] mailroom IMAP ready`);
    try {
      while (!this.done) {
        const text = await this.reader.next();
        if (text === null) break;
        await this.handle(text);
      }
    } catch (err) {
      if (err instanceof WireError) this.bye(err.message);
      else {
        this.ctx.log.error('imap session failed', { remote: this.remote, ...errorFields(err) });
        this.bye('internal error');
      }
    } finally {
      this.done = true;
      if (this.keyTimer) clearInterval(this.keyTimer);
      if (this.user) this.host.releaseAccountSlot(this.user.accountId);
      this.host.sessions.delete(this);
      if (!this.socket.destroyed) this.socket.end();
    }
  }

  private async handle(text: string): Promise<void> {
    let cmd: ImapCommand;
    try {
      cmd = parseCommand(text);
    } catch (err) {
      this.write([
        `${tagOf(text)} BAD ${String((err as Error).message)
          .replace(/[\r\n]/g, ' ')
          .slice(0, 200)}\r\n`,
      ]);
      return;
    }
    try {
      const answer = await this.dispatch(cmd);
      if (answer !== null) this.write([`${cmd.tag} OK ${answer}\r\n`]);
    } catch (err) {
      if (err instanceof WireError) throw err;
      let line: string;
      if (err instanceof Refusal) line = `${err.kind}${err.code ? ` [${err.code}]` : ''} ${err.message}`;
      // A bad argument is BAD; one whose message names its response code ([BADCHARSET], [UNKNOWN-CTE]) is NO.
      else if (isAppError(err)) line = `${err.code === 'VALIDATION_ERROR' && !err.message.startsWith('[') ? 'BAD' : 'NO'}${imapCode(err.code)} ${err.message}`;
      else if (isStorageUnavailable(err)) line = 'NO [UNAVAILABLE] the database is unavailable, try again later';
      else {
        this.ctx.log.error('imap command failed', { remote: this.remote, command: cmd.command, ...errorFields(err) });
        line = 'NO [SERVERBUG] the command failed';
      }
      this.write([`${cmd.tag} ${line.replace(/[\r\n]/g, ' ')}\r\n`]);
    }
  }

  /** Runs one command; answers the text of its tagged OK (null: the command answered itself). */
  private async dispatch(cmd: ImapCommand): Promise<string | null> {
    const a = cmd.attributes;
    switch (cmd.command) {
      case 'CAPABILITY':
        this.untagged(`CAPABILITY ${this.capabilities()}`);
        return 'CAPABILITY completed';
      case 'NOOP':
      case 'CHECK':
        if (this.selected) await this.refresh(true);
        return `${cmd.command} completed`;
      case 'LOGOUT':
        this.untagged('BYE logging out');
        this.write([`${cmd.tag} OK LOGOUT completed\r\n`]);
        this.close();
        return null;
      case 'ID':
        this.untagged('ID ("name" "mailroom")');
        return 'ID completed';
      case 'ENABLE': {
        this.requireAuth();
        const asked = a.map((n) => String(nodeValue(n) ?? '').toUpperCase());
        if (asked.includes('IMAP4REV2')) this.rev2 = true;
        this.untagged(`ENABLED${this.rev2 ? ' IMAP4rev2' : ''}`);
        return 'ENABLE completed';
      }
      case 'STARTTLS':
        return this.startTls(cmd);
      case 'LOGIN':
        return this.login(text(a[0]), text(a[1]));
      case 'AUTHENTICATE':
        return this.authenticate(cmd);
    }
    this.requireAuth();
    switch (cmd.command) {
      case 'SELECT':
      case 'EXAMINE':
        return this.select(cmd.command, mailboxName(a[0]));
      case 'LIST':
      case 'LSUB':
        return this.list(cmd.command, a);
      case 'STATUS':
        return this.status(mailboxName(a[0]), a[1]);
      case 'NAMESPACE':
        this.untagged('NAMESPACE (("" "/")) NIL NIL');
        return 'NAMESPACE completed';
      case 'CREATE':
        this.requireScope('send');
        await createFolder(this.ctx, this.user!, mailboxName(a[0]));
        return 'CREATE completed';
      case 'DELETE':
        this.requireScope('send');
        await deleteFolder(this.ctx, this.user!, mailboxName(a[0]));
        return 'DELETE completed';
      case 'RENAME':
        throw no('folders are labels and cannot be renamed', 'CANNOT');
      case 'SUBSCRIBE':
      case 'UNSUBSCRIBE':
        return `${cmd.command} completed`;
      case 'APPEND':
        return appendMessage(this.ctx, this.user!, a);
      case 'IDLE':
        if (a.length) throw badArgs('IDLE takes no arguments');
        return this.idle();
    }
    if (!SELECTED_COMMANDS.has(cmd.command)) throw badArgs(`unknown command ${cmd.command.slice(0, 40)}`);
    const box = this.requireSelected();
    const uid = cmd.command === 'UID';
    const name = uid ? String(nodeValue(a[0]) ?? '').toUpperCase() : cmd.command;
    const args = uid ? a.slice(1) : a;
    switch (name) {
      case 'FETCH':
        await this.fetch(box, set(args[0]), args[1] ?? null, uid);
        return `${uid ? 'UID ' : ''}FETCH completed`;
      case 'STORE':
        if (args[2] === undefined) throw badArgs('STORE needs flags');
        await this.store(box, set(args[0]), text(args[1]), args[2], uid);
        return `${uid ? 'UID ' : ''}STORE completed`;
      case 'SEARCH':
        return this.search(cmd.tag, box, args, uid);
      case 'COPY':
        return this.copy(box, set(args[0]), mailboxName(args[1]), uid);
      case 'MOVE':
        return this.move(box, set(args[0]), mailboxName(args[1]), uid);
      case 'EXPUNGE':
        await this.expunge(box, uid ? resolve(box, set(args[0]), true, this.saved) : undefined);
        return `${uid ? 'UID ' : ''}EXPUNGE completed`;
      case 'CLOSE':
        if (!box.readOnly && box.deleted.size && this.user!.scopes.has('manage')) await this.expunge(box, undefined, true);
        this.selected = undefined;
        return 'CLOSE completed';
      case 'UNSELECT':
        this.selected = undefined;
        return 'UNSELECT completed';
    }
    throw badArgs(`unknown command ${uid ? 'UID ' : ''}${name.slice(0, 40)}`);
  }

  private requireAuth(): void {
    if (!this.user) throw badArgs('log in first');
  }

  private requireSelected(): Selected {
    this.requireAuth();
    if (!this.selected) throw badArgs('select a folder first');
    return this.selected;
  }

  private requireScope(scope: 'send' | 'manage'): void {
    if (!this.user!.scopes.has(scope)) throw no(`this API key lacks the \`${scope}\` scope`, 'NOPERM');
  }

  // ---- not authenticated ----------------------------------------------------------------------

  private startTls(cmd: ImapCommand): null {
    const context = this.host.tlsContext();
    if (this.secure || !context) throw badArgs('STARTTLS is not available here');
    this.write([`${cmd.tag} OK begin TLS now\r\n`]);
    const plain = this.socket;
    const secure = new TLSSocket(plain, { isServer: true, secureContext: context });
    secure.on('error', () => secure.destroy());
    this.socket = secure;
    this.secure = true;
    this.reader.attach(secure);
    secure.setTimeout(this.ctx.config.imap.idle_timeout, () => this.bye('autologout: idle for too long'));
    return null;
  }

  private async authenticate(cmd: ImapCommand): Promise<string | null> {
    const mech = text(cmd.attributes[0]).toUpperCase();
    if (mech !== 'PLAIN') throw no(`mechanism ${mech} is not supported; use PLAIN`, 'CANNOT');
    let response = cmd.attributes[1] ? text(cmd.attributes[1]) : undefined;
    if (response === undefined) {
      this.write(['+ \r\n']);
      response = (await this.reader.next()) ?? '*';
    }
    if (response.trim() === '*') throw badArgs('authentication cancelled');
    const decoded = Buffer.from(response.trim(), 'base64').toString('utf8').split('\0');
    if (decoded.length !== 3) throw badArgs('PLAIN needs authzid NUL user NUL password');
    return this.login(decoded[1], decoded[2], true);
  }

  private async login(username: string, password: string, already = false): Promise<string> {
    if (this.user) throw badArgs('already logged in');
    if (!this.mayLogin) throw no('log in only over TLS: STARTTLS first, or use the implicit TLS port', 'PRIVACYREQUIRED');
    const name = already ? username : utf8(username);
    const key = already ? password : utf8(password);
    const pair = loginKey(name, clientKey(this.remote));
    if (this.host.failures.blocked(pair)) {
      countImapLogin(this.ctx, 'rate_limited');
      throw no('too many failed logins for this user from your address, try again later', 'UNAVAILABLE');
    }
    let who: ImapUser;
    try {
      who = await authenticateImapUser(this.ctx, name, key);
    } catch (err) {
      if (!isAppError(err) || err.code !== 'UNAUTHORIZED') throw err;
      this.host.failures.failed(pair);
      countImapLogin(this.ctx, 'rejected');
      this.ctx.log.info('imap login refused', { remote: this.remote });
      throw no('authentication credentials invalid', 'AUTHENTICATIONFAILED');
    }
    this.host.failures.succeeded(pair);
    if (!this.host.takeAccountSlot(who.accountId)) {
      countImapLogin(this.ctx, 'limited');
      throw no(`at most ${this.ctx.config.imap.connections_per_account} IMAP sessions of an account at once`, 'LIMIT');
    }
    countImapLogin(this.ctx, 'accepted');
    this.user = who;
    this.key = key;
    this.watchKey();
    this.ctx.log.info('imap login', { remote: this.remote, inboxId: who.inboxId, keyId: who.keyId });
    return `[CAPABILITY ${this.capabilities()}] logged in`;
  }

  /** A session whose key is revoked, expires or loses `read` ends within the recheck interval. */
  private watchKey(): void {
    let checking = false;
    this.keyTimer = setInterval(() => {
      if (checking || !this.user) return;
      checking = true;
      void imapUserStillValid(this.ctx, this.user, this.key)
        .then(
          (valid) => {
            if (valid) return;
            this.ctx.log.info('imap session ended: key no longer valid', { remote: this.remote, keyId: this.user!.keyId });
            this.bye('the API key of this session was revoked or expired; log in again');
          },
          () => undefined,
        )
        .finally(() => (checking = false));
    }, this.host.keyRecheckMs);
    this.keyTimer.unref();
  }

  // ---- authenticated ---------------------------------------------------------------------------

  private async select(command: string, name: string): Promise<string> {
    this.selected = undefined;
    if (!folderScope(name)) throw no(`no folder ${name}`, 'NONEXISTENT');
    const snap = await syncFolder(this.ctx, this.user!, name);
    const readOnly = command === 'EXAMINE' || !this.user!.scopes.has('send');
    this.selected = { name, readOnly, uidValidity: snap.uidValidity, uidNext: snap.uidNext, uids: snap.uids, deleted: new Set() };
    this.untagged('FLAGS (\\Seen \\Flagged \\Deleted \\Answered \\Draft)');
    this.untagged(`${snap.uids.length} EXISTS`);
    if (!this.rev2) this.untagged('0 RECENT');
    this.untagged(`OK [PERMANENTFLAGS (${readOnly ? '' : PERMANENT_FLAGS.join(' ')})] flags that stay`);
    this.untagged(`OK [UIDVALIDITY ${snap.uidValidity}] UIDs valid`);
    this.untagged(`OK [UIDNEXT ${snap.uidNext}] next UID`);
    return `[${readOnly ? 'READ-ONLY' : 'READ-WRITE'}] ${command} completed`;
  }

  /**
   * LIST, with LIST-EXTENDED (RFC 5258) selection options (SPECIAL-USE, SUBSCRIBED: every folder
   * is subscribed) and return options (SPECIAL-USE, CHILDREN, SUBSCRIBED, STATUS: LIST-STATUS,
   * RFC 5819), and several patterns; LSUB as LIST.
   */
  private async list(command: string, args: ImapNode[]): Promise<string> {
    const rest = [...args];
    const selection = Array.isArray(rest[0]) ? (rest.shift() as ImapNode[]).map((n) => String(nodeValue(n) ?? '').toUpperCase()) : [];
    const reference = text(rest.shift());
    const patternNode = rest.shift();
    const patterns = (Array.isArray(patternNode) ? patternNode : [patternNode]).map((p) => text(p));
    let statusItems: ImapNode | undefined;
    if (String(nodeValue(rest[0]) ?? '').toUpperCase() === 'RETURN' && Array.isArray(rest[1])) {
      const options = rest[1];
      const at = options.findIndex((o) => String(nodeValue(o) ?? '').toUpperCase() === 'STATUS');
      if (at !== -1) statusItems = options[at + 1] ?? null;
    }
    if (patterns.length === 1 && patterns[0] === '') {
      this.untagged(`${command} (\\Noselect) "/" ""`);
      return `${command} completed`;
    }
    const matchers = patterns.map((p) => {
      const full = utf8(reference + p);
      return mailboxMatcher(full, full.toUpperCase().startsWith('INBOX'));
    });
    for (const f of await listFolders(this.ctx, this.user!)) {
      if (!matchers.some((matches) => matches(f.name))) continue;
      if (selection.includes('SPECIAL-USE') && !f.use) continue;
      const attrs = ['\\HasNoChildren', ...(f.use && command === 'LIST' ? [f.use] : []), ...(selection.includes('SUBSCRIBED') ? ['\\Subscribed'] : [])];
      this.write([`* ${command} (${attrs.join(' ')}) "/" `, ...encode(f.name), '\r\n']);
      if (statusItems !== undefined) await this.status(f.name, statusItems);
    }
    return `${command} completed`;
  }

  private async status(name: string, items: ImapNode): Promise<string> {
    if (!folderScope(name)) throw no(`no folder ${name}`, 'NONEXISTENT');
    const snap = await syncFolder(this.ctx, this.user!, name);
    const out: ImapValue[] = [];
    for (const item of Array.isArray(items) ? items : [items]) {
      const what = String(nodeValue(item) ?? '').toUpperCase();
      if (what === 'MESSAGES') out.push(atom(what), snap.uids.length);
      else if (what === 'UIDNEXT') out.push(atom(what), snap.uidNext);
      else if (what === 'UIDVALIDITY') out.push(atom(what), snap.uidValidity);
      else if (what === 'UNSEEN') out.push(atom(what), await unseenCount(this.ctx, this.user!, name));
      else if (what === 'RECENT') out.push(atom(what), 0);
      else if (what === 'SIZE') out.push(atom(what), await folderSize(this.ctx, this.user!, name));
      // \Deleted lives in the session: only the folder it has open has any.
      else if (what === 'DELETED') out.push(atom(what), this.selected?.name === name ? this.selected.deleted.size : 0);
      else throw badArgs(`unknown STATUS item ${what}`);
    }
    this.write(['* STATUS ', ...encode(name), ' ', ...encode(out), '\r\n']);
    return 'STATUS completed';
  }

  /**
   * IDLE (RFC 9051 §6.3.13): new mail and expunges are told as the event feed wakes the session
   * (a commit here, a NOTIFY from another node, a CLI commit on SQLite), until the client's DONE.
   */
  private async idle(): Promise<string> {
    this.write(['+ idling\r\n']);
    let chain = Promise.resolve();
    const wake = () => {
      if (!this.selected) return;
      chain = chain.then(() => this.refresh(true)).catch((err: unknown) => this.ctx.log.warn('imap idle refresh failed', errorFields(err)));
    };
    const stop = watchEvents(this.ctx, { accountId: this.user!.accountId, inboxId: this.user!.inboxId }, { wake, close: () => this.bye('server shutting down') });
    try {
      wake();
      const line = await this.reader.next();
      if (line === null) return 'IDLE ended';
      if (line.trim().toUpperCase() !== 'DONE') throw badArgs('expected DONE');
    } finally {
      stop();
      await chain;
    }
    return 'IDLE terminated';
  }

  // ---- selected --------------------------------------------------------------------------------

  /**
   * Catches the session up with its folder: new messages as EXISTS and, where the protocol allows
   * it (not during FETCH, STORE or SEARCH), messages gone as EXPUNGE.
   */
  private async refresh(expunges: boolean): Promise<void> {
    const box = this.selected!;
    const snap = await syncFolder(this.ctx, this.user!, box.name);
    if (this.selected !== box) return;
    const now = new Set(snap.uids);
    if (expunges) {
      // Each EXPUNGE counts after the ones before it; told from the last message back, every
      // number is the message's place in the view as it was (one pass, no splice per message).
      const gone: number[] = [];
      for (let i = 0; i < box.uids.length; i++) if (!now.has(box.uids[i])) gone.push(i);
      if (gone.length) {
        for (const i of gone) box.deleted.delete(box.uids[i]);
        box.uids = box.uids.filter((u) => now.has(u));
        for (let k = gone.length - 1; k >= 0; k--) this.untagged(`${gone[k] + 1} EXPUNGE`);
      }
    }
    const last = box.uids.length ? box.uids[box.uids.length - 1] : 0;
    const added = snap.uids.filter((u) => u > last);
    if (added.length) {
      box.uids.push(...added);
      this.untagged(`${box.uids.length} EXISTS`);
    }
    box.uidNext = snap.uidNext;
  }

  private seqOf(box: Selected, uid: number): number {
    let lo = 0;
    let hi = box.uids.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (box.uids[mid] === uid) return mid + 1;
      if (box.uids[mid] < uid) lo = mid + 1;
      else hi = mid - 1;
    }
    return 0;
  }

  private async fetch(box: Selected, setText: string, itemsNode: ImapNode, uid: boolean): Promise<void> {
    const items = fetchItems(itemsNode, uid);
    const marksSeen = !box.readOnly && items.some((i) => i.marksSeen);
    if (marksSeen && !items.some((i) => i.kind === 'FLAGS')) items.push({ name: 'FLAGS', kind: 'FLAGS' });
    const wanted = resolve(box, setText, uid, this.saved);
    const source = needsSource(items);
    for (let i = 0; i < wanted.length; i += BATCH) {
      const rows = await messagesByUid(this.ctx, this.user!, box.name, wanted.slice(i, i + BATCH));
      if (marksSeen) for (const r of rows.filter((r) => r.unread)) await storeMarks(this.ctx, this.user!, r.id, { unread: false }).then(() => (r.unread = false));
      const flags = await flagsOf(this.ctx, rows);
      for (const row of rows) {
        const seq = this.seqOf(box, row.uid);
        if (!seq) continue;
        const values = fetchValues(items, {
          uid: row.uid,
          flags: this.withDeleted(box, row.uid, flags.get(row.id) ?? []),
          createdAt: row.createdAt,
          size: row.size,
          source: source ? await rawSource(this.ctx, row) : undefined,
        });
        await this.flush(this.write([`* ${seq} FETCH `, ...encode(values), '\r\n']));
      }
    }
  }

  private withDeleted(box: Selected, uid: number, flags: string[]): string[] {
    return box.deleted.has(uid) ? [...flags, '\\Deleted'] : flags;
  }

  private async store(box: Selected, setText: string, itemText: string, flagsNode: ImapNode, uid: boolean): Promise<void> {
    if (box.readOnly) throw no('the folder is open read-only', 'READ-ONLY');
    const m = /^([+-]?)FLAGS(\.SILENT)?$/i.exec(itemText);
    if (!m) throw badArgs(`unknown STORE item ${itemText}`);
    const mode = m[1] as '+' | '-' | '';
    const silent = Boolean(m[2]);
    const flags = (Array.isArray(flagsNode) ? flagsNode : [flagsNode]).map((f) => utf8(String(nodeValue(f) ?? ''))).filter(Boolean);
    const deleted = flags.some((f) => f.toLowerCase() === '\\deleted');
    const wanted = resolve(box, setText, uid, this.saved);
    for (let i = 0; i < wanted.length; i += BATCH) {
      const rows = await messagesByUid(this.ctx, this.user!, box.name, wanted.slice(i, i + BATCH));
      const before = await flagsOf(this.ctx, rows);
      for (const row of rows) {
        const marks = marksOfStore(mode, flags, before.get(row.id) ?? []);
        if (marks.unread !== undefined || marks.addLabels?.length || marks.removeLabels?.length) await storeMarks(this.ctx, this.user!, row.id, marks);
        if (mode === '-' ? false : deleted) box.deleted.add(row.uid);
        else if (mode === '' || (mode === '-' && deleted)) box.deleted.delete(row.uid);
      }
      if (silent) continue;
      const after = await flagsOf(this.ctx, rows);
      for (const row of rows) {
        const seq = this.seqOf(box, row.uid);
        if (!seq) continue;
        const values: ImapValue[] = [atom('FLAGS'), this.withDeleted(box, row.uid, after.get(row.id) ?? []).map(atom)];
        if (uid) values.unshift(atom('UID'), row.uid);
        await this.flush(this.write([`* ${seq} FETCH `, ...encode(values), '\r\n']));
      }
    }
  }

  /** EXPUNGE (or UID EXPUNGE of `only`): what is marked \Deleted goes (src/domain/imap/mailboxes.ts says how). */
  private async expunge(box: Selected, only: number[] | undefined, silent = false): Promise<void> {
    if (box.readOnly) throw no('the folder is open read-only', 'READ-ONLY');
    this.requireScope('manage');
    const named = only && new Set(only);
    const targets = box.uids.filter((u) => box.deleted.has(u) && (!named || named.has(u)));
    for (let i = 0; i < targets.length; i += BATCH) {
      for (const row of await messagesByUid(this.ctx, this.user!, box.name, targets.slice(i, i + BATCH))) {
        await expungeMessage(this.ctx, this.user!, box.name, row.id);
      }
    }
    if (!silent) await this.refresh(true);
  }

  private async copy(box: Selected, setText: string, target: string, uid: boolean): Promise<string> {
    this.requireScope('send');
    const scope = folderScope(target);
    if (!scope) throw no(`no folder ${target}`, 'TRYCREATE');
    if (scope.kind !== 'label') throw no('messages can be copied only into label folders (a copy adds the label)', 'CANNOT');
    const wanted = resolve(box, setText, uid, this.saved);
    const pairs: Array<[number, number]> = [];
    let uidValidity = 0;
    for (let i = 0; i < wanted.length; i += BATCH) {
      const rows = await messagesByUid(this.ctx, this.user!, box.name, wanted.slice(i, i + BATCH));
      await copyToFolder(
        this.ctx,
        this.user!,
        target,
        rows.map((r) => r.id),
      );
      const copies = await uidsIn(
        this.ctx,
        this.user!,
        target,
        rows.map((r) => r.id),
      );
      uidValidity = copies.uidValidity;
      for (const r of rows) if (copies.uids.has(r.id)) pairs.push([r.uid, copies.uids.get(r.id)!]);
    }
    // UIDPLUS (RFC 4315): which UID each copy has in the target.
    if (pairs.length) return `[COPYUID ${uidValidity} ${pairs.map((p) => p[0]).join(',')} ${pairs.map((p) => p[1]).join(',')}] ${uid ? 'UID ' : ''}COPY completed`;
    return `${uid ? 'UID ' : ''}COPY completed`;
  }

  /** MOVE (RFC 6851): the moved messages leave the folder, told as EXPUNGE. */
  private async move(box: Selected, setText: string, target: string, uid: boolean): Promise<string> {
    if (box.readOnly) throw no('the folder is open read-only', 'READ-ONLY');
    const scope = folderScope(target);
    if (!scope) throw no(`no folder ${target}`, 'TRYCREATE');
    if (target !== 'Trash' && (scope.kind !== 'label' || folderScope(box.name)?.kind !== 'label')) {
      throw no('messages move only into Trash (deleting them) or from one label folder to another; COPY adds a label', 'CANNOT');
    }
    const wanted = resolve(box, setText, uid, this.saved);
    for (let i = 0; i < wanted.length; i += BATCH) {
      const rows = await messagesByUid(this.ctx, this.user!, box.name, wanted.slice(i, i + BATCH));
      await moveToFolder(
        this.ctx,
        this.user!,
        box.name,
        target,
        rows.map((r) => r.id),
      );
    }
    await this.refresh(true);
    return `${uid ? 'UID ' : ''}MOVE completed`;
  }

  /**
   * SEARCH; with RETURN (MIN MAX COUNT ALL SAVE) or after ENABLE IMAP4rev2 the answer is ESEARCH
   * (RFC 4731), and SAVE keeps the result as `$` (RFC 5182).
   */
  private async search(tag: string, box: Selected, args: ImapNode[], uid: boolean): Promise<string> {
    let options: string[] | undefined;
    if (String(nodeValue(args[0]) ?? '').toUpperCase() === 'RETURN' && Array.isArray(args[1])) {
      options = args[1].map((o) => String(nodeValue(o) ?? '').toUpperCase());
      args = args.slice(2);
      if (!options.length) options = ['ALL'];
    }
    const found = await searchFolder(this.ctx, this.user!, box.name, box.uids, box.deleted, args, this.saved);
    const numbers = uid ? found : found.map((u) => this.seqOf(box, u)).filter(Boolean);
    const done = `${uid ? 'UID ' : ''}SEARCH completed`;
    if (!options && !this.rev2) {
      // One line, written in parts: 10,000 numbers are 60 kB.
      this.write(['* SEARCH']);
      for (let i = 0; i < numbers.length; i += 1000) this.write([` ${numbers.slice(i, i + 1000).join(' ')}`]);
      this.write(['\r\n']);
      return done;
    }
    options ??= ['ALL'];
    if (options.includes('SAVE')) {
      this.saved = found;
      // Only SAVE: nothing to answer (RFC 5182 §2.1).
      if (options.length === 1) return done;
    }
    const parts = [`* ESEARCH (TAG "${tag.replace(/["\\]/g, '')}")${uid ? ' UID' : ''}`];
    if (options.includes('MIN') && numbers.length) parts.push(` MIN ${numbers[0]}`);
    if (options.includes('MAX') && numbers.length) parts.push(` MAX ${numbers[numbers.length - 1]}`);
    if (options.includes('ALL') && numbers.length) parts.push(` ALL ${compactSet(numbers)}`);
    if (options.includes('COUNT')) parts.push(` COUNT ${numbers.length}`);
    this.write([...parts, '\r\n']);
    return done;
  }
}

/** The IMAP response code of an AppError (RFC 5530). */
function imapCode(code: string): string {
  if (code === 'FORBIDDEN' || code === 'INSUFFICIENT_SCOPE') return ' [NOPERM]';
  if (code.endsWith('_NOT_FOUND') || code === 'NOT_FOUND') return ' [NONEXISTENT]';
  if (code === 'RATE_LIMITED' || code === 'SEARCH_TIMEOUT' || code === 'SERVICE_UNAVAILABLE') return ' [UNAVAILABLE]';
  if (code === 'QUOTA_EXCEEDED') return ' [OVERQUOTA]';
  if (code === 'VALIDATION_ERROR' || code === 'INVALID_QUERY') return '';
  return '';
}

function nodeValue(node: ImapNode | undefined): string | undefined {
  if (!node || Array.isArray(node)) return undefined;
  return node.value;
}

/** A string argument (atom, quoted or literal), as latin1 (utf8() reads it as text). */
function text(node: ImapNode | undefined): string {
  const v = nodeValue(node);
  if (v === undefined) throw badArgs('missing argument');
  return String(v);
}

function mailboxName(node: ImapNode | undefined): string {
  return canonicalName(utf8(text(node)));
}

function set(node: ImapNode | undefined): string {
  return text(node);
}

function resolve(box: Selected, setText: string, uid: boolean, saved: readonly number[] = []): number[] {
  // `$`: the saved result of the last SEARCH ... RETURN (SAVE) (RFC 5182), UIDs still here.
  if (setText === '$') {
    const named = new Set(saved);
    return box.uids.filter((u) => named.has(u));
  }
  const uids = resolveSet(setText, box.uids, uid);
  if (typeof uids === 'string') throw badArgs(uids);
  return uids;
}

/** The TLS context of a certificate pair (STARTTLS). */
export function contextOf(files: { key: Buffer; cert: Buffer }): SecureContext {
  return createSecureContext({ key: files.key, cert: files.cert });
}
