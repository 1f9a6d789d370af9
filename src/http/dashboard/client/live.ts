// Live updates: the account's events from GET /events/stream while signed in. EventSource
// cannot send the Authorization header and the API takes the key nowhere else (a key in a URL
// would end up in logs), so the stream is read with fetch and parsed here. A dropped stream is
// opened again with Last-Event-ID, so no event in between is missed. New mail refreshes the
// open list and the unread counts; a status change redraws the message; a new hold shows in the
// open Held or Approvals view.
import { api, enc, failed, STORE, state } from './core.ts';
import { loadList, loadUnread, messageCard, openThread, renderMailboxes } from './mail.ts';
import { countWaiting } from './guard.ts';
import { route, signOut } from './shell.ts';
import type { Message } from './types.ts';

const LIVE_RETRY_MS = 1000;
const LIVE_RETRY_MAX_MS = 30000;

/** The open stream: its AbortController, the last event id seen, the wait before reconnecting. */
export const live = {
  abort: null as AbortController | null,
  lastId: '',
  retryMs: LIVE_RETRY_MS,
  timer: undefined as ReturnType<typeof setTimeout> | undefined,
  opened: false,
};

function setLiveState(text: string): void {
  const s = document.getElementById('live');
  if (s) {
    s.textContent = text;
    s.hidden = !text;
  }
}

export function stopLive(): void {
  clearTimeout(live.timer);
  live.abort?.abort();
  Object.assign(live, { abort: null, lastId: '', retryMs: LIVE_RETRY_MS, timer: undefined, opened: false });
  setLiveState('');
}

export async function startLive(): Promise<void> {
  clearTimeout(live.timer);
  const key = sessionStorage.getItem(STORE);
  if (!key) return;
  const abort = new AbortController();
  live.abort = abort;
  const headers: Record<string, string> = { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' };
  if (live.lastId) headers['Last-Event-ID'] = live.lastId;
  try {
    const res = await fetch('/events/stream', { headers, cache: 'no-store', signal: abort.signal });
    if (res.status === 401) {
      signOut('The server refused the key.');
      return;
    }
    if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
    setLiveState('Live');
    live.retryMs = LIVE_RETRY_MS;
    // Back after a gap: the events in it come with Last-Event-ID, but before the first event
    // there was no id to resume from, so the list is loaded again too.
    if (live.opened && document.getElementById('threads-body')) refreshList().catch(failed);
    live.opened = true;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        onFrame(parseFrame(block));
      }
    }
  } catch {
    if (abort.signal.aborted) return;
  }
  if (abort.signal.aborted || live.abort !== abort) return;
  // The stream ended or failed (a restart, a network change, a stall): again, from the last id.
  setLiveState('Reconnecting\u2026');
  live.timer = setTimeout(() => void startLive(), live.retryMs);
  live.retryMs = Math.min(live.retryMs * 2, LIVE_RETRY_MAX_MS);
}

interface Frame {
  id: string;
  event: string;
  data: string;
}

/** One text/event-stream block: id, event and data lines; comments (keep-alives) ignored. */
function parseFrame(block: string): Frame {
  const f: Frame = { id: '', event: '', data: '' };
  for (const line of block.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const name = i === -1 ? line : line.slice(0, i);
    const value = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (name === 'data') f.data += (f.data ? '\n' : '') + value;
    else if (name === 'id' || name === 'event') f[name] = value;
  }
  return f;
}

function onFrame(f: Frame): void {
  if (f.id) live.lastId = f.id;
  if (!f.event.startsWith('message.') || !f.data) return;
  let m: Message | undefined;
  try {
    m = (JSON.parse(f.data) as { data?: Message }).data;
  } catch {
    return;
  }
  if (m) onMessageEvent(f.event, m).catch(failed);
}

/**
 * Reloads the unread counts and the list. A burst of mail (a hundred messages in a second)
 * makes one reload running and at most one more after it, not one each: the account's
 * requests_per_minute is shared with its agents.
 */
let reloading: Promise<void> | null = null;
let reloadAgain = false;
export function refreshList(): Promise<void> {
  if (reloading) {
    reloadAgain = true;
    return reloading;
  }
  reloading = (async () => {
    do {
      reloadAgain = false;
      await loadUnread();
      renderMailboxes();
      await loadList();
    } while (reloadAgain);
  })().finally(() => {
    reloading = null;
  });
  return reloading;
}

/** Brings the mail view up to date with one message's event, leaving what the user types alone. */
async function onMessageEvent(type: string, m: Message): Promise<void> {
  // A new hold shows in the open Held (inbound) or Approvals (outbound) view; not while a
  // button there waits for its second click (the view drawn again would forget it).
  if (type === 'message.held') await countWaiting();
  const guard = document.querySelector<HTMLElement>('#view.view-held, #view.view-approvals');
  if (type === 'message.held' && guard && guard.classList.contains('view-held') === (m.direction === 'inbound') && !guard.querySelector('[data-armed]')) {
    await route(true);
    return;
  }
  if (!document.getElementById('threads-body')) return;
  if (type === 'message.received' && (state.mailbox === 'all' || state.mailbox === m.inboxId)) await refreshList();
  else if (type === 'message.received') {
    await loadUnread();
    renderMailboxes();
  }
  const card = document.querySelector(`#thread article.message[data-id="${CSS.escape(m.id)}"]`);
  if (document.querySelector('#thread .composer')) return;
  if (card) card.replaceWith(messageCard(await api<Message>('GET', `/messages/${enc(m.id)}`)));
  else if (state.thread && state.thread.id === m.threadId) await openThread(m.threadId);
}
