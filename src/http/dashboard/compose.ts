// The dashboard's writing (joined in script.ts): a new message (POST /inboxes/{id}/messages),
// a reply or reply-all (POST /messages/{id}/reply) and a forward (POST /messages/{id}/forward),
// with Bcc and uploaded attachments; a new message or a reply can be kept as a draft instead
// (POST /inboxes/{id}/drafts). Recipients, subject and threading of a reply come from the
// server, as for any API client.

export const COMPOSE_JS = String.raw`
  /** The form in a message's slot: reply, reply-all or forward. Opening it again closes it. */
  function openComposer(slot, kind, m) {
    if (slot.dataset.kind === kind) { closeComposer(slot); return; }
    slot.dataset.kind = kind;
    var forward = kind === 'forward';
    var to = forward ? field('To', 'input', { type: 'text', name: 'to', required: true, placeholder: 'someone@example.com, \u2026' }) : null;
    var body = field(forward ? 'Note above the forwarded message' : 'Reply', 'textarea', { name: 'bodyText', required: !forward });
    var bcc = field('Bcc', 'input', { type: 'text', name: 'bcc', placeholder: 'blind copies: in no header' });
    // A forward carries the original's attachments; a reply may add files.
    var files = forward ? null : attachmentPicker();
    var send = el('button', { type: 'submit', className: 'send', textContent: forward ? 'Forward' : 'Send reply' });
    var save = forward ? null : writeButton('Save draft', 'quiet save-draft', async function () {
      // A reply draft (inReplyTo): the server fills To and the subject as a reply's.
      if (!uploadsDone(files)) return;
      var draft = Object.assign({ inReplyTo: m.id, bodyText: body.input.value, attachmentIds: files.ids() }, blind(bcc),
        kind === 'reply-all' ? { cc: replyAllCc(m) } : {});
      await api('POST', '/inboxes/' + enc(m.inboxId) + '/drafts', draft);
      notify('Saved the reply as a draft (in Drafts).');
      closeComposer(slot);
    });
    var inbox = inboxOf(m.inboxId);
    var who = m.direction === 'inbound' ? (m.fromName || m.fromAddress) : (m.toAddresses || []).join(', ');
    var form = el('form', { className: 'composer ' + kind }, [
      forward ? null : el('p', { className: 'muted', textContent: (kind === 'reply-all' ? 'Reply to all: ' : 'Reply to ') + who + ', from ' + (inbox ? inbox.address : m.inboxId) }),
      to, body, bcc, files,
      el('div', { className: 'actions' }, [send, save, el('button', { type: 'button', className: 'quiet', textContent: 'Cancel', onclick: function () { closeComposer(slot); } })])
    ]);
    form.addEventListener('submit', busy(send, async function () {
      if (files && !uploadsDone(files)) return;
      var sent = forward
        ? await api('POST', '/messages/' + enc(m.id) + '/forward', Object.assign({ to: addresses(to.input.value), bodyText: body.input.value || null }, blind(bcc)))
        : await api('POST', '/messages/' + enc(m.id) + '/reply', Object.assign({ bodyText: body.input.value, replyAll: kind === 'reply-all', attachmentIds: files.ids() }, blind(bcc)));
      notify((forward ? 'Forward' : 'Reply') + ' to ' + sent.toAddresses.join(', ') + ' ' + sent.status + (sent.delivery === 'dry-run' ? ' (dry-run)' : '') + '.');
      closeComposer(slot);
      // A reply joins this conversation: show it; a forward starts a new one.
      if (!forward && state.thread) await openThread(state.thread.id);
    }));
    slot.replaceChildren(form);
    (forward ? to : body).input.focus();
  }

  /** {bcc: [...]} when the Bcc field names someone, else nothing. */
  function blind(bcc) {
    var list = addresses(bcc.input.value);
    return list.length ? { bcc: list } : {};
  }

  /**
   * Reply all, kept as a draft: the draft fills only To (the sender), so its Cc is the original's
   * To and Cc less this inbox and the sender, as POST /messages/{id}/reply with replyAll does.
   */
  function replyAllCc(m) {
    var inbox = inboxOf(m.inboxId);
    var seen = {};
    [inbox ? inbox.address : '', m.fromAddress].forEach(function (a) { seen[String(a).toLowerCase()] = true; });
    return (m.toAddresses || []).concat(m.ccAddresses || []).filter(function (a) {
      var k = a.toLowerCase();
      if (seen[k]) return false;
      seen[k] = true;
      return true;
    });
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
    var bcc = field('Bcc', 'input', { type: 'text', name: 'bcc', placeholder: 'blind copies: in no header' });
    var subject = field('Subject', 'input', { type: 'text', name: 'subject', required: true });
    var body = field('Message', 'textarea', { name: 'bodyText' });
    var files = attachmentPicker();
    var send = el('button', { type: 'submit', className: 'send', textContent: 'Send' });
    /** The fields filled in (a draft may leave any out). */
    function message() {
      var cc_ = addresses(cc.input.value);
      return Object.assign({ to: addresses(to.input.value), subject: subject.input.value, bodyText: body.input.value },
        cc_.length ? { cc: cc_ } : {}, blind(bcc), files.ids().length ? { attachmentIds: files.ids() } : {});
    }
    var save = el('button', { type: 'button', className: 'quiet save-draft', textContent: 'Save draft' });
    save.addEventListener('click', busy(save, async function () {
      if (!uploadsDone(files)) return;
      var draft = message();
      Object.keys(draft).forEach(function (k) { if (!draft[k] || !draft[k].length) delete draft[k]; });
      await api('POST', '/inboxes/' + enc(from.input.value) + '/drafts', draft);
      notify('Saved as a draft.');
      location.hash = '#drafts';
    }));
    var form = el('form', { className: 'card compose-form', id: 'compose' }, [
      el('h1', { textContent: 'New message' }), from, to, el('div', { className: 'grid2' }, [cc, bcc]), subject, body, files,
      el('div', { className: 'actions' }, [send, save, el('a', { href: '#mail/' + enc(state.mailbox || 'all'), className: 'back-link', textContent: 'Cancel' })])
    ]);
    form.addEventListener('submit', busy(send, async function () {
      if (!uploadsDone(files)) return;
      var sent = await api('POST', '/inboxes/' + enc(from.input.value) + '/messages', message());
      notify('Message to ' + sent.toAddresses.join(', ') + ' ' + sent.status + (sent.delivery === 'dry-run' ? ' (dry-run)' : '') + '.');
      location.hash = '#mail/' + enc(sent.inboxId) + '/' + enc(sent.threadId);
    }));
    pane.replaceChildren(form);
    pane.dataset.thread = '';
    to.input.focus();
  }
`;
