// The event feed: wakes whoever waits for new events (GET /events/stream, long-polls) of the
// account (and inbox) an event was recorded for, at once after a commit of this process
// (recordEvent calls eventRecorded), on another node within a NOTIFY (the signal names the
// account and inbox), and within `pollMs` after a commit of another process on the same SQLite
// database (a CLI command), seen through SQLite's data_version: one pragma read per tick, only
// while someone is watching; that one names no account, so it wakes every watcher. Watchers
// re-read from their own cursor when woken; the feed carries no data, so it cannot lose or
// repeat any. An event wakes only its account's watchers: one tenant's idle streams cost
// another tenant's intake nothing.
import type { AppContext } from '../../context.ts';
import { errorFields } from '../../log.ts';

export interface EventWatcher {
  /** Something may have been recorded: read again from your cursor. */
  wake(): void;
  /** The server is stopping: end what you hold open. */
  close?(): void;
}

/** Whose events a watcher waits for: an account's, or only those naming one of its inboxes. */
export interface WatchScope {
  accountId: string;
  inboxId?: string;
}

/** Timing of the feed; tests shorten it (the keep-alive interval lives with the stream). */
export const FEED_SETTINGS = { pollMs: 1000 };

interface Watching {
  scope: WatchScope;
  watcher: EventWatcher;
}

interface Feed {
  byAccount: Map<string, Set<Watching>>;
  size: number;
  /** Accounts to wake at the end of this turn, each with its inboxes ('' for events naming none). */
  pending: Map<string, Set<string>>;
  /** Wake every watcher (a commit of another process, account unknown). */
  everyone: boolean;
  scheduled: boolean;
  timer?: NodeJS.Timeout;
  probe?: () => boolean;
}

/** The signal other processes hear: `events/<accountId>/<inboxId or empty>`. */
const SIGNAL = 'events/';

const feeds = new WeakMap<AppContext, Feed>();

function feedOf(ctx: AppContext): Feed {
  let feed = feeds.get(ctx);
  if (feed) return feed;
  const f: Feed = { byAccount: new Map(), size: 0, pending: new Map(), everyone: false, scheduled: false };
  feeds.set(ctx, f);
  // Another node recorded an event (PostgreSQL: NOTIFY).
  ctx.store.listen((signal) => {
    // A node of the previous version names no account.
    if (signal === 'events') return schedule(f, null);
    if (!signal.startsWith(SIGNAL)) return;
    const [accountId, inboxId] = signal.slice(SIGNAL.length).split('/');
    if (accountId) schedule(f, accountId, inboxId ?? '');
  });
  return f;
}

function schedule(feed: Feed, accountId: string | null, inboxId = ''): void {
  if (accountId === null) feed.everyone = true;
  else {
    // Nobody of this account watches here: nothing to remember.
    if (!feed.byAccount.has(accountId)) return;
    let inboxes = feed.pending.get(accountId);
    if (!inboxes) feed.pending.set(accountId, (inboxes = new Set()));
    inboxes.add(inboxId);
  }
  if (feed.scheduled) return;
  feed.scheduled = true;
  // Many events in one turn wake each watcher once.
  setImmediate(() => {
    feed.scheduled = false;
    const everyone = feed.everyone;
    const pending = feed.pending;
    feed.everyone = false;
    feed.pending = new Map();
    const woken: EventWatcher[] = [];
    if (everyone) for (const set of feed.byAccount.values()) for (const w of set) woken.push(w.watcher);
    else {
      for (const [accountId, inboxes] of pending) {
        // An account-wide watcher wakes for any event; an inbox's only for events naming it.
        for (const w of feed.byAccount.get(accountId) ?? []) if (w.scope.inboxId === undefined || inboxes.has(w.scope.inboxId)) woken.push(w.watcher);
      }
    }
    for (const w of woken) w.wake();
  });
}

/**
 * After the commit of an event of `accountId` (naming `inboxId`, for message.* events): wakes its
 * watchers here and tells the other processes of the database.
 */
export function eventRecorded(ctx: AppContext, accountId: string, inboxId?: string): void {
  const feed = feeds.get(ctx);
  if (feed) schedule(feed, accountId, inboxId ?? '');
  ctx.store.announce(`${SIGNAL}${accountId}/${inboxId ?? ''}`);
}

/** Starts waking `watcher` on new events of `scope`; returns the function that stops it. */
export function watchEvents(ctx: AppContext, scope: WatchScope, watcher: EventWatcher): () => void {
  const feed = feedOf(ctx);
  const entry: Watching = { scope, watcher };
  let set = feed.byAccount.get(scope.accountId);
  if (!set) feed.byAccount.set(scope.accountId, (set = new Set()));
  set.add(entry);
  feed.size++;
  if (!feed.timer) {
    feed.probe ??= ctx.store.externalCommits();
    feed.probe(); // from now on
    feed.timer = setInterval(() => {
      try {
        if (feed.probe!()) schedule(feed, null);
      } catch (err) {
        ctx.log.error('checking for events recorded elsewhere failed', errorFields(err));
      }
    }, FEED_SETTINGS.pollMs);
    feed.timer.unref();
  }
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    set.delete(entry);
    feed.size--;
    if (set.size === 0 && feed.byAccount.get(scope.accountId) === set) feed.byAccount.delete(scope.accountId);
    if (feed.size === 0 && feed.timer) {
      clearInterval(feed.timer);
      feed.timer = undefined;
    }
  };
}

/** At shutdown: every watcher ends what it holds open (streams end, long-polls answer). */
export function closeEventWatchers(ctx: AppContext): void {
  const feed = feeds.get(ctx);
  if (!feed) return;
  for (const set of [...feed.byAccount.values()]) {
    for (const w of [...set]) {
      try {
        w.watcher.close?.();
      } catch (err) {
        ctx.log.error('closing an event watcher failed', errorFields(err));
      }
    }
  }
}
