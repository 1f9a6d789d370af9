// Live updates (joined in script.ts): the account's events from GET /events/stream while signed
// in. EventSource cannot send the Authorization header and the API takes the key nowhere else
// (a key in a URL would end up in logs), so the stream is read with fetch and parsed here.
// A dropped stream is opened again with Last-Event-ID, so no event in between is missed.
// New mail refreshes the open list and the unread counts; a status change redraws the message.

export const LIVE_JS = String.raw`
  /** The open stream: its AbortController, the last event id seen, the wait before reconnecting. */
  var live = { abort: null, lastId: '', retryMs: 1000, timer: 0, opened: false };
  var LIVE_RETRY_MAX_MS = 30000;

  function setLiveState(text) {
    var s = $('live');
    if (s) { s.textContent = text; s.hidden = !text; }
  }

  function stopLive() {
    clearTimeout(live.timer);
    if (live.abort) live.abort.abort();
    live = { abort: null, lastId: '', retryMs: 1000, timer: 0, opened: false };
    setLiveState('');
  }

  async function startLive() {
    clearTimeout(live.timer);
    var key = sessionStorage.getItem(STORE);
    if (!key) return;
    var abort = new AbortController();
    live.abort = abort;
    var headers = { Authorization: 'Bearer ' + key, Accept: 'text/event-stream' };
    if (live.lastId) headers['Last-Event-ID'] = live.lastId;
    try {
      var res = await fetch('/events/stream', { headers: headers, cache: 'no-store', signal: abort.signal });
      if (res.status === 401) { signOut('The server refused the key.'); return; }
      if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
      setLiveState('Live');
      live.retryMs = 1000;
      // Back after a gap: the events in it come with Last-Event-ID, but before the first event
      // there was no id to resume from, so the list is loaded again too.
      if (live.opened && $('threads-body')) refreshList().catch(failed);
      live.opened = true;
      var reader = res.body.getReader();
      var decoder = new TextDecoder();
      var buffer = '';
      for (;;) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, '\n');
        var end;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          var block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          onFrame(parseFrame(block));
        }
      }
    } catch (err) {
      if (abort.signal.aborted) return;
    }
    if (abort.signal.aborted || live.abort !== abort) return;
    // The stream ended or failed (a restart, a network change, a stall): again, from the last id.
    setLiveState('Reconnecting\u2026');
    live.timer = setTimeout(startLive, live.retryMs);
    live.retryMs = Math.min(live.retryMs * 2, LIVE_RETRY_MAX_MS);
  }

  /** One text/event-stream block: id, event and data lines; comments (keep-alives) ignored. */
  function parseFrame(block) {
    var f = { id: '', event: '', data: '' };
    block.split('\n').forEach(function (line) {
      if (!line || line.charAt(0) === ':') return;
      var i = line.indexOf(':');
      var name = i === -1 ? line : line.slice(0, i);
      var value = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (name === 'data') f.data += (f.data ? '\n' : '') + value;
      else if (name === 'id' || name === 'event') f[name] = value;
    });
    return f;
  }

  function onFrame(f) {
    if (f.id) live.lastId = f.id;
    if (f.event.indexOf('message.') !== 0 || !f.data) return;
    var m;
    try { m = JSON.parse(f.data).data; } catch (e) { return; }
    if (m) onMessageEvent(f.event, m).catch(failed);
  }

  /**
   * Reloads the unread counts and the list. A burst of mail (a hundred messages in a second)
   * makes one reload running and at most one more after it, not one each: the account's
   * requests_per_minute is shared with its agents.
   */
  var reloading = null, reloadAgain = false;
  function refreshList() {
    if (reloading) { reloadAgain = true; return reloading; }
    reloading = (async function () {
      do {
        reloadAgain = false;
        await loadUnread();
        renderMailboxes();
        await loadList();
      } while (reloadAgain);
    })().finally(function () { reloading = null; });
    return reloading;
  }

  /** Brings the mail view up to date with one message's event, leaving what the user types alone. */
  async function onMessageEvent(type, m) {
    if (!$('threads-body')) return;
    if (type === 'message.received' && (state.mailbox === 'all' || state.mailbox === m.inboxId)) await refreshList();
    else if (type === 'message.received') { await loadUnread(); renderMailboxes(); }
    var card = document.querySelector('#thread article.message[data-id="' + CSS.escape(m.id) + '"]');
    var composing = document.querySelector('#thread .composer');
    if (composing) return;
    if (card) card.replaceWith(messageCard(await api('GET', '/messages/' + enc(m.id))));
    else if (state.thread && state.thread.id === m.threadId) await openThread(m.threadId);
  }
`;
