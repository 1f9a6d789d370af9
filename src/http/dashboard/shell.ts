// The dashboard's frame (joined in script.ts): signing in and out, routing between views by the
// URL's hash, keyboard shortcuts and their help, start-up.

export const SHELL_JS = String.raw`
  function showSignin(message) {
    $('signin').hidden = false;
    $('view').replaceChildren();
    ['nav', 'signout', 'help-toggle', 'help'].forEach(function (id) { $(id).hidden = true; });
    $('who').textContent = '';
    var e = $('signin-error');
    e.textContent = message || '';
    e.hidden = !message;
    $('key').focus();
  }

  function signOut(message) {
    sessionStorage.removeItem(STORE);
    stopLive();
    state.inboxes = [];
    state.query = '';
    showSignin(message);
  }

  /** Checks the key against the API; learns whether it may write. */
  async function signIn(key) {
    sessionStorage.setItem(STORE, key);
    try {
      var keys = await api('GET', '/account/api-keys');
      var mine = (keys.data || []).filter(function (k) { return key.indexOf(k.keyPrefix) === 0; })[0];
      state.readOnly = !!(mine && mine.readOnly);
      $('who').textContent = mine ? 'key ' + (mine.name || mine.keyPrefix) + (mine.readOnly ? ' (read-only)' : '') : '';
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) { signOut('That key was refused: ' + err.message); return false; }
      throw err;
    }
    $('signin').hidden = true;
    ['nav', 'signout', 'help-toggle'].forEach(function (id) { $(id).hidden = false; });
    if (!live.abort) startLive();
    return true;
  }

  // ---- routing ---------------------------------------------------------------------------

  var webhookFilter = { status: '' };
  var shown = { name: '', mailbox: '', query: '' };

  function parseHash() {
    var parts = location.hash.replace(/^#/, '').split('/').map(function (p) { return decodeURIComponent(p); });
    var name = parts[0] || 'mail';
    // Old links (#messages/<inbox>) open the mail client.
    if (name === 'messages') { name = 'mail'; parts = ['mail', parts[1] || 'all']; }
    return { name: name, mailbox: parts[1] || 'all', thread: parts[2] || '' };
  }

  /**
   * Shows the view the hash names. Within the mail view, moving between conversations of the
   * same list only swaps the conversation (j/k stay quick); force renders everything again.
   */
  async function route(force) {
    if (!sessionStorage.getItem(STORE)) { showSignin(); return; }
    var at = parseHash();
    // A notice from the action that led here stays; an older one goes with the view it was about.
    if (force !== true && Date.now() - (notify.at || 0) > 1500) clearNotice();
    try {
      if (force !== true && at.name === 'mail' && shown.name === 'mail' && shown.mailbox === at.mailbox && shown.query === state.query && $('thread')) {
        if (at.thread === 'new') showCompose();
        else await openThread(at.thread);
        return;
      }
    } catch (err) { failed(err); return; }
    document.querySelectorAll('nav#nav a').forEach(function (a) { a.classList.toggle('active', a.dataset.view === at.name); });
    var view = el('section', { id: 'view', className: 'view-' + at.name });
    $('view').replaceWith(view);
    shown = { name: at.name, mailbox: at.mailbox, query: state.query };
    try {
      if (at.name === 'drafts') await viewDrafts(view);
      else if (at.name === 'inboxes') await viewInboxes(view);
      else if (at.name === 'webhooks') await viewWebhooks(view, webhookFilter);
      else if (at.name === 'domains') await viewDomains(view);
      else if (at.name === 'keys') await viewKeys(view);
      else await viewMail(view, at.mailbox, at.thread);
      view.dataset.loaded = 'true';
    } catch (err) { failed(err); }
  }

  // ---- keyboard --------------------------------------------------------------------------

  function toggleHelp(show) {
    var help = $('help');
    help.hidden = show === undefined ? !help.hidden : !show;
  }

  /** j/k: the next or previous conversation of the list. */
  function moveThread(step) {
    var rows = Array.prototype.slice.call(document.querySelectorAll('.thread-row'));
    if (!rows.length) return;
    var at = rows.findIndex(function (r) { return r.classList.contains('selected'); });
    var next = rows[at === -1 ? (step > 0 ? 0 : rows.length - 1) : Math.min(rows.length - 1, Math.max(0, at + step))];
    location.hash = next.querySelector('a').getAttribute('href');
  }

  /** A button of the open conversation's head (e archives, l labels). */
  function threadButton(selector) {
    var button = document.querySelector('#thread .thread-actions ' + selector);
    if (button) button.click();
  }

  function focusSearch() {
    if ($('q')) { $('q').focus(); $('q').select(); return; }
    state.focusSearch = true;
    location.hash = '#mail';
  }

  var SHORTCUTS = {
    j: function () { moveThread(1); },
    k: function () { moveThread(-1); },
    r: replyToOpen,
    u: function () { lastMessageButton('button.mark'); },
    '#': function () { lastMessageButton('button.delete'); },
    e: function () { threadButton('button.archive'); },
    l: function () { threadButton('button.label-thread'); },
    '/': focusSearch,
    c: function () { if ($('thread')) showCompose(); else location.hash = '#mail/all/new'; },
    '?': function () { toggleHelp(); }
  };

  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !sessionStorage.getItem(STORE)) return;
    var t = ev.target;
    var typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
    if (ev.key === 'Escape') {
      toggleHelp(false);
      if (typing) t.blur();
      return;
    }
    if (typing || !SHORTCUTS[ev.key]) return;
    ev.preventDefault();
    SHORTCUTS[ev.key]();
  }

  // ---- start -----------------------------------------------------------------------------

  document.addEventListener('DOMContentLoaded', function () {
    $('signin-form').addEventListener('submit', async function (ev) {
      ev.preventDefault();
      var key = $('key').value.trim();
      if (!key) return;
      try {
        if (await signIn(key)) { $('key').value = ''; route(true); }
      } catch (err) { failed(err); }
    });
    $('signout').addEventListener('click', function () { signOut(); });
    $('help-toggle').addEventListener('click', function () { toggleHelp(); });
    $('notice-close').addEventListener('click', clearNotice);
    document.addEventListener('keydown', onKey);
    window.addEventListener('hashchange', function () { route(); });
    var key = sessionStorage.getItem(STORE);
    if (!key) { showSignin(); return; }
    signIn(key).then(function (ok) { if (ok) route(true); }, failed);
  });
`;
