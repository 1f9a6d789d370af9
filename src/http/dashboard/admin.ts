// The dashboard's operator views (joined in script.ts): inboxes (create one), webhooks (create
// one, the delivery log, replay of a failed delivery through the one dashboard-only endpoint),
// domains (records, verify) and API keys (create one). Routes: #inboxes, #webhooks, #domains, #keys.

export const ADMIN_JS = String.raw`
  function stat(n, label) { return el('div', { className: 'stat' }, [el('b', { textContent: String(n) }), el('span', { textContent: label })]); }

  /** A form in a card that runs submit(fields) and then shows the view again (or what it returns). */
  function createForm(title, fields, buttonText, submit) {
    if (state.readOnly) return null;
    var button = el('button', { type: 'submit', textContent: buttonText });
    var form = el('form', { className: 'card create' }, [el('h2', { textContent: title })].concat(fields, [el('div', { className: 'actions' }, [button])]));
    form.addEventListener('submit', busy(button, async function () {
      var shown = await submit();
      await route(true);
      if (shown) $('view').prepend(shown);
    }));
    return form;
  }

  async function viewInboxes(view) {
    var page = await loadInboxes();
    var sum = function (f) { return page.data.reduce(function (n, i) { return n + (i[f] || 0); }, 0); };
    var address = field('Address (optional: a local part such as "support", or a full address)', 'input', { type: 'text', name: 'address', placeholder: 'random when empty' });
    var name = field('Display name (optional)', 'input', { type: 'text', name: 'displayName' });
    put(view, [
      el('h1', { textContent: 'Inboxes' }),
      el('div', { className: 'stats' }, [
        stat(page.total, 'inboxes'), stat(sum('sendsToday'), 'sent today'), stat(sum('totalSent'), 'sent in total'),
        stat(sum('bounceCount'), 'bounces'), stat(sum('complaintCount'), 'complaints')
      ]),
      table(['Address', 'Name', 'Status', '#Today / limit', '#Total sent', '#Bounces', '#Complaints', 'Created'],
        page.data.map(function (i) {
          return el('tr', { className: 'clickable inbox-row', dataset: { id: i.id }, title: 'Open its mail', onclick: function () { location.hash = '#mail/' + enc(i.id); } }, [
            td(i.address, 'mono addr'), td(i.displayName || ''), el('td', null, [badge(i.status)]),
            td(i.sendsToday + ' / ' + i.dailySendLimit, 'num'), td(i.totalSent, 'num'), td(i.bounceCount, 'num'),
            td(i.complaintCount, 'num'), td(when(i.createdAt))
          ]);
        }), 'No inboxes yet.'),
      page.total > page.data.length ? el('p', { className: 'muted', textContent: 'Showing the ' + page.data.length + ' most recent of ' + page.total + '.' }) : null,
      createForm('New inbox', [el('div', { className: 'grid2' }, [address, name])], 'Create inbox', async function () {
        var body = {};
        if (address.input.value.trim()) body.address = address.input.value.trim();
        if (name.input.value.trim()) body.displayName = name.input.value.trim();
        var inbox = await api('POST', '/inboxes', body);
        notify('Created inbox ' + inbox.address + '.');
      })
    ]);
  }

  async function viewWebhooks(view, filter) {
    var results = await Promise.all([api('GET', '/webhooks'), api('GET', '/webhooks/catalog'),
      api('GET', '/webhooks/logs?limit=100' + (filter.status ? '&status=' + filter.status : ''))]);
    var hooks = results[0], catalog = results[1].data, logs = results[2];
    state.webhooks = hooks.data;
    var onlyFailed = el('select', { id: 'log-status', attrs: { 'aria-label': 'Delivery status' }, onchange: function () { filter.status = onlyFailed.value; route(true); } },
      ['', 'failed', 'success', 'pending'].map(function (s) { return el('option', { value: s, textContent: s || 'all statuses', selected: s === (filter.status || '') }); }));
    var url = field('URL (https; the server must be able to reach it)', 'input', { type: 'text', name: 'url', required: true, placeholder: 'the https URL of your receiver' });
    var events = catalog.map(function (e) {
      var box = el('input', { type: 'checkbox', value: e.name, name: 'events' });
      return el('label', { className: 'check', title: e.description }, [box, e.name]);
    });
    put(view, [
      el('h1', { textContent: 'Webhooks' }),
      table(['URL', 'Events', 'State', 'Created'], hooks.data.map(function (h) {
        return el('tr', { className: 'webhook-row', dataset: { id: h.id } }, [
          td(h.url, 'mono long'), td(h.events && h.events.length ? h.events.join(', ') : 'all events'),
          el('td', null, [badge(h.isActive ? 'active' : 'inactive')]), td(when(h.createdAt))
        ]);
      }), 'No webhooks yet.'),
      createForm('New webhook', [url, el('label', { textContent: 'Events (none ticked: every event)' }), el('div', null, events)], 'Create webhook', async function () {
        var picked = events.map(function (l) { return l.firstChild; }).filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
        var hook = await api('POST', '/webhooks', Object.assign({ url: url.input.value.trim() }, picked.length ? { events: picked } : {}));
        notify('Created webhook ' + hook.id + '.');
        return shownOnce('Signing secret of ' + hook.url, hook.secret, 'Shown only once: the receiver checks each delivery\'s signature with it.');
      }),
      el('div', { className: 'toolbar' }, [el('h2', { textContent: 'Delivery log' }), el('span', { className: 'spacer' }), onlyFailed,
        el('button', { type: 'button', className: 'small', textContent: 'Refresh', onclick: function () { route(true); } })]),
      table(['When', 'Event', 'Webhook', 'Status', '#HTTP', '#Attempt', '#ms', 'Error', ''], logs.data.map(function (d) {
        var action = d.status === 'failed'
          ? writeButton('Replay', 'small replay', function (b) { return replay(b, d); }, 'Send this event again as one new attempt')
          : null;
        return el('tr', { className: 'delivery-row', dataset: { id: d.id, status: d.status } }, [
          td(when(d.createdAt), 'when'), td(d.eventType), td(urlOf(d.webhookId), 'mono long'), el('td', null, [badge(d.status)]),
          td(d.httpStatus === null ? '-' : d.httpStatus, 'num'), td(d.attempt, 'num'), td(d.durationMs, 'num'), td(d.error || '', 'mono long'), el('td', null, [action])
        ]);
      }), 'No deliveries logged.')
    ]);
  }

  async function replay(button, d) {
    var r = await api('POST', '/dashboard/api/deliveries/' + enc(d.id) + '/replay');
    notify('Replay queued: ' + d.eventType + ' to ' + urlOf(r.webhookId || d.webhookId) + ' as attempt ' + r.attempt + '.');
    button.replaceWith(el('span', { className: 'muted', textContent: 'Queued' }));
    // The job runner picks it up at once; show its outcome shortly after.
    setTimeout(function () { if (location.hash.indexOf('#webhooks') === 0) route(true); }, 1500);
  }
  function urlOf(webhookId) {
    var h = state.webhooks.filter(function (w) { return w.id === webhookId; })[0];
    return h ? h.url : webhookId;
  }

  async function viewDomains(view) {
    var list = await api('GET', '/domains');
    view.append(el('h1', { textContent: 'Domains' }));
    if (!list.data.length) view.append(el('p', { className: 'empty', textContent: 'No custom domains. Add one with POST /domains or mailroom domains add.' }));
    list.data.forEach(function (d) { view.append(domainCard(d)); });
  }

  function domainCard(d) {
    var card = el('div', { className: 'card domain', dataset: { id: d.id } });
    var verify = el('button', { type: 'button', className: 'verify', textContent: 'Verify now', hidden: state.readOnly });
    verify.addEventListener('click', busy(verify, async function () {
      verify.textContent = 'Checking DNS\u2026';
      try {
        var fresh = await api('POST', '/domains/' + enc(d.id) + '/verify');
        card.replaceWith(domainCard(fresh));
        notify(fresh.domain + ': sending ' + fresh.sendingStatus + ', receiving ' + fresh.receivingStatus + '.');
      } finally { verify.textContent = 'Verify now'; }
    }));
    var checks = {};
    (d.dnsCheck || []).forEach(function (c) { checks[c.type + ' ' + c.name] = c; });
    var rows = (d.dnsRecords || []).map(function (r) {
      var c = checks[r.type + ' ' + r.name];
      return el('tr', null, [td(r.type), td(r.name, 'mono host'), td(r.priority === undefined ? '' : r.priority, 'num'), td(r.value, 'mono long'),
        el('td', null, [c ? badge(c.state === 'found' ? 'verified' : c.state) : null, c && c.detail ? el('div', { className: 'muted', textContent: c.detail }) : null])]);
    });
    put(card, [
      el('div', { className: 'domain-head' }, [
        el('h2', { textContent: d.domain }),
        el('span', null, ['sending ', badge(d.sendingStatus)]), el('span', null, ['receiving ', badge(d.receivingStatus)]), verify
      ]),
      el('p', { className: 'muted', textContent: (d.lastCheckedAt ? 'Last checked ' + when(d.lastCheckedAt) + '. ' : 'Not checked yet. ') + (d.lastCheckError || '') }),
      table(['Type', 'Name', '#Priority', 'Value', d.dnsCheck ? 'In DNS' : ''], rows, 'No records.')
    ]);
    return card;
  }

  async function viewKeys(view) {
    var keys = await api('GET', '/account/api-keys');
    var name = field('Name', 'input', { type: 'text', name: 'name', placeholder: 'e.g. support-agent' });
    put(view, [
      el('h1', { textContent: 'API keys' }),
      el('p', { className: 'muted', textContent: 'Keys of this account; their values are never shown again after creation. A key made here can read and write; mailroom keys create --read-only makes a read-only one, mailroom keys revoke ID (or DELETE /account/api-keys/{id}) revokes one.' }),
      table(['Name', 'Prefix', 'Rights', 'Last used', 'Expires', 'Created'], keys.data.map(function (k) {
        return el('tr', { className: 'key-row', dataset: { id: k.id } }, [td(k.name || ''), td(k.keyPrefix + '\u2026', 'mono'),
          el('td', null, [badge(k.readOnly ? 'read-only' : 'read-write', k.readOnly ? '' : 'ok')]), td(when(k.lastUsedAt) || 'never'), td(when(k.expiresAt) || 'never'), td(when(k.createdAt))]);
      }), 'No keys.'),
      createForm('New API key', [name], 'Create key', async function () {
        var created = await api('POST', '/account/api-keys', name.input.value.trim() ? { name: name.input.value.trim() } : {});
        notify('Created key ' + (created.name || created.prefix) + '.');
        return shownOnce('New API key' + (created.name ? ' ' + created.name : ''), created.key, created.message);
      })
    ]);
  }
`;
