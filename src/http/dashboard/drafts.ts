// The dashboard's drafts queue (joined in script.ts): what agents drafted, every inbox's drafts
// (GET /inboxes/{id}/drafts), to review, edit (PATCH /drafts/{id}), approve (POST
// /drafts/{id}/send) or discard (DELETE /drafts/{id}). Route: #drafts. A card shows what would
// go out, whole: the message it answers (who, subject, the start of it), both the text and the
// HTML part (the HTML in a sandboxed frame) and the attachments as download links.

export const DRAFTS_JS = String.raw`
  async function viewDrafts(view) {
    if (!state.inboxes.length) await loadInboxes();
    view.append(el('h1', { textContent: 'Drafts' }),
      el('p', { className: 'muted', textContent: 'Messages agents prepared and left for a person to approve. Approving sends the draft as it is shown.' }));
    var lists;
    try {
      lists = await Promise.all(state.inboxes.map(function (i) {
        return api('GET', '/inboxes/' + enc(i.id) + '/drafts?limit=100').then(function (p) { return p.data; });
      }));
    } catch (err) {
      // A server without the drafts API answers the route with 404 NOT_FOUND.
      if (err instanceof ApiError && err.code === 'NOT_FOUND') { view.append(el('p', { className: 'empty', textContent: 'This server does not offer drafts.' })); return; }
      throw err;
    }
    var drafts = [].concat.apply([], lists);
    drafts.sort(function (a, b) { return (a.updatedAt || a.createdAt) < (b.updatedAt || b.createdAt) ? 1 : -1; });
    if (!drafts.length) view.append(el('p', { className: 'empty', textContent: 'No drafts waiting.' }));
    drafts.forEach(function (d) { view.append(draftCard(d)); });
  }

  var list = function (v) { return Array.isArray(v) ? v.join(', ') : v || ''; };

  function draftCard(d) {
    var card = el('div', { className: 'card draft', dataset: { id: d.id } });
    var inbox = inboxOf(d.inboxId);
    var meta = [['From', inbox ? inboxLabel(inbox) : d.inboxId], ['To', list(d.to)], ['Cc', list(d.cc)], ['Bcc', list(d.bcc)],
      ['Send at', d.sendAt ? when(d.sendAt) : ''], ['Updated', when(d.updatedAt || d.createdAt)]];
    var answers = d.inReplyTo ? el('div', { className: 'answers' }) : null;
    var files = (d.attachmentIds || []).length ? el('div', { className: 'draft-files' }) : null;
    if (answers) answeredMessage(answers, d.inReplyTo).catch(failed);
    if (files) draftAttachments(files, d.attachmentIds).catch(failed);
    var discard = writeButton('Discard', 'danger discard', async function (b) {
      // Two clicks: the first asks, the second deletes.
      if (!b.dataset.armed) { b.dataset.armed = '1'; b.textContent = 'Click again to discard'; return; }
      await api('DELETE', '/drafts/' + enc(d.id));
      card.replaceWith(el('p', { className: 'muted draft-gone', textContent: 'Discarded the draft \u201c' + (d.subject || '(no subject)') + '\u201d.' }));
    });
    put(card, [
      el('h2', { textContent: d.subject || '(no subject)' }),
      el('dl', { className: 'meta' }, [].concat.apply([], meta.filter(function (p) { return p[1]; }).map(function (p) {
        return [el('dt', { textContent: p[0] }), el('dd', { textContent: p[1] })];
      }))),
      answers,
      draftParts(d),
      files,
      el('div', { className: 'actions' }, [
        writeButton('Approve and send', 'approve', async function () {
          // If-Match: what goes out is the version shown here, not one an agent edited since.
          var sent;
          try {
            sent = await api('POST', '/drafts/' + enc(d.id) + '/send', undefined, { 'If-Match': '"' + d.updatedAt + '"' });
          } catch (err) {
            if (!(err instanceof ApiError) || err.code !== 'PRECONDITION_FAILED') throw err;
            var fresh = await api('GET', '/drafts/' + enc(d.id));
            card.replaceWith(draftCard(fresh));
            notify('This draft changed since it was shown; here it is as it is now. Nothing was sent.', true);
            return;
          }
          notify('Sent \u201c' + (sent.subject || '') + '\u201d to ' + sent.toAddresses.join(', ') + ': ' + sent.status + '.');
          card.replaceWith(el('p', { className: 'muted draft-sent' }, ['Sent \u201c' + (sent.subject || '') + '\u201d (' + sent.status + '). ',
            el('a', { href: '#mail/' + enc(sent.inboxId) + '/' + enc(sent.threadId), textContent: 'Open the conversation' })]));
        }),
        writeButton('Edit', 'quiet edit', function () { card.replaceWith(draftEditor(d)); }),
        discard
      ])
    ]);
    return card;
  }

  /** The message a reply draft answers: who wrote it, its subject and its start, a link to its conversation. */
  async function answeredMessage(box, id) {
    var m;
    try {
      m = await api('GET', '/messages/' + enc(id));
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'MESSAGE_NOT_FOUND') throw err;
      box.replaceChildren(el('p', { className: 'muted', textContent: 'In reply to a message deleted since: sending it will fail.' }));
      return;
    }
    var who = m.direction === 'inbound' ? (m.fromName ? m.fromName + ' <' + m.fromAddress + '>' : m.fromAddress) : 'you (' + m.fromAddress + ')';
    box.replaceChildren(el('h3', { textContent: 'In reply to' }), el('blockquote', { className: 'answered' }, [
      el('div', null, [el('b', { textContent: who }), ' \u00b7 ', el('span', { className: 'muted', textContent: when(m.createdAt) })]),
      el('div', null, [el('a', { href: '#mail/all/' + enc(m.threadId), textContent: m.subject || '(no subject)' })]),
      el('div', { className: 'snippet', textContent: (m.bodyText || '').replace(/\s+/g, ' ').slice(0, 200) })
    ]));
  }

  /**
   * Both parts as they would go out, one above the other (an agent could write one thing in the
   * text and another in the HTML): the HTML in a sandboxed frame, never in this page.
   */
  function draftParts(d) {
    var text = el('pre', { className: 'body text-part', textContent: d.bodyText || (d.bodyHtml ? '(none: made from the HTML when it is sent)' : '(empty)') });
    if (!d.bodyHtml) return el('div', { className: 'parts' }, [el('h3', { textContent: 'Text' }), text]);
    var frame = el('iframe', { className: 'html-body', title: 'HTML part of the draft (sandboxed)', attrs: { sandbox: '', referrerpolicy: 'no-referrer' } });
    frame.srcdoc = d.bodyHtml;
    return el('div', { className: 'parts' }, [el('h3', { textContent: 'Text part' }), text, el('h3', { textContent: 'HTML part' }), frame]);
  }

  /** The draft's attachments (GET /attachments/{id}) as download links, never shown inline. */
  async function draftAttachments(box, ids) {
    var found = await Promise.all(ids.map(function (id) {
      return api('GET', '/attachments/' + enc(id)).catch(function (err) {
        if (err instanceof ApiError && err.code === 'ATTACHMENT_NOT_FOUND') return { id: id, filename: id + ' (gone)', size: 0, url: '' };
        throw err;
      });
    }));
    box.replaceChildren(el('h3', { textContent: 'Attachments' }), attachmentList({ attachments: found }));
  }

  function draftEditor(d) {
    var to = field('To', 'input', { type: 'text', name: 'to', value: list(d.to) });
    var cc = field('Cc', 'input', { type: 'text', name: 'cc', value: list(d.cc) });
    var bcc = field('Bcc', 'input', { type: 'text', name: 'bcc', value: list(d.bcc) });
    var subject = field('Subject', 'input', { type: 'text', name: 'subject', value: d.subject || '' });
    var body = field('Message', 'textarea', { name: 'bodyText', value: d.bodyText || '' });
    var save = el('button', { type: 'submit', className: 'save', textContent: 'Save' });
    var form = el('form', { className: 'card draft editing', dataset: { id: d.id } }, [
      el('h2', { textContent: 'Edit draft' }), to, el('div', { className: 'grid2' }, [cc, bcc]), subject, body,
      d.bodyHtml ? el('p', { className: 'muted', textContent: 'The draft also has an HTML body, left as it is.' }) : null,
      el('div', { className: 'actions' }, [save, el('button', { type: 'button', className: 'quiet', textContent: 'Cancel', onclick: function () { form.replaceWith(draftCard(d)); } })])
    ]);
    form.addEventListener('submit', busy(save, async function () {
      var fresh = await api('PATCH', '/drafts/' + enc(d.id), { to: addresses(to.input.value), cc: addresses(cc.input.value), bcc: addresses(bcc.input.value), subject: subject.input.value, bodyText: body.input.value });
      notify('Draft saved.');
      form.replaceWith(draftCard(fresh));
    }));
    return form;
  }
`;
