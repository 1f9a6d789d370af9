// The dashboard's writing (joined in script.ts): a new message (POST /inboxes/{id}/messages),
// a reply or reply-all (POST /messages/{id}/reply) and a forward (POST /messages/{id}/forward).
// Recipients, subject and threading of a reply come from the server, as for any API client.

export const COMPOSE_JS = String.raw`
  /** The form in a message's slot: reply, reply-all or forward. Opening it again closes it. */
  function openComposer(slot, kind, m) {
    if (slot.dataset.kind === kind) { closeComposer(slot); return; }
    slot.dataset.kind = kind;
    var forward = kind === 'forward';
    var to = forward ? field('To', 'input', { type: 'text', name: 'to', required: true, placeholder: 'someone@example.com, \u2026' }) : null;
    var body = field(forward ? 'Note above the forwarded message' : 'Reply', 'textarea', { name: 'bodyText', required: !forward });
    var send = el('button', { type: 'submit', className: 'send', textContent: forward ? 'Forward' : 'Send reply' });
    var inbox = inboxOf(m.inboxId);
    var who = m.direction === 'inbound' ? (m.fromName || m.fromAddress) : (m.toAddresses || []).join(', ');
    var form = el('form', { className: 'composer ' + kind }, [
      forward ? null : el('p', { className: 'muted', textContent: (kind === 'reply-all' ? 'Reply to all: ' : 'Reply to ') + who + ', from ' + (inbox ? inbox.address : m.inboxId) }),
      to, body,
      el('div', { className: 'actions' }, [send, el('button', { type: 'button', className: 'quiet', textContent: 'Cancel', onclick: function () { closeComposer(slot); } })])
    ]);
    form.addEventListener('submit', busy(send, async function () {
      var sent = forward
        ? await api('POST', '/messages/' + enc(m.id) + '/forward', { to: addresses(to.input.value), bodyText: body.input.value || null })
        : await api('POST', '/messages/' + enc(m.id) + '/reply', { bodyText: body.input.value, replyAll: kind === 'reply-all' });
      notify((forward ? 'Forward' : 'Reply') + ' to ' + sent.toAddresses.join(', ') + ' ' + sent.status + (sent.delivery === 'dry-run' ? ' (dry-run)' : '') + '.');
      closeComposer(slot);
      // A reply joins this conversation: show it; a forward starts a new one.
      if (!forward && state.thread) await openThread(state.thread.id);
    }));
    slot.replaceChildren(form);
    (forward ? to : body).input.focus();
  }

  function closeComposer(slot) {
    delete slot.dataset.kind;
    slot.replaceChildren();
  }

  /** r: reply to the last message of the open conversation. */
  function replyToOpen() { lastMessageButton('button.reply'); }

  /** A new message, in the conversation pane (c, or Compose). */
  function showCompose() {
    var pane = $('thread');
    if (!pane) { location.hash = '#mail/all/new'; return; }
    if (state.readOnly) { notify('This key is read-only: it cannot send.', true); return; }
    if (!state.inboxes.length) { notify('Create an inbox first (Inboxes).', true); return; }
    $('mail').classList.add('reading');
    document.querySelectorAll('.thread-row.selected').forEach(function (r) { r.classList.remove('selected'); });
    var from = field('From', 'select', { name: 'from' });
    state.inboxes.forEach(function (i) {
      from.input.append(el('option', { value: i.id, textContent: inboxLabel(i), selected: i.id === state.mailbox || (state.thread && state.thread.inboxId === i.id) }));
    });
    var to = field('To', 'input', { type: 'text', name: 'to', required: true, placeholder: 'someone@example.com, \u2026' });
    var cc = field('Cc', 'input', { type: 'text', name: 'cc' });
    var subject = field('Subject', 'input', { type: 'text', name: 'subject', required: true });
    var body = field('Message', 'textarea', { name: 'bodyText' });
    var send = el('button', { type: 'submit', className: 'send', textContent: 'Send' });
    var form = el('form', { className: 'card compose-form', id: 'compose' }, [
      el('h1', { textContent: 'New message' }), from, el('div', { className: 'grid2' }, [to, cc]), subject, body,
      el('div', { className: 'actions' }, [send, el('a', { href: '#mail/' + enc(state.mailbox || 'all'), className: 'back-link', textContent: 'Cancel' })])
    ]);
    form.addEventListener('submit', busy(send, async function () {
      var cc_ = addresses(cc.input.value);
      var sent = await api('POST', '/inboxes/' + enc(from.input.value) + '/messages',
        Object.assign({ to: addresses(to.input.value), subject: subject.input.value, bodyText: body.input.value }, cc_.length ? { cc: cc_ } : {}));
      notify('Message to ' + sent.toAddresses.join(', ') + ' ' + sent.status + (sent.delivery === 'dry-run' ? ' (dry-run)' : '') + '.');
      location.hash = '#mail/' + enc(sent.inboxId) + '/' + enc(sent.threadId);
    }));
    pane.replaceChildren(form);
    pane.dataset.thread = '';
    to.input.focus();
  }
`;
