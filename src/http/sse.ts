// GET /events/stream as Server-Sent Events (WHATWG HTML §9.2): each event is written as
// `id:` (the event id), `event:` (its type) and `data:` (the envelope webhooks carry, one line
// of JSON). The stream reads the database from its cursor whenever the event feed wakes it, so
// what it sends is what was committed, in id order, each event once; a client that reconnects
// with Last-Event-ID continues exactly there (also after a restart: events are rows).
//
// Memory stays bounded: events are written while the socket's unsent bytes are under
// `maxBufferedBytes`; a client that stops reading past that gets a last `event: dropped` naming
// the last event written, and the stream ends (it resumes by id whenever it likes).
//
// On several nodes an event committed while an older transaction is open is read only once that
// one ends, which may wake nobody: while such events wait, the stream looks again, sooner first.
import type { ServerResponse } from 'node:http';
import type { AppContext } from '../context.ts';
import { FEED_SETTINGS, watchEvents } from '../domain/events/event-feed.ts';
import { eventsHeldBack, listEvents, type EventEnvelope, type EventQuery } from '../domain/events/events.ts';
import { errorFields } from '../log.ts';

/** Timing and bounds of every stream; tests shorten them. */
export const STREAM_SETTINGS = {
  /** A comment line this often keeps proxies and load balancers from closing an idle stream. */
  keepAliveMs: 15_000,
  /** Unsent bytes a stream may hold before the client is dropped. */
  maxBufferedBytes: 1 << 20,
  /** Events read per query. */
  batch: 100,
  /** After the final `dropped` event, how long a client that still reads nothing keeps its socket. */
  dropGraceMs: 10_000,
};

/** Past this many unsent bytes, the next write waits for the socket to drain (a burst, not a stall). */
const SOFT_BUFFERED_BYTES = 64 * 1024;
/** A client whose socket has not drained for this long is stalled (see drained()). */
const STALL_MS = 1000;
/** The first look again at events held back by an open transaction; doubled up to FEED_SETTINGS.pollMs. */
const HELD_BACK_RETRY_MS = 10;

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache, no-transform',
  // nginx buffers responses unless told not to.
  'X-Accel-Buffering': 'no',
};

const frame = (e: EventEnvelope) => `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify({ id: e.id, type: e.type, createdAt: e.createdAt, data: e.data })}\n\n`;

/**
 * Streams the account's events after `query.after` (matching `query`'s filters) until the client
 * goes, the server stops, or the client is dropped for not reading.
 */
export function streamEvents(ctx: AppContext, res: ServerResponse, accountId: string, query: EventQuery): void {
  let cursor = query.after;
  let closed = false;
  let running = false;
  let again = false;
  let stalled = false;
  let retry: NodeJS.Timeout | undefined;
  let retryMs = HELD_BACK_RETRY_MS;
  res.on('drain', () => (stalled = false));
  const filter: EventQuery = { ...query, limit: STREAM_SETTINGS.batch };

  const stopWatching = watchEvents(ctx, { wake: () => void pump(), close: () => finish() });
  const keepAlive = setInterval(() => {
    if (!closed) res.write(': keep-alive\n\n');
  }, STREAM_SETTINGS.keepAliveMs);
  keepAlive.unref();
  res.on('close', () => cleanup());
  res.on('error', () => cleanup());
  // Sent at once, so the client knows the stream is open before the first event.
  res.write(': connected\n\n');
  void pump();

  function cleanup(): void {
    if (closed) return;
    closed = true;
    stopWatching();
    clearInterval(keepAlive);
    clearTimeout(retry);
  }

  function finish(): void {
    if (closed) return;
    cleanup();
    res.end();
  }

  function drop(): void {
    const reason = `the client read too slowly: over ${STREAM_SETTINGS.maxBufferedBytes} bytes were waiting; reconnect with Last-Event-ID to continue`;
    ctx.log.info('event stream dropped', { accountId, lastEventId: cursor ?? null, buffered: res.writableLength });
    // No `id:` line: the client's last event id stays the last event it actually got.
    res.write(`event: dropped\ndata: ${JSON.stringify({ lastEventId: cursor ?? null, reason })}\n\n`);
    finish();
    // A client that reads nothing would keep these bytes forever.
    setTimeout(() => res.destroy(), STREAM_SETTINGS.dropGraceMs).unref();
  }

  /**
   * Resolves when the socket drained, or after STALL_MS without it: the client is then taken as
   * stalled and later writes no longer wait, so its unsent bytes reach the bound and it is
   * dropped (a drain clears the mark). A burst to a reading client never waits that long.
   */
  function drained(): Promise<void> {
    if (res.writableLength < SOFT_BUFFERED_BYTES || stalled) return new Promise((r) => setImmediate(r));
    return new Promise((resolve) => {
      const done = (timedOut: boolean) => {
        clearTimeout(timer);
        res.off('drain', onDrain);
        res.off('close', onClose);
        if (timedOut) stalled = true;
        resolve();
      };
      const onDrain = () => done(false);
      const onClose = () => done(false);
      const timer = setTimeout(() => done(true), STALL_MS);
      res.on('drain', onDrain);
      res.on('close', onClose);
    });
  }

  async function pump(): Promise<void> {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        for (;;) {
          const batch = await listEvents(ctx, accountId, { ...filter, after: cursor });
          for (const e of batch) {
            // A burst waits for the socket to drain; a client that does not read lets the bytes
            // pile up past the bound (drained() gives up after a second) and is dropped.
            if (res.writableLength >= SOFT_BUFFERED_BYTES) await drained();
            if (closed) return;
            if (res.writableLength > STREAM_SETTINGS.maxBufferedBytes) return drop();
            res.write(frame(e));
            cursor = e.id;
          }
          if (batch.length < filter.limit) break;
          await drained();
          if (closed) return;
        }
        if (!again && (await eventsHeldBack(ctx, accountId, { ...filter, after: cursor }))) {
          if (closed) return;
          clearTimeout(retry);
          retry = setTimeout(() => void pump(), retryMs);
          retryMs = Math.min(retryMs * 2, FEED_SETTINGS.pollMs);
        } else retryMs = HELD_BACK_RETRY_MS;
      } while (again && !closed);
    } catch (err) {
      // The inbox of an inboxId filter was deleted, or the database failed: end the stream; the
      // client reconnects and gets the error as an answer.
      ctx.log.error('event stream failed', { accountId, ...errorFields(err) });
      finish();
    } finally {
      running = false;
    }
  }
}
