// GET /events/stream as Server-Sent Events (WHATWG HTML §9.2): each event is written as
// `id:` (the event id), `event:` (its type) and `data:` (the envelope webhooks carry, one line
// of JSON). The stream reads the database from its cursor whenever the event feed wakes it, so
// what it sends is what was committed, in id order, each event once; a client that reconnects
// with Last-Event-ID continues exactly there (also after a restart: events are rows).
//
// Memory stays bounded: every frame is measured before it is written, and is written only while
// the socket's unsent bytes stay within `[limits] stream_buffer_bytes` (a frame alone on an empty
// buffer always goes; message bodies in frames are cut to `list_body_bytes`, so a frame is
// small). A frame that does not fit waits for the client to read; a client that has read nothing
// for `stream_stall_timeout` (checked there and on every keep-alive tick) gets a last
// `event: dropped` naming the last event written, and the stream ends (it resumes by id
// whenever it likes).
//
// Each stream holds one of its account's `streams_per_account` slots (domain/events/stream-slots.ts)
// and ends within seconds of its key being revoked or expiring.
//
// On several nodes an event committed while an older transaction is open is read only once that
// one ends, which may wake nobody: while such events wait, the stream looks again, sooner first.
import type { ServerResponse } from 'node:http';
import type { AppContext } from '../context.ts';
import { FEED_SETTINGS, watchEvents } from '../domain/events/event-feed.ts';
import { eventsHeldBack, listEvents, type EventEnvelope, type EventQuery } from '../domain/events/events.ts';
import type { StreamSlot } from '../domain/events/stream-slots.ts';
import { errorFields } from '../log.ts';

/** Timing of every stream; tests shorten it (the bounds are `[limits] stream_*`). */
export const STREAM_SETTINGS = {
  /** A comment line this often keeps proxies and load balancers from closing an idle stream. */
  keepAliveMs: 15_000,
  /** Events read per query. */
  batch: 100,
  /** After the final `dropped` event, how long a client that still reads nothing keeps its socket. */
  dropGraceMs: 10_000,
};

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
 * goes, the server stops, the key is revoked (`slot.revoked`) or the client is dropped for not
 * reading. Releases `slot` when it ends, however it ends.
 */
export function streamEvents(ctx: AppContext, res: ServerResponse, accountId: string, query: EventQuery, slot: StreamSlot): void {
  const { stream_buffer_bytes: maxBuffered, stream_stall_timeout: stallMs } = ctx.config.limits;
  let cursor = query.after;
  let closed = false;
  let running = false;
  let again = false;
  let retry: NodeJS.Timeout | undefined;
  let retryMs = HELD_BACK_RETRY_MS;
  /** Since when the socket has unsent bytes it did not take (a write answered false); cleared on drain. */
  let waitingSince: number | undefined;
  res.on('drain', () => (waitingSince = undefined));
  const filter: EventQuery = { ...query, limit: STREAM_SETTINGS.batch };

  const stopWatching = watchEvents(ctx, { accountId, inboxId: query.inboxId }, { wake: () => void pump(), close: () => finish() });
  void slot.revoked.then(() => {
    if (closed) return;
    ctx.log.info('event stream ended: its API key was revoked or expired', { accountId });
    finish();
  });
  const keepAlive = setInterval(() => {
    if (closed) return;
    if (waitingSince !== undefined && Date.now() - waitingSince >= stallMs) return drop();
    write(': keep-alive\n\n');
  }, STREAM_SETTINGS.keepAliveMs);
  keepAlive.unref();
  res.on('close', () => cleanup());
  res.on('error', () => cleanup());
  if (res.destroyed) return cleanup();
  // Sent at once, so the client knows the stream is open before the first event.
  write(': connected\n\n');
  void pump();

  function write(text: string): void {
    if (!res.write(text)) waitingSince ??= Date.now();
  }

  function cleanup(): void {
    if (closed) return;
    closed = true;
    stopWatching();
    slot.release();
    clearInterval(keepAlive);
    clearTimeout(retry);
  }

  function finish(): void {
    if (closed) return;
    cleanup();
    res.end();
  }

  function drop(): void {
    const reason = `the client read too slowly: nothing it was sent was read for ${Math.round(stallMs / 1000)} s; reconnect with Last-Event-ID to continue`;
    ctx.log.info('event stream dropped', { accountId, lastEventId: cursor ?? null, buffered: res.writableLength });
    // No `id:` line: the client's last event id stays the last event it actually got.
    res.write(`event: dropped\ndata: ${JSON.stringify({ lastEventId: cursor ?? null, reason })}\n\n`);
    finish();
    // A client that reads nothing would keep these bytes forever.
    setTimeout(() => res.destroy(), STREAM_SETTINGS.dropGraceMs).unref();
  }

  /**
   * Resolves true once the socket drained, false when the client read nothing for
   * `stream_stall_timeout` since it stopped taking bytes (it is then dropped).
   */
  function drained(): Promise<boolean> {
    const left = stallMs - (Date.now() - (waitingSince ?? Date.now()));
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        res.off('drain', onDrain);
        res.off('close', onClose);
        resolve(ok);
      };
      const onDrain = () => done(true);
      const onClose = () => done(true);
      const timer = setTimeout(() => done(false), Math.max(0, left));
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
            const text = frame(e);
            const size = Buffer.byteLength(text);
            // Counted before it is written: while the socket holds bytes it did not take and this
            // frame would take them past the bound, wait for the client to read.
            while (!closed && res.writableNeedDrain && res.writableLength + size > maxBuffered) {
              if (!(await drained())) return drop();
            }
            if (closed) return;
            write(text);
            cursor = e.id;
          }
          if (batch.length < filter.limit) break;
          // A long backlog: let the rest of the server run between pages.
          await new Promise((r) => setImmediate(r));
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
