// The dashboard's drafts queue: what agents drafted, every inbox's drafts (GET
// /inboxes/{id}/drafts), to review, edit (PATCH /drafts/{id}), approve (POST /drafts/{id}/send)
// or discard (DELETE /drafts/{id}). Route: #drafts. A card shows what would go out, whole: the
// message it answers (who, subject, the start of it), both the text and the HTML part (the
// HTML in a sandboxed frame) and the attachments as download links.
import { addresses, api, ApiError, busy, el, enc, failed, field, notify, put, state, when, writeButton } from './core.ts';
import { attachmentList, htmlFrame, inboxLabel, inboxOf, loadInboxes } from './mail.ts';
import type { Attachment, Draft, Message, Page } from './types.ts';

export async function viewDrafts(view: HTMLElement): Promise<void> {
  if (!state.inboxes.length) await loadInboxes();
  view.append(
    el('h1', { textContent: 'Drafts' }),
    el('p', { className: 'muted', textContent: 'Messages agents prepared and left for a person to approve. Approving sends the draft as it is shown.' }),
  );
  let lists: Draft[][];
  try {
    lists = await Promise.all(state.inboxes.map((i) => api<Page<Draft>>('GET', `/inboxes/${enc(i.id)}/drafts?limit=100`).then((p) => p.data)));
  } catch (err) {
    // A server without the drafts API answers the route with 404 NOT_FOUND.
    if (err instanceof ApiError && err.code === 'NOT_FOUND') {
      view.append(el('p', { className: 'empty', textContent: 'This server does not offer drafts.' }));
      return;
    }
    throw err;
  }
  const drafts = lists.flat();
  drafts.sort((a, b) => ((a.updatedAt || a.createdAt) < (b.updatedAt || b.createdAt) ? 1 : -1));
  if (!drafts.length) view.append(el('p', { className: 'empty', textContent: 'No drafts waiting.' }));
  for (const d of drafts) view.append(draftCard(d));
}

const list = (v: string[] | null) => (v ?? []).join(', ');

function draftCard(d: Draft): HTMLElement {
  const card = el('div', { className: 'card draft', dataset: { id: d.id } });
  const inbox = inboxOf(d.inboxId);
  const meta = [
    ['From', inbox ? inboxLabel(inbox) : d.inboxId],
    ['To', list(d.to)],
    ['Cc', list(d.cc)],
    ['Bcc', list(d.bcc)],
    ['Send at', d.sendAt ? when(d.sendAt) : ''],
    ['Updated', when(d.updatedAt || d.createdAt)],
  ];
  const answers = d.inReplyTo ? el('div', { className: 'answers' }) : null;
  const files = (d.attachmentIds ?? []).length ? el('div', { className: 'draft-files' }) : null;
  if (answers) answeredMessage(answers, d.inReplyTo!).catch(failed);
  if (files) draftAttachments(files, d.attachmentIds!).catch(failed);
  const discard = writeButton('Discard', 'danger discard', async (b) => {
    // Two clicks: the first asks, the second deletes.
    if (!b.dataset.armed) {
      b.dataset.armed = '1';
      b.textContent = 'Click again to discard';
      return;
    }
    await api('DELETE', `/drafts/${enc(d.id)}`);
    card.replaceWith(el('p', { className: 'muted draft-gone', textContent: `Discarded the draft \u201c${d.subject || '(no subject)'}\u201d.` }));
  });
  const approve = writeButton('Approve and send', 'approve', async () => {
    // If-Match: what goes out is the version shown here, not one an agent edited since.
    let sent: Message;
    try {
      sent = await api<Message>('POST', `/drafts/${enc(d.id)}/send`, undefined, { 'If-Match': `"${d.updatedAt}"` });
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'PRECONDITION_FAILED') throw err;
      const fresh = await api<Draft>('GET', `/drafts/${enc(d.id)}`);
      card.replaceWith(draftCard(fresh));
      notify('This draft changed since it was shown; here it is as it is now. Nothing was sent.', true);
      return;
    }
    notify(`Sent \u201c${sent.subject || ''}\u201d to ${sent.toAddresses.join(', ')}: ${sent.status}.`);
    card.replaceWith(
      el('p', { className: 'muted draft-sent' }, [
        `Sent \u201c${sent.subject || ''}\u201d (${sent.status}). `,
        el('a', { href: `#mail/${enc(sent.inboxId)}/${enc(sent.threadId)}`, textContent: 'Open the conversation' }),
      ]),
    );
  });
  put(card, [
    el('h2', { textContent: d.subject || '(no subject)' }),
    el(
      'dl',
      { className: 'meta' },
      meta.filter((p) => p[1]).flatMap((p) => [el('dt', { textContent: p[0] }), el('dd', { textContent: p[1] })]),
    ),
    answers,
    draftParts(d),
    files,
    put(el('div', { className: 'actions' }), [approve, writeButton('Edit', 'quiet edit', () => card.replaceWith(draftEditor(d))), discard]),
  ]);
  return card;
}

/** The message a reply draft answers: who wrote it, its subject and its start, a link to its conversation. */
async function answeredMessage(box: HTMLElement, id: string): Promise<void> {
  let m: Message;
  try {
    m = await api<Message>('GET', `/messages/${enc(id)}`);
  } catch (err) {
    if (!(err instanceof ApiError) || err.code !== 'MESSAGE_NOT_FOUND') throw err;
    box.replaceChildren(el('p', { className: 'muted', textContent: 'In reply to a message deleted since: sending it will fail.' }));
    return;
  }
  const who = m.direction === 'inbound' ? (m.fromName ? `${m.fromName} <${m.fromAddress}>` : m.fromAddress) : `you (${m.fromAddress})`;
  box.replaceChildren(
    el('h3', { textContent: 'In reply to' }),
    el('blockquote', { className: 'answered' }, [
      el('div', null, [el('b', { textContent: who }), ' \u00b7 ', el('span', { className: 'muted', textContent: when(m.createdAt) })]),
      el('div', null, [el('a', { href: `#mail/all/${enc(m.threadId)}`, textContent: m.subject || '(no subject)' })]),
      el('div', { className: 'snippet', textContent: (m.bodyText || '').replace(/\s+/g, ' ').slice(0, 200) }),
    ]),
  );
}

/**
 * Both parts as they would go out, one above the other (an agent could write one thing in the
 * text and another in the HTML): the HTML in a sandboxed frame, never in this page.
 */
function draftParts(d: Draft): HTMLElement {
  const text = el('pre', { className: 'body text-part', textContent: d.bodyText || (d.bodyHtml ? '(none: made from the HTML when it is sent)' : '(empty)') });
  if (!d.bodyHtml) return el('div', { className: 'parts' }, [el('h3', { textContent: 'Text' }), text]);
  return el('div', { className: 'parts' }, [el('h3', { textContent: 'Text part' }), text, el('h3', { textContent: 'HTML part' }), htmlFrame(d.bodyHtml, 'HTML part of the draft (sandboxed)')]);
}

/** The draft's attachments (GET /attachments/{id}) as download links, never shown inline. */
async function draftAttachments(box: HTMLElement, ids: string[]): Promise<void> {
  const found = await Promise.all(
    ids.map((id) =>
      api<Attachment>('GET', `/attachments/${enc(id)}`).catch((err: unknown): Attachment => {
        if (err instanceof ApiError && err.code === 'ATTACHMENT_NOT_FOUND') return { id, filename: `${id} (gone)`, contentType: '', size: 0, url: '' };
        throw err;
      }),
    ),
  );
  box.replaceChildren(el('h3', { textContent: 'Attachments' }), attachmentList(found) ?? '');
}

function draftEditor(d: Draft): HTMLElement {
  const to = field('To', 'input', { type: 'text', name: 'to', value: list(d.to) });
  const cc = field('Cc', 'input', { type: 'text', name: 'cc', value: list(d.cc) });
  const bcc = field('Bcc', 'input', { type: 'text', name: 'bcc', value: list(d.bcc) });
  const subject = field('Subject', 'input', { type: 'text', name: 'subject', value: d.subject || '' });
  const body = field('Message', 'textarea', { name: 'bodyText', value: d.bodyText || '' });
  const save = el('button', { type: 'submit', className: 'save', textContent: 'Save' });
  const form = el('form', { className: 'card draft editing', dataset: { id: d.id } }, [
    el('h2', { textContent: 'Edit draft' }),
    to,
    el('div', { className: 'grid2' }, [cc, bcc]),
    subject,
    body,
    d.bodyHtml ? el('p', { className: 'muted', textContent: 'The draft also has an HTML body, left as it is.' }) : null,
    el('div', { className: 'actions' }, [save, el('button', { type: 'button', className: 'quiet', textContent: 'Cancel', onclick: () => form.replaceWith(draftCard(d)) })]),
  ]);
  form.addEventListener(
    'submit',
    busy(save, async () => {
      const change = { to: addresses(to.input.value), cc: addresses(cc.input.value), bcc: addresses(bcc.input.value), subject: subject.input.value, bodyText: body.input.value };
      const fresh = await api<Draft>('PATCH', `/drafts/${enc(d.id)}`, change);
      notify('Draft saved.');
      form.replaceWith(draftCard(fresh));
    }),
  );
  return form;
}
