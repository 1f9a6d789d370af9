// A Server-Sent Events client for tests of GET /events/stream: fetch over a real socket, the
// `text/event-stream` parsed as it arrives (frames and comment lines kept apart), so a test can
// wait for frames, drop the connection and see when the server ended it. Any node's URL with any
// key: the several-nodes tests open a stream on one node with an account made through another.
import { until } from './wait.ts';

export interface Frame {
  id?: string;
  event?: string;
  data?: any;
}

export interface Stream {
  status: number;
  headers: Headers;
  frames: Frame[];
  comments: string[];
  /** Resolves with the frames once at least `n` arrived. */
  waitFrames(n: number, timeoutMs?: number): Promise<Frame[]>;
  close(): void;
  /** Resolves when the server ended the stream. */
  ended: Promise<void>;
}

/** Parses `text/event-stream` (lines `field: value`, events separated by a blank line). */
export function parseBlock(block: string, frames: Frame[], comments: string[]): void {
  const f: Frame = {};
  let data: string[] | undefined;
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) comments.push(line.slice(1).trim());
    else {
      const i = line.indexOf(':');
      const field = i === -1 ? line : line.slice(0, i);
      const value = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'id') f.id = value;
      else if (field === 'event') f.event = value;
      else if (field === 'data') (data ??= []).push(value);
    }
  }
  if (data) f.data = JSON.parse(data.join('\n'));
  if (f.id || f.event || data) frames.push(f);
}

export async function openStream(t: { url: string; key: string }, query = '', opts: { key?: string; headers?: Record<string, string> } = {}): Promise<Stream> {
  const ac = new AbortController();
  const res = await fetch(`${t.url}/events/stream${query}`, { headers: { authorization: `Bearer ${opts.key ?? t.key}`, ...opts.headers }, signal: ac.signal });
  const frames: Frame[] = [];
  const comments: string[] = [];
  let endedResolve!: () => void;
  const ended = new Promise<void>((r) => (endedResolve = r));
  if (res.status === 200 && res.body) {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let at: number;
          while ((at = buffer.indexOf('\n\n')) !== -1) {
            parseBlock(buffer.slice(0, at), frames, comments);
            buffer = buffer.slice(at + 2);
          }
        }
      } catch {
        /* aborted */
      }
      endedResolve();
    })();
  } else endedResolve();
  return {
    status: res.status,
    headers: res.headers,
    frames,
    comments,
    waitFrames: (n, timeoutMs = 8000) => until(`${n} stream events (have ${frames.length})`, () => (frames.length >= n ? frames : undefined), timeoutMs),
    close: () => ac.abort(),
    ended,
  };
}
