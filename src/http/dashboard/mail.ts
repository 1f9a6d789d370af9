// The dashboard's mail client (joined in script.ts): mailboxes with unread counts, the list of
// conversations (search with the API's q), and the open conversation: senders, SPF/DKIM/DMARC
// badges, attachments, HTML bodies in a sandboxed frame. Opening a conversation marks it read
// (for a write key). Routes: #mail, #mail/<inbox id or all>, #mail/<inbox id or all>/<thread id>.

export const MAIL_JS = String.raw`
  async function loadInboxes() {
    var page = await api('GET', '/inboxes?limit=100');
    state.inboxes = page.data;
    return page;
  }

  /**
   * Unread messages per inbox: one page of unread messages across the account when it holds
   * them all (the usual case), else the total of one filtered page per inbox.
   */
  async function loadUnread() {
    var counts = {};
    state.inboxes.forEach(function (i) { counts[i.id] = 0; });
    var page = await api('GET', '/messages?unread=true&limit=100');
    if (page.total <= page.data.length) {
      page.data.forEach(function (m) { if (m.inboxId in counts) counts[m.inboxId]++; });
    } else {
      var totals = await Promise.all(state.inboxes.map(function (i) {
        return api('GET', '/inboxes/' + enc(i.id) + '/messages?unread=true&limit=1').then(function (p) { return p.total; });
      }));
      state.inboxes.forEach(function (i, n) { counts[i.id] = totals[n]; });
    }
    state.unread = counts;
  }

  function inboxOf(id) {
    return state.inboxes.filter(function (i) { return i.id === id; })[0];
  }
  function inboxLabel(i) { return i ? (i.displayName ? i.displayName + ' <' + i.address + '>' : i.address) : ''; }

  function unreadTotal() {
    return Object.keys(state.unread).reduce(function (n, k) { return n + state.unread[k]; }, 0);
  }

  function mailboxLink(id, name, count) {
    return el('a', { href: '#mail/' + enc(id), className: 'mailbox' + (state.mailbox === id ? ' active' : ''), dataset: { id: id }, title: name }, [
      el('span', { className: 'name', textContent: name }), el('span', { className: 'count', textContent: count ? String(count) : '' })
    ]);
  }

  function renderMailboxes() {
    var box = $('mailboxes');
    if (!box) return;
    box.replaceChildren.apply(box, [
      writeButton('Compose', 'compose', function () { showCompose(); }, 'New message (c)'),
      mailboxLink('all', 'All inboxes', unreadTotal())
    ].concat(state.inboxes.map(function (i) { return mailboxLink(i.id, i.displayName || i.address, state.unread[i.id]); }),
      [mailboxLink(ARCHIVE_BOX, 'Archive', 0)]).filter(Boolean));
  }

  /**
   * Archiving labels every message of a conversation ARCHIVED; the inboxes list the
   * conversations with a message without it (q -label:archived), so mail arriving in an
   * archived conversation brings it back, as in Gmail. The Archive mailbox lists the label.
   */
  var ARCHIVED = 'archived';
  var ARCHIVE_BOX = 'archive';

  /** The list's filter: the search typed, within the Archive or the conversations not archived. */
  function listFilter(mailbox) {
    if (mailbox === ARCHIVE_BOX) return '&label=' + ARCHIVED + (state.query ? '&q=' + enc(state.query) : '');
    return '&q=' + enc(state.query || '-label:' + ARCHIVED);
  }

  /** Labels as chips, archived left out (it has its own button); each removable with a write key. */
  function labelChips(labels, remove) {
    var shown = (labels || []).filter(function (l) { return l !== ARCHIVED; });
    if (!shown.length) return null;
    return el('span', { className: 'labels' }, shown.map(function (l) {
      var chip = el('span', { className: 'label-chip' }, [l]);
      if (remove && !state.readOnly) {
        var b = el('button', { type: 'button', className: 'link remove-label', textContent: '\u00d7', title: 'Remove label ' + l, attrs: { 'aria-label': 'Remove label ' + l } });
        b.addEventListener('click', busy(b, function () { return remove(l); }));
        chip.append(b);
      }
      return chip;
    }));
  }

  /** The form adding a label (to the conversation or one message), in its slot; again closes it. */
  function labelForm(slot, add) {
    if (slot.firstChild) { slot.replaceChildren(); return; }
    var input = el('input', { type: 'text', name: 'label', required: true, placeholder: 'a label: letters, digits, _ : . -', attrs: { 'aria-label': 'Label', autocomplete: 'off' } });
    var ok = el('button', { type: 'submit', className: 'small', textContent: 'Add label' });
    var form = el('form', { className: 'label-form' }, [input, ok,
      el('button', { type: 'button', className: 'small quiet', textContent: 'Cancel', onclick: function () { slot.replaceChildren(); } })]);
    // Labels are lower case ([a-z0-9][a-z0-9_:.-]*): "Urgent" is the label urgent.
    form.addEventListener('submit', busy(ok, function () { return add(input.value.trim().toLowerCase()); }));
    slot.replaceChildren(form);
    input.focus();
  }

  /** PATCH of labels (a conversation or a message), then the conversation and the list as they are now. */
  async function relabel(path, change, done) {
    await api('PATCH', path, change);
    notify(done);
    if (state.thread) await openThread(state.thread.id);
    await refreshList();
  }

  /** e: archive the open conversation (back to the list), or move an archived one back. */
  async function archiveThread(t) {
    var archived = t.labels.indexOf(ARCHIVED) !== -1;
    await api('PATCH', '/threads/' + enc(t.id), archived ? { removeLabels: [ARCHIVED] } : { addLabels: [ARCHIVED] });
    notify((archived ? 'Moved to the inbox: \u201c' : 'Archived \u201c') + (t.subject || '(no subject)') + '\u201d.');
    location.hash = '#mail/' + enc(state.mailbox);
    await refreshList();
  }

  /** Conversations per page of the list (the API answers at most 100 a page). */
  var PAGE = 50;

  /** "1\u201350 of 57 conversations", or "57 conversations" when they fit on one page. */
  function pageHint(offset, shown, total) {
    var noun = total === 1 ? ' conversation' : ' conversations';
    if (offset === 0 && shown >= total) return total + noun;
    return (shown ? (offset + 1) + '\u2013' + (offset + shown) : '0') + ' of ' + total + noun;
  }

  /** Newer / Older: the previous and next page of conversations (the API's limit and offset). */
  function pager(offset, shown, total) {
    if (offset === 0 && shown >= total) return null;
    function go(to) { return function () { state.offset = to; route(true); }; }
    return el('div', { className: 'toolbar pager' }, [
      el('button', { type: 'button', className: 'small quiet', textContent: '\u2190 Newer', disabled: offset === 0, onclick: go(Math.max(0, offset - PAGE)) }),
      el('button', { type: 'button', className: 'small quiet', textContent: 'Older \u2192', disabled: offset + shown >= total, onclick: go(offset + PAGE) })
    ]);
  }

  /** Who a conversation is with, from the newest message of it on the page. */
  function participant(m) {
    if (m.direction === 'inbound') return m.fromName || m.fromAddress;
    return 'To: ' + (m.toAddresses || []).join(', ');
  }

  async function viewMail(view, mailbox, threadId) {
    if (!state.inboxes.length) await loadInboxes();
    await loadUnread();
    state.mailbox = mailbox;
    if (state.listKey !== mailbox + '\n' + state.query) { state.listKey = mailbox + '\n' + state.query; state.offset = 0; }
    var search = el('input', { id: 'q', type: 'search', name: 'q', value: state.query, placeholder: 'Search: words, from:, subject:, has:attachment, is:unread', attrs: { 'aria-label': 'Search' } });
    var form = el('form', { className: 'search', id: 'search', attrs: { role: 'search' } }, [search, el('button', { type: 'submit', textContent: 'Search' })]);
    form.addEventListener('submit', function (ev) { ev.preventDefault(); state.query = search.value.trim(); route(true); });
    var heading = state.query ? 'Results for \u201c' + state.query + '\u201d' : mailbox === 'all' ? 'All inboxes' : mailbox === ARCHIVE_BOX ? 'Archive' : inboxLabel(inboxOf(mailbox)) || mailbox;
    var mail = el('div', { className: 'mail', id: 'mail' }, [
      el('nav', { className: 'mailboxes', id: 'mailboxes', attrs: { 'aria-label': 'Inboxes' } }),
      el('div', { className: 'list-pane' }, [
        el('div', { className: 'toolbar' }, [form]),
        el('div', { className: 'toolbar' }, [el('h2', { textContent: heading }), el('span', { className: 'spacer' }),
          el('span', { className: 'hint', id: 'threads-count' })]),
        el('div', { id: 'threads-body' }),
        el('p', { className: 'hint' }, ['Keys: ', el('kbd', { textContent: 'j' }), ' ', el('kbd', { textContent: 'k' }), ' move, ', el('kbd', { textContent: 'r' }), ' reply, ', el('kbd', { textContent: 'e' }), ' archive, ', el('kbd', { textContent: 'l' }), ' label, ',
          el('kbd', { textContent: '/' }), ' search, ', el('kbd', { textContent: 'c' }), ' compose, ', el('kbd', { textContent: '?' }), ' help'])
      ]),
      el('section', { className: 'thread-pane', id: 'thread' })
    ]);
    await loadList(mail);
    view.append(mail);
    renderMailboxes();
    if (state.focusSearch) { state.focusSearch = false; search.focus(); }
    if (threadId === 'new') showCompose();
    else await openThread(threadId);
  }

  /**
   * Fills the list of conversations (one page) of the shown mailbox and search: on opening the
   * view, and again when a live event brings new mail (the search box and the open
   * conversation stay as they are).
   */
  async function loadList(root) {
    root = root || document;
    var mailbox = state.mailbox;
    var scope = mailbox === 'all' || mailbox === ARCHIVE_BOX ? '' : '/inboxes/' + enc(mailbox);
    // The newest messages need no search unless one is typed (the account's searches at once are few).
    var filter = listFilter(mailbox);
    var newestFilter = state.query || mailbox === ARCHIVE_BOX ? filter : '';
    var offset = state.offset;
    var pages, refused = null;
    try {
      pages = await Promise.all([api('GET', scope + '/threads?limit=' + PAGE + '&offset=' + offset + filter), api('GET', scope + '/messages?limit=100' + newestFilter)]);
    } catch (err) {
      // A query the API cannot read: say why under the search box, which stays for a better one.
      if (!(err instanceof ApiError && err.code === 'INVALID_QUERY')) throw err;
      refused = err;
      pages = [{ data: [], total: 0 }, { data: [] }];
      failed(err);
    }
    var newest = {};
    pages[1].data.forEach(function (m) { if (!newest[m.threadId]) newest[m.threadId] = m; });
    // Conversations further down (an older page) may have no message on that first page: their
    // newest message comes from the conversation itself, its last page of one.
    await Promise.all(pages[0].data.filter(function (t) { return !newest[t.id]; }).map(function (t) {
      return api('GET', '/threads/' + enc(t.id) + '?limit=1&offset=' + Math.max(0, t.messageCount - 1)).then(function (full) { newest[t.id] = full.messages[0]; });
    }));
    // The view may have changed while the answers came (a live refresh racing a click).
    var body = root.querySelector('#threads-body');
    if (!body || state.mailbox !== mailbox) return;
    var selected = state.thread ? state.thread.id : '';
    var list = el('ul', { className: 'threads', id: 'threads' }, pages[0].data.map(function (t) {
      var m = newest[t.id];
      var where = (mailbox === 'all' || mailbox === ARCHIVE_BOX) && inboxOf(t.inboxId) ? inboxOf(t.inboxId).address + ' \u00b7 ' : '';
      return el('li', { className: 'thread-row' + (t.unreadCount ? ' unread' : '') + (t.id === selected ? ' selected' : ''), dataset: { id: t.id } }, [
        el('a', { href: '#mail/' + enc(mailbox) + '/' + enc(t.id) }, [
          el('div', { className: 'line' }, [el('span', { className: 'from', textContent: m ? participant(m) : '' }), el('span', { className: 'when', textContent: shortWhen(t.lastMessageAt) })]),
          el('div', { className: 'line' }, [el('span', { className: 'subject', textContent: t.subject || '(no subject)' }), labelChips(t.labels),
            t.messageCount > 1 ? el('span', { className: 'count', textContent: String(t.messageCount) }) : null]),
          el('div', { className: 'snippet', textContent: where + (m ? (m.bodyText || '').replace(/\s+/g, ' ').slice(0, 140) : '') })
        ])
      ]);
    }));
    root.querySelector('#threads-count').textContent = pageHint(offset, pages[0].data.length, pages[0].total);
    body.replaceChildren.apply(body, [
      pages[0].data.length ? list : el('p', { className: refused ? 'error' : 'empty', textContent: refused ? refused.message : state.query ? 'Nothing matches.' : mailbox === ARCHIVE_BOX ? 'Nothing archived.' : 'No mail yet.' }),
      pager(offset, pages[0].data.length, pages[0].total)
    ].filter(Boolean));
  }

  /** Shows a conversation in the right pane (or the placeholder); the list stays as it is. */
  async function openThread(threadId) {
    var pane = $('thread');
    var mail = $('mail');
    document.querySelectorAll('.thread-row').forEach(function (r) { r.classList.toggle('selected', r.dataset.id === threadId); });
    mail.classList.toggle('reading', !!threadId);
    state.thread = null;
    if (!threadId) {
      pane.replaceChildren(el('p', { className: 'empty', textContent: 'Select a conversation.' }));
      return;
    }
    var t = await api('GET', '/threads/' + enc(threadId));
    state.thread = t;
    var row = document.querySelector('.thread-row.selected');
    if (row) row.scrollIntoView({ block: 'nearest' });
    var labelSlot = el('div', { className: 'label-slot' });
    var archived = t.labels.indexOf(ARCHIVED) !== -1;
    pane.replaceChildren(
      el('div', { className: 'thread-head' }, [el('a', { className: 'back', href: '#mail/' + enc(state.mailbox), textContent: '\u2190 Back' }),
        el('h1', { textContent: t.subject || '(no subject)' })]),
      el('p', { className: 'muted' }, [inboxLabel(inboxOf(t.inboxId)) + ' \u00b7 ' + t.messageCount + (t.messageCount === 1 ? ' message' : ' messages') + (archived ? ' \u00b7 archived ' : ' '),
        labelChips(t.labels, function (l) { return relabel('/threads/' + enc(t.id), { removeLabels: [l] }, 'Removed the label ' + l + ' from the conversation.'); })]),
      put(el('div', { className: 'actions thread-actions' }), [
        writeButton(archived ? 'Move to inbox' : 'Archive', 'small quiet archive', function () { return archiveThread(t); }, archived ? 'Back to the inbox (e)' : 'Archive the conversation (e)'),
        writeButton('Label conversation', 'small quiet label-thread', function () {
          labelForm(labelSlot, function (l) { return relabel('/threads/' + enc(t.id), { addLabels: [l] }, 'Labelled the conversation ' + l + '.'); });
        }, 'Add a label to every message of the conversation (l)')
      ]),
      labelSlot
    );
    // Opening marks it read (below): the cards show the messages as they will be.
    var marking = t.unreadCount && !state.readOnly;
    t.messages.forEach(function (m) { if (marking) m.unread = false; pane.append(messageCard(m)); });
    if (t.messageCount > t.messages.length) pane.append(moreMessages(t, t.messages.length));
    pane.dataset.thread = t.id;
    if (marking) await markRead(t);
  }

  /** GET /threads/{id} answers a page of messages (at most 100): the next page on demand. */
  function moreMessages(t, shown) {
    var button = el('button', { type: 'button', className: 'small quiet more-messages', textContent: 'Show ' + Math.min(100, t.messageCount - shown) + ' more of ' + (t.messageCount - shown) });
    button.onclick = async function () {
      button.disabled = true;
      var next = await api('GET', '/threads/' + enc(t.id) + '?limit=100&offset=' + shown);
      next.messages.forEach(function (m) { button.before(messageCard(m)); });
      shown += next.messages.length;
      if (next.messages.length && next.messageCount > shown) { t.messageCount = next.messageCount; button.replaceWith(moreMessages(t, shown)); } else button.remove();
    };
    return button;
  }

  async function markRead(t) {
    await api('PATCH', '/threads/' + enc(t.id), { unread: false });
    state.unread[t.inboxId] = Math.max(0, (state.unread[t.inboxId] || 0) - t.unreadCount);
    var row = document.querySelector('.thread-row[data-id="' + CSS.escape(t.id) + '"]');
    if (row) row.classList.remove('unread');
    renderMailboxes();
  }

  /** PATCH /messages/{id} {unread}: the button, the list row and the counts follow. */
  async function toggleUnread(m, button) {
    var fresh = await api('PATCH', '/messages/' + enc(m.id), { unread: !m.unread });
    m.unread = fresh.unread;
    button.textContent = m.unread ? 'Mark read' : 'Mark unread';
    notify(m.unread ? 'Marked unread.' : 'Marked read.');
    await refreshList();
  }

  /**
   * DELETE /messages/{id}, on the second click (there is no undo). The only message of a
   * conversation takes the conversation with it: back to the list.
   */
  async function deleteMessage(m, card, button) {
    if (!button.dataset.armed) { button.dataset.armed = '1'; button.textContent = 'Click again to delete'; return; }
    await api('DELETE', '/messages/' + enc(m.id));
    card.remove();
    notify('Deleted the message.');
    if (!document.querySelector('#thread article.message')) location.hash = '#mail/' + enc(state.mailbox);
    await refreshList();
  }

  /** The last message of the open conversation (what r, u and # act on). */
  function lastMessageButton(selector) {
    var cards = document.querySelectorAll('#thread article.message');
    var last = cards[cards.length - 1];
    var button = last && last.querySelector(selector);
    if (button) button.click();
  }

  /** SPF, DKIM and DMARC as the server recorded them when the message arrived. */
  function authBadges(a) {
    return ['spf', 'dkim', 'dmarc'].map(function (k) {
      var result = (a && a[k]) || 'none';
      return badge(k.toUpperCase() + ' ' + result, TONE[result] || '', k.toUpperCase() + ' result when the message arrived: ' + result);
    });
  }

  /**
   * An HTML body goes into a sandboxed frame (no scripts, an opaque origin, no forms or pop-ups)
   * through srcdoc, never into this page; the page's Content-Security-Policy applies inside it
   * too, so remote images and inline styles stay off. The text body is one click away.
   */
  function bodyView(m) {
    var text = el('pre', { className: 'body', textContent: m.bodyText || (m.bodyHtml ? '(no text part)' : '(empty body)') });
    if (!m.bodyHtml) return text;
    var frame = el('iframe', { className: 'html-body', title: 'HTML body of the message (sandboxed)', attrs: { sandbox: '', referrerpolicy: 'no-referrer' } });
    frame.srcdoc = m.bodyHtml;
    text.hidden = true;
    var htmlTab = el('button', { type: 'button', className: 'small on', textContent: 'HTML' });
    var textTab = el('button', { type: 'button', className: 'small', textContent: 'Text' });
    function show(html) { frame.hidden = !html; text.hidden = html; htmlTab.classList.toggle('on', html); textTab.classList.toggle('on', !html); }
    htmlTab.onclick = function () { show(true); };
    textTab.onclick = function () { show(false); };
    return el('div', { className: 'bodies' }, [el('div', { className: 'tabs' }, [htmlTab, textTab]), frame, text]);
  }

  function attachmentList(m) {
    if (!(m.attachments || []).length) return null;
    return el('ul', { className: 'attachments' }, m.attachments.map(function (a) {
      return el('li', null, [el('a', { href: a.url, download: a.filename || '', rel: 'noopener noreferrer', className: 'attachment', title: a.contentType },
        [(a.filename || a.id) + ' (' + size(a.size) + ')'])]);
    }));
  }

  function messageCard(m) {
    var inbound = m.direction === 'inbound';
    var card = el('article', { className: 'message ' + m.direction, dataset: { id: m.id } });
    var sender = inbound ? [el('b', { textContent: m.fromName || m.fromAddress }), m.fromName ? el('span', { className: 'mono', textContent: '<' + m.fromAddress + '>' }) : null]
      : [el('b', { textContent: 'Sent from ' + m.fromAddress })];
    var to = 'To: ' + (m.toAddresses || []).join(', ') + ((m.ccAddresses || []).length ? ' \u00b7 Cc: ' + m.ccAddresses.join(', ') : '') +
      ((m.bccAddresses || []).length ? ' \u00b7 Bcc: ' + m.bccAddresses.join(', ') : '');
    var badges = inbound ? authBadges(m.authentication) : [badge(m.status), m.delivery === 'dry-run' ? badge('dry-run', 'warn', 'outbound.mode = "dry-run": nothing left the machine') : null];
    var recipients = !inbound && (m.recipients || []).length ? table(['Recipient', 'Status', 'Last answer'], m.recipients.map(function (r) {
      return el('tr', null, [td(r.address, 'mono addr'), el('td', null, [badge(r.status)]), td(r.response || '', 'mono')]);
    }), '') : null;
    var composer = el('div', { className: 'composer-slot' });
    var labelSlot = el('div', { className: 'label-slot' });
    var body = bodyView(m);
    // A list cuts long bodies (bodyTruncated): the whole message is one click away.
    var whole = m.bodyTruncated ? el('button', { type: 'button', className: 'small quiet whole-body', textContent: 'Show the whole message (' + size(m.size) + ')' }) : null;
    if (whole) whole.onclick = async function () {
      whole.disabled = true;
      Object.assign(m, await api('GET', '/messages/' + enc(m.id)));
      var full = bodyView(m);
      body.replaceWith(full);
      body = full;
      whole.remove();
    };
    put(card, [
      el('header', null, [el('div', { className: 'sender' }, sender), el('span', { className: 'when muted', textContent: when(m.createdAt) })]),
      el('div', { className: 'to', textContent: to }),
      el('div', { className: 'badges' }, badges),
      labelChips(m.labels, function (l) { return relabel('/messages/' + enc(m.id), { removeLabels: [l] }, 'Removed the label ' + l + ' from the message.'); }),
      body,
      whole,
      attachmentList(m),
      recipients,
      el('div', { className: 'actions' }, [
        writeButton('Reply', 'small reply', function () { openComposer(composer, 'reply', m); }),
        writeButton('Reply all', 'small quiet reply-all', function () { openComposer(composer, 'reply-all', m); }),
        writeButton('Forward', 'small quiet forward', function () { openComposer(composer, 'forward', m); }),
        writeButton(m.unread ? 'Mark read' : 'Mark unread', 'small quiet mark', function (b) { return toggleUnread(m, b); }, 'Mark read or unread (u)'),
        writeButton('Label message', 'small quiet label-message', function () {
          labelForm(labelSlot, function (l) { return relabel('/messages/' + enc(m.id), { addLabels: [l] }, 'Labelled the message ' + l + '.'); });
        }, 'Add a label to this message'),
        writeButton('Delete', 'small danger delete', function (b) { return deleteMessage(m, card, b); }, 'Delete this message (#, twice)')
      ]),
      labelSlot,
      composer
    ]);
    return card;
  }
`;
