// The dashboard script's foundation (joined with the other parts in script.ts): building
// elements, calling the API with the signed-in key, notices, badges, tables and form fields.
// Every value from the server is put in the page with textContent, never as HTML: subjects,
// names and bodies come from strangers on the internet.

export const CORE_JS = String.raw`
  var STORE = 'mailroom.apiKey';
  /** What the views share: the inboxes, unread counts per inbox, the key's rights, the open conversation. */
  var state = { inboxes: [], unread: {}, readOnly: false, webhooks: [], query: '', thread: null, mailbox: '', focusSearch: false, offset: 0, listKey: '' };

  function $(id) { return document.getElementById(id); }
  var enc = encodeURIComponent;

  /** el('td', {className: 'num'}, ['text', child]); on* props become listeners, attrs sets attributes. */
  function el(tag, props, children) {
    var node = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (k) {
        if (k === 'dataset') Object.assign(node.dataset, props[k]);
        else if (k === 'attrs') Object.keys(props[k]).forEach(function (a) { node.setAttribute(a, props[k][a]); });
        else if (k.slice(0, 2) === 'on') node.addEventListener(k.slice(2), props[k]);
        else node[k] = props[k];
      });
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined || c === false) return;
      node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    });
    return node;
  }

  /** Appends the children that are there (a view leaves out what a read-only key cannot use). */
  function put(node, children) {
    children.forEach(function (c) { if (c) node.append(c); });
    return node;
  }

  function when(iso) {
    if (!iso) return '';
    var d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  /** The time for today's mail, the date for older. */
  function shortWhen(iso) {
    var d = new Date(iso);
    if (isNaN(d)) return iso || '';
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : d.toLocaleDateString();
  }

  function size(bytes) {
    if (bytes < 1024) return bytes + ' B';
    if (bytes < 1048576) return Math.round(bytes / 1024) + ' KB';
    return (bytes / 1048576).toFixed(1) + ' MB';
  }

  var TONE = {
    active: 'ok', verified: 'ok', success: 'ok', sent: 'ok', delivered: 'ok', received: 'ok', pass: 'ok',
    pending: 'warn', pending_dkim: 'warn', queued: 'warn', sending: 'warn', scheduled: 'warn', neutral: 'warn', softfail: 'warn', temperror: 'warn',
    failed: 'bad', bounced: 'bad', complained: 'bad', suspended: 'bad', inactive: 'bad', fail: 'bad', permerror: 'bad', canceled: 'bad'
  };
  function badge(text, tone, title) {
    return el('span', { className: 'badge ' + (tone === undefined ? (TONE[text] || '') : tone), textContent: text, title: title || '' });
  }

  /** A notice that goes away by itself (and on the next view): never a banner that stays. */
  function notify(text, bad) {
    var n = $('notice');
    $('notice-text').textContent = text;
    n.className = bad ? 'bad' : '';
    n.hidden = false;
    notify.at = Date.now();
    clearTimeout(notify.timer);
    notify.timer = setTimeout(clearNotice, bad ? 10000 : 5000);
  }
  function clearNotice() { $('notice').hidden = true; }

  function ApiError(status, code, message) {
    this.status = status; this.code = code; this.message = message;
  }

  async function api(method, path, body, extraHeaders) {
    var key = sessionStorage.getItem(STORE);
    var headers = Object.assign({ Authorization: 'Bearer ' + key, Accept: 'application/json' }, extraHeaders || {});
    var init = { method: method, headers: headers, cache: 'no-store' };
    // A FormData (an upload) goes as multipart/form-data, with the boundary the browser sets.
    if (body instanceof FormData) init.body = body;
    else if (body !== undefined) { headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
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

  /** Runs an action of a button: disabled while it runs, errors as a notice. */
  function busy(button, fn) {
    return async function (ev) {
      if (ev) ev.preventDefault();
      button.disabled = true;
      try { await fn(); } catch (err) { failed(err); } finally { button.disabled = false; }
    };
  }

  /** A write action, or nothing for a read-only key (the server would answer 403 FORBIDDEN). */
  function writeButton(text, className, onclick, title) {
    if (state.readOnly) return null;
    var b = el('button', { type: 'button', className: className || '', textContent: text, title: title || '' });
    b.addEventListener('click', busy(b, function () { return onclick(b); }));
    return b;
  }

  function table(headers, rows, empty) {
    if (!rows.length) return el('p', { className: 'empty', textContent: empty });
    return el('div', { className: 'scroll' }, [el('table', null, [
      el('thead', null, [el('tr', null, headers.map(function (h) {
        return el('th', { className: h.charAt(0) === '#' ? 'num' : '', textContent: h.replace(/^#/, '') });
      }))]),
      el('tbody', null, rows)
    ])]);
  }
  function td(v, cls) { return el('td', { className: cls || '' }, [v]); }

  var fieldIds = 0;
  /** A labelled input: field('To', 'input', {type: 'text', value: ...}). */
  function field(label, tag, props) {
    var input = el(tag, Object.assign({ id: 'f' + (++fieldIds) }, props || {}));
    var wrap = el('div', { className: 'field' }, [el('label', { htmlFor: input.id, textContent: label }), input]);
    wrap.input = input;
    return wrap;
  }

  /**
   * Attachments for a message or a draft: each file chosen is uploaded at once (POST
   * /attachments, streamed to disk by the server) and listed with a Remove button; ids() are
   * the uploaded ones, in order, for attachmentIds.
   */
  function attachmentPicker() {
    var input = el('input', { id: 'f' + (++fieldIds), type: 'file', multiple: true, name: 'file' });
    var list = el('ul', { className: 'attachments picked' });
    var uploaded = [];
    var pending = 0;
    input.addEventListener('change', async function () {
      var files = Array.prototype.slice.call(input.files);
      input.value = '';
      await Promise.all(files.map(async function (f) {
        var item = el('li', { className: 'uploading', textContent: f.name + ' (uploading\u2026)' });
        list.append(item);
        pending++;
        try {
          var form = new FormData();
          form.append('file', f, f.name);
          var a = await api('POST', '/attachments', form);
          uploaded.push(a);
          item.className = 'uploaded';
          item.replaceChildren(a.filename + ' (' + size(a.size) + ') ', el('button', { type: 'button', className: 'link', textContent: 'Remove', attrs: { 'aria-label': 'Remove ' + a.filename },
            onclick: function () { uploaded.splice(uploaded.indexOf(a), 1); item.remove(); } }));
        } catch (err) { item.remove(); failed(err); } finally { pending--; }
      }));
    });
    var wrap = el('div', { className: 'field' }, [el('label', { htmlFor: input.id, textContent: 'Attachments' }), input, list]);
    wrap.ids = function () { return uploaded.map(function (a) { return a.id; }); };
    wrap.uploading = function () { return pending > 0; };
    return wrap;
  }

  /** Refuses to send while a file is still uploading (it would go without it). */
  function uploadsDone(picker) {
    if (!picker.uploading()) return true;
    notify('Wait until the attachments have uploaded.', true);
    return false;
  }

  /** "a@x, b@y" -> ['a@x', 'b@y']. */
  function addresses(text) {
    return String(text || '').split(/[,;\s]+/).filter(function (s) { return s; });
  }

  /** A value shown once (a new key, a webhook secret) until dismissed. */
  function shownOnce(title, value, note) {
    var box = el('div', { className: 'card once' }, [
      el('b', { textContent: title }), el('code', { className: 'mono once-value', textContent: value }), el('p', { className: 'muted', textContent: note })
    ]);
    box.append(el('button', { type: 'button', className: 'small quiet', textContent: 'I have stored it', onclick: function () { box.remove(); } }));
    return box;
  }
`;
