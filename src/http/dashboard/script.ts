// The dashboard's browser script, embedded as a string (see page.ts). It talks to the public
// API with the key kept in sessionStorage, plus the one dashboard-only endpoint (replay of a
// failed webhook delivery). Every value from the server is put in the page with textContent,
// never as HTML: subjects and addresses come from strangers on the internet.
// (Plain ES2020 without template literals, so it can live inside this template string; ASCII
// only, non-ASCII written as \u escapes: see build/build.ts on why the bundle must be ASCII.)

export const DASHBOARD_JS = String.raw`
(function () {
  'use strict';
  var STORE = 'mailroom.apiKey';
  var state = { inboxes: [], webhooks: [] };

  function $(id) { return document.getElementById(id); }

  /** el('td', {className: 'num'}, ['text', child]) */
  function el(tag, props, children) {
    var node = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (k) {
        if (k === 'dataset') Object.assign(node.dataset, props[k]);
        else if (k.slice(0, 2) === 'on') node.addEventListener(k.slice(2), props[k]);
        else node[k] = props[k];
      });
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    });
    return node;
  }

  function when(iso) {
    if (!iso) return '';
    var d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  var TONE = {
    active: 'ok', verified: 'ok', success: 'ok', sent: 'ok', delivered: 'ok', received: 'ok',
    pending: 'warn', pending_dkim: 'warn', queued: 'warn', sending: 'warn',
    failed: 'bad', bounced: 'bad', complained: 'bad', suspended: 'bad', inactive: 'bad'
  };
  function badge(text) {
    return el('span', { className: 'badge ' + (TONE[text] || ''), textContent: text });
  }

  function notify(text, bad) {
    var n = $('notice');
    n.textContent = text;
    n.className = bad ? 'bad' : '';
    n.hidden = false;
    clearTimeout(notify.timer);
    notify.timer = setTimeout(function () { n.hidden = true; }, bad ? 10000 : 5000);
  }

  function ApiError(status, code, message) {
    this.status = status; this.code = code; this.message = message;
  }

  async function api(method, path, body) {
    var key = sessionStorage.getItem(STORE);
    var headers = { Authorization: 'Bearer ' + key, Accept: 'application/json' };
    var init = { method: method, headers: headers, cache: 'no-store' };
    if (body !== undefined) { headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    var res = await fetch(path, init);
    var text = await res.text();
    var data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
    if (!res.ok) {
      var err = data && data.error ? data.error : { code: 'HTTP_' + res.status, message: res.statusText };
      throw new ApiError(res.status, err.code, err.message + (err.requestId ? ' (request ' + err.requestId + ')' : ''));
    }
    return data;
  }

  function failed(err) {
    if (err instanceof ApiError && err.status === 401) { signOut('The server refused the key: ' + err.message); return; }
    notify(err instanceof ApiError ? err.code + ': ' + err.message : String(err), true);
  }

  function table(headers, rows, empty) {
    if (!rows.length) return el('p', { className: 'empty', textContent: empty });
    return el('table', null, [
      el('thead', null, [el('tr', null, headers.map(function (h) {
        return el('th', { className: h.charAt(0) === '#' ? 'num' : '', textContent: h.replace(/^#/, '') });
      }))]),
      el('tbody', null, rows)
    ]);
  }
  function td(v, cls) { return el('td', { className: cls || '' }, [v]); }

  // ---- sign in / out ---------------------------------------------------------------------

  function showSignin(message) {
    $('signin').hidden = false;
    $('view').replaceChildren();
    $('nav').hidden = true;
    $('signout').hidden = true;
    $('who').textContent = '';
    var e = $('signin-error');
    e.textContent = message || '';
    e.hidden = !message;
    $('key').focus();
  }

  function signOut(message) {
    sessionStorage.removeItem(STORE);
    showSignin(message);
  }

  async function signIn(key) {
    sessionStorage.setItem(STORE, key);
    try {
      var keys = await api('GET', '/account/api-keys');
      var mine = (keys.data || []).filter(function (k) { return key.indexOf(k.keyPrefix) === 0; })[0];
      $('who').textContent = mine ? 'key ' + (mine.name || mine.keyPrefix) + (mine.readOnly ? ' (read-only)' : '') : '';
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) { signOut('That key was refused: ' + err.message); return false; }
      throw err;
    }
    $('signin').hidden = true;
    $('nav').hidden = false;
    $('signout').hidden = false;
    return true;
  }

  // ---- views -----------------------------------------------------------------------------

  async function loadInboxes() {
    var page = await api('GET', '/inboxes?limit=100');
    state.inboxes = page.data;
    return page;
  }

  async function viewInboxes(view) {
    var page = await loadInboxes();
    var sum = function (f) { return page.data.reduce(function (n, i) { return n + (i[f] || 0); }, 0); };
    var stat = function (n, label) { return el('div', { className: 'stat' }, [el('b', { textContent: String(n) }), el('span', { textContent: label })]); };
    view.append(
      el('h1', { textContent: 'Inboxes' }),
      el('div', { className: 'stats' }, [
        stat(page.total, 'inboxes'), stat(sum('sendsToday'), 'sent today'), stat(sum('totalSent'), 'sent in total'),
        stat(sum('bounceCount'), 'bounces'), stat(sum('complaintCount'), 'complaints')
      ]),
      table(['Address', 'Name', 'Status', '#Today / limit', '#Total sent', '#Bounces', '#Complaints', 'Created'],
        page.data.map(function (i) {
          return el('tr', { className: 'clickable inbox-row', dataset: { id: i.id }, title: 'Show messages', onclick: function () { location.hash = '#messages/' + i.id; } }, [
            td(i.address, 'mono addr'), td(i.displayName || ''), el('td', null, [badge(i.status)]),
            td(i.sendsToday + ' / ' + i.dailySendLimit, 'num'), td(i.totalSent, 'num'), td(i.bounceCount, 'num'),
            td(i.complaintCount, 'num'), td(when(i.createdAt))
          ]);
        }), 'No inboxes yet. Create one with POST /inboxes.')
    );
    if (page.total > page.data.length) view.append(el('p', { className: 'muted', textContent: 'Showing the ' + page.data.length + ' most recent of ' + page.total + '.' }));
  }

  async function viewMessages(view, inboxId) {
    if (!state.inboxes.length) await loadInboxes();
    var byId = {};
    state.inboxes.forEach(function (i) { byId[i.id] = i; });
    var picker = el('select', { id: 'inbox-filter', onchange: function () { location.hash = picker.value ? '#messages/' + picker.value : '#messages'; } },
      [el('option', { value: '', textContent: 'All inboxes (latest 25)' })].concat(state.inboxes.map(function (i) {
        return el('option', { value: i.id, textContent: i.address, selected: i.id === inboxId });
      })));
    var targets = inboxId ? [inboxId] : state.inboxes.slice(0, 25).map(function (i) { return i.id; });
    var pages = await Promise.all(targets.map(function (id) { return api('GET', '/inboxes/' + encodeURIComponent(id) + '/messages?limit=' + (inboxId ? 100 : 20)); }));
    var list = [].concat.apply([], pages.map(function (p) { return p.data; }));
    list.sort(function (a, b) { return a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0; });
    list = list.slice(0, 100);
    var detail = el('div', { id: 'message-detail' });
    view.append(
      el('h1', { textContent: 'Messages' }),
      el('div', { className: 'toolbar' }, [el('span', { textContent: 'Inbox' }), picker]),
      table(['When', 'Inbox', 'Dir', 'From', 'To', 'Subject', 'Status'], list.map(function (m) {
        return el('tr', { className: 'clickable message-row', dataset: { id: m.id }, onclick: function () { showMessage(detail, m.id); } }, [
          td(when(m.createdAt), 'when'), td(byId[m.inboxId] ? byId[m.inboxId].address : m.inboxId, 'mono addr'), td(m.direction === 'inbound' ? 'in' : 'out'),
          td(m.fromAddress, 'mono addr'), td((m.toAddresses || []).join(', '), 'mono'), td(m.subject || '(no subject)'), el('td', null, [badge(m.status)])
        ]);
      }), 'No messages yet.'),
      detail
    );
  }

  async function showMessage(box, id) {
    try {
      var m = await api('GET', '/messages/' + encodeURIComponent(id));
      var meta = [['From', m.fromAddress], ['To', (m.toAddresses || []).join(', ')], ['Cc', (m.ccAddresses || []).join(', ')],
        ['Subject', m.subject], ['Status', m.status], ['Delivery', m.delivery || ''], ['Message-ID', m.messageIdHeader], ['Created', when(m.createdAt)]];
      var rec = (m.recipients || []).map(function (r) { return el('tr', null, [td(r.address, 'mono'), el('td', null, [badge(r.status)]), td(r.response || '', 'mono')]); });
      box.replaceChildren(el('div', { className: 'card' }, [
        el('h2', { textContent: m.subject || '(no subject)' }),
        el('dl', { className: 'meta' }, [].concat.apply([], meta.filter(function (p) { return p[1]; }).map(function (p) {
          return [el('dt', { textContent: p[0] }), el('dd', { textContent: p[1] })];
        }))),
        rec.length ? table(['Recipient', 'Status', 'Last answer'], rec, '') : null,
        (m.attachments || []).length ? el('p', { className: 'muted', textContent: 'Attachments: ' + m.attachments.map(function (a) { return a.filename + ' (' + a.size + ' bytes)'; }).join(', ') }) : null,
        el('pre', { className: 'body', textContent: m.bodyText || (m.bodyHtml ? '(HTML only; not rendered here)' : '(empty body)') })
      ]));
      box.scrollIntoView({ block: 'nearest' });
    } catch (err) { failed(err); }
  }

  async function viewWebhooks(view, filter) {
    var hooks = await api('GET', '/webhooks');
    state.webhooks = hooks.data;
    var q = '/webhooks/logs?limit=100' + (filter.status ? '&status=' + filter.status : '') + (filter.webhookId ? '&webhookId=' + encodeURIComponent(filter.webhookId) : '');
    var logs = await api('GET', q);
    var urlOf = {};
    hooks.data.forEach(function (h) { urlOf[h.id] = h.url; });
    var onlyFailed = el('select', { id: 'log-status', onchange: function () { filter.status = onlyFailed.value; route(); } },
      ['', 'failed', 'success', 'pending'].map(function (s) { return el('option', { value: s, textContent: s || 'all statuses', selected: s === (filter.status || '') }); }));
    view.append(
      el('h1', { textContent: 'Webhooks' }),
      table(['URL', 'Events', 'State', 'Created'], hooks.data.map(function (h) {
        return el('tr', { className: 'webhook-row', dataset: { id: h.id } }, [
          td(h.url, 'mono'), td(h.events && h.events.length ? h.events.join(', ') : 'all events'),
          el('td', null, [badge(h.isActive ? 'active' : 'inactive')]), td(when(h.createdAt))
        ]);
      }), 'No webhooks. Create one with POST /webhooks.'),
      el('div', { className: 'toolbar' }, [el('h2', { textContent: 'Delivery log' }), el('span', { className: 'spacer' }), onlyFailed,
        el('button', { type: 'button', className: 'small', textContent: 'Refresh', onclick: function () { route(); } })]),
      table(['When', 'Event', 'Webhook', 'Status', '#HTTP', '#Attempt', '#ms', 'Error', ''], logs.data.map(function (d) {
        var action = d.status === 'failed'
          ? el('button', { type: 'button', className: 'small replay', textContent: 'Replay', title: 'Send this event again as one new attempt',
            onclick: function (ev) { replay(ev.target, d); } })
          : null;
        return el('tr', { className: 'delivery-row', dataset: { id: d.id, status: d.status } }, [
          td(when(d.createdAt), 'when'), td(d.eventType), td(urlOf[d.webhookId] || d.webhookId, 'mono'), el('td', null, [badge(d.status)]),
          td(d.httpStatus === null ? '-' : d.httpStatus, 'num'), td(d.attempt, 'num'), td(d.durationMs, 'num'), td(d.error || '', 'mono long'), el('td', null, [action])
        ]);
      }), 'No deliveries logged.')
    );
  }

  async function replay(button, d) {
    button.disabled = true;
    try {
      var r = await api('POST', '/dashboard/api/deliveries/' + encodeURIComponent(d.id) + '/replay');
      notify('Replay queued: ' + d.eventType + ' to ' + (r.webhookId || d.webhookId) + ' as attempt ' + r.attempt + '.');
      button.textContent = 'Queued';
      // The job runner picks it up at once; show its outcome shortly after.
      setTimeout(function () { if (location.hash.indexOf('#webhooks') === 0) route(); }, 1500);
    } catch (err) {
      button.disabled = false;
      failed(err);
    }
  }

  async function viewDomains(view) {
    var list = await api('GET', '/domains');
    view.append(el('h1', { textContent: 'Domains' }));
    if (!list.data.length) view.append(el('p', { className: 'empty', textContent: 'No custom domains. Add one with POST /domains or mailroom domains add.' }));
    list.data.forEach(function (d) { view.append(domainCard(d)); });
  }

  function domainCard(d) {
    var card = el('div', { className: 'card domain', dataset: { id: d.id } });
    var verify = el('button', { type: 'button', className: 'verify', textContent: 'Verify now', onclick: async function () {
      verify.disabled = true;
      verify.textContent = 'Checking DNS\u2026';
      try {
        var fresh = await api('POST', '/domains/' + encodeURIComponent(d.id) + '/verify');
        card.replaceWith(domainCard(fresh));
        notify(fresh.domain + ': sending ' + fresh.sendingStatus + ', receiving ' + fresh.receivingStatus + '.');
      } catch (err) {
        verify.disabled = false;
        verify.textContent = 'Verify now';
        failed(err);
      }
    } });
    var checks = {};
    (d.dnsCheck || []).forEach(function (c) { checks[c.type + ' ' + c.name] = c; });
    var rows = (d.dnsRecords || []).map(function (r) {
      var c = checks[r.type + ' ' + r.name];
      return el('tr', null, [td(r.type), td(r.name, 'mono host'), td(r.priority === undefined ? '' : r.priority, 'num'), td(r.value, 'mono long'),
        el('td', null, [c ? badge(c.state === 'found' ? 'verified' : c.state) : null, c && c.detail ? el('div', { className: 'muted', textContent: c.detail }) : null])]);
    });
    card.append(
      el('div', { className: 'domain-head' }, [
        el('h2', { textContent: d.domain }),
        el('span', null, ['sending ', badge(d.sendingStatus)]), el('span', null, ['receiving ', badge(d.receivingStatus)]), verify
      ]),
      el('p', { className: 'muted', textContent: (d.lastCheckedAt ? 'Last checked ' + when(d.lastCheckedAt) + '. ' : 'Not checked yet. ') + (d.lastCheckError || '') }),
      table(['Type', 'Name', '#Priority', 'Value', d.dnsCheck ? 'In DNS' : ''], rows, 'No records.')
    );
    return card;
  }

  // ---- routing ---------------------------------------------------------------------------

  var webhookFilter = { status: '' };

  async function route() {
    if (!sessionStorage.getItem(STORE)) { showSignin(); return; }
    var hash = location.hash.replace(/^#/, '') || 'inboxes';
    var parts = hash.split('/');
    var name = parts[0];
    document.querySelectorAll('nav a').forEach(function (a) { a.classList.toggle('active', a.dataset.view === name); });
    var view = el('section', { id: 'view', className: 'view-' + name });
    $('view').replaceWith(view);
    try {
      if (name === 'messages') await viewMessages(view, parts[1] ? decodeURIComponent(parts[1]) : '');
      else if (name === 'webhooks') await viewWebhooks(view, webhookFilter);
      else if (name === 'domains') await viewDomains(view);
      else await viewInboxes(view);
      view.dataset.loaded = 'true';
    } catch (err) { failed(err); }
  }

  document.addEventListener('DOMContentLoaded', function () {
    $('signin-form').addEventListener('submit', async function (ev) {
      ev.preventDefault();
      var key = $('key').value.trim();
      if (!key) return;
      try {
        if (await signIn(key)) { $('key').value = ''; route(); }
      } catch (err) { failed(err); }
    });
    $('signout').addEventListener('click', function () { signOut(); });
    window.addEventListener('hashchange', route);
    var key = sessionStorage.getItem(STORE);
    if (!key) { showSignin(); return; }
    signIn(key).then(function (ok) { if (ok) route(); }, failed);
  });
})();
`;
