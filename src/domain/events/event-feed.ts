// The event feed: wakes whoever waits for new events (GET /events/stream, long-polls) at once
// after a commit of this process (recordEvent signals 'events'), and within `pollMs` after a
// commit of another process on the same database (a CLI command), seen through SQLite's
// data_version: one pragma read per tick, and only while someone is watching. Watchers re-read
// from their own cursor when woken; the feed carries no data, so it cannot lose or repeat any.
import type { AppContext } from '../../context.ts';
import { errorFields } from '../../log.ts';

export interface EventWatcher {
  /** Something may have been recorded: read again from your cursor. */
  wake(): void;
  /** The server is stopping: end what you hold open. */
  close?(): void;
}

/** Timing of the feed; tests shorten it (the keep-alive interval lives with the stream). */
export const FEED_SETTINGS = { pollMs: 1000 };

interface Feed {
  watchers: Set<EventWatcher>;
  scheduled: boolean;
  timer?: NodeJS.Timeout;
  probe?: () => boolean;
}

const feeds = new WeakMap<AppContext, Feed>();

function feedOf(ctx: AppContext): Feed {
  let feed = feeds.get(ctx);
  if (feed) return feed;
  const f: Feed = { watchers: new Set(), scheduled: false };
  feeds.set(ctx, f);
  // One listener per context: many events in one turn wake each watcher once.
  ctx.onSignal('events', () => schedule(f));
  return f;
}

function schedule(feed: Feed): void {
  if (feed.scheduled || feed.watchers.size === 0) return;
  feed.scheduled = true;
  setImmediate(() => {
    feed.scheduled = false;
    for (const w of [...feed.watchers]) w.wake();
  });
}

/** Starts waking `watcher` on new events; returns the function that stops it. */
export function watchEvents(ctx: AppContext, watcher: EventWatcher): () => void {
  const feed = feedOf(ctx);
  feed.watchers.add(watcher);
  if (!feed.timer) {
    feed.probe ??= ctx.store.externalCommits();
    feed.probe(); // from now on
    feed.timer = setInterval(() => {
      try {
        if (feed.probe!()) schedule(feed);
      } catch (err) {
        ctx.log.error('checking for events recorded elsewhere failed', errorFields(err));
      }
    }, FEED_SETTINGS.pollMs);
    feed.timer.unref();
  }
  return () => {
    feed.watchers.delete(watcher);
    if (feed.watchers.size === 0 && feed.timer) {
      clearInterval(feed.timer);
      feed.timer = undefined;
    }
  };
}

/** At shutdown: every watcher ends what it holds open (streams end, long-polls answer). */
export function closeEventWatchers(ctx: AppContext): void {
  const feed = feeds.get(ctx);
  if (!feed) return;
  for (const w of [...feed.watchers]) {
    try {
      w.close?.();
    } catch (err) {
      ctx.log.error('closing an event watcher failed', errorFields(err));
    }
  }
}
