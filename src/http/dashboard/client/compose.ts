// The dashboard's writing: a new message (POST /inboxes/{id}/messages), a reply or reply-all
// (POST /messages/{id}/reply) and a forward (POST /messages/{id}/forward), with Bcc and
// uploaded attachments; a new message or a reply can be kept as a draft instead (POST
// /inboxes/{id}/drafts). Recipients, subject and threading of a reply come from the server,
// as for any API client.
import { $, addresses, api, attachmentPicker, busy, el, enc, field, may, notify, state, uploadsDone, writeButton, type Picker } from './core.ts';
import { inboxLabel, inboxOf, lastMessageButton, openThread } from './mail.ts';
import type { Message } from './types.ts';

type Kind = 'reply' | 'reply-all' | 'forward';
type AddressField = HTMLDivElement & { input: HTMLInputElement };

/** {bcc: [...]} when the Bcc field names someone, else nothing. */
function blind(bcc: AddressField): { bcc?: string[] } {
  const list = addresses(bcc.input.value);
  return list.length ? { bcc: list } : {};
}

/** {attachmentIds: [...]} when files were uploaded, else nothing. */
function attached(files: Picker): { attachmentIds?: string[] } {
  const ids = files.ids();
  return ids.length ? { attachmentIds: ids } : {};
}

/**
 * Reply all, kept as a draft: the draft fills only To (the sender), so its Cc is the original's
 * To and Cc less this inbox and the sender, as POST /messages/{id}/reply with replyAll does.
 */
function replyAllCc(m: Message): string[] {
  const seen = new Set([inboxOf(m.inboxId)?.address ?? '', m.fromAddress].map((a) => a.toLowerCase()));
  return [...(m.toAddresses || []), ...(m.ccAddresses || [])].filter((a) => {
    const k = a.toLowerCase();
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** The form in a message's slot: reply, reply-all or forward. Opening it again closes it. */
export function openComposer(slot: HTMLElement, kind: Kind, m: Message): void {
  if (slot.dataset.kind === kind) {
    closeComposer(slot);
    return;
  }
  slot.dataset.kind = kind;
  const forward = kind === 'forward';
  const to = forward ? field('To', 'input', { type: 'text', name: 'to', required: true, placeholder: 'someone@example.com, \u2026' }) : null;
  const body = field(forward ? 'Note above the forwarded message' : 'Reply', 'textarea', { name: 'bodyText', required: !forward });
  const bcc = field('Bcc', 'input', { type: 'text', name: 'bcc', placeholder: 'blind copies: in no header' });
  // A forward carries the original's attachments; a reply may add files.
  const files = forward ? null : attachmentPicker();
  const send = el('button', { type: 'submit', className: 'send', textContent: forward ? 'Forward' : 'Send reply' });
  const save = files
    ? writeButton('Save draft', 'quiet save-draft', async () => {
        if (!uploadsDone(files)) return;
        // A reply draft (inReplyTo): the server fills To and the subject as a reply's.
        const draft = { inReplyTo: m.id, bodyText: body.input.value, ...attached(files), ...blind(bcc), ...(kind === 'reply-all' ? { cc: replyAllCc(m) } : {}) };
        await api('POST', `/inboxes/${enc(m.inboxId)}/drafts`, draft);
        notify('Saved the reply as a draft (in Drafts).');
        closeComposer(slot);
      })
    : null;
  const inbox = inboxOf(m.inboxId);
  const who = m.direction === 'inbound' ? m.fromName || m.fromAddress : (m.toAddresses || []).join(', ');
  const form = el('form', { className: `composer ${kind}` }, [
    forward ? null : el('p', { className: 'muted', textContent: `${kind === 'reply-all' ? 'Reply to all: ' : 'Reply to '}${who}, from ${inbox ? inbox.address : m.inboxId}` }),
    to,
    body,
    bcc,
    files,
    el('div', { className: 'actions' }, [send, save, el('button', { type: 'button', className: 'quiet', textContent: 'Cancel', onclick: () => closeComposer(slot) })]),
  ]);
  form.addEventListener(
    'submit',
    busy(send, async () => {
      if (files && !uploadsDone(files)) return;
      const sent = await api<Message>(
        'POST',
        `/messages/${enc(m.id)}/${forward ? 'forward' : 'reply'}`,
        forward || !files
          ? { to: addresses(to!.input.value), bodyText: body.input.value || null, ...blind(bcc) }
          : { bodyText: body.input.value, replyAll: kind === 'reply-all', ...attached(files), ...blind(bcc) },
      );
      notify(`${forward ? 'Forward' : 'Reply'} to ${sent.toAddresses.join(', ')} ${sent.status}${sent.delivery === 'dry-run' ? ' (dry-run)' : ''}.`);
      closeComposer(slot);
      // A reply joins this conversation: show it; a forward starts a new one.
      if (!forward && state.thread) await openThread(state.thread.id);
    }),
  );
  slot.replaceChildren(form);
  (to ?? body).input.focus();
}

function closeComposer(slot: HTMLElement): void {
  delete slot.dataset.kind;
  slot.replaceChildren();
}

/** r: reply to the last message of the open conversation. */
export function replyToOpen(): void {
  lastMessageButton('button.reply');
}

/** A new message, in the conversation pane (c, or Compose). */
export function showCompose(): void {
  const pane = document.getElementById('thread');
  if (!pane) {
    location.hash = '#mail/all/new';
    return;
  }
  if (!may('send')) {
    notify('This key has no send scope: it cannot send.', true);
    return;
  }
  if (!state.inboxes.length) {
    notify('Create an inbox first (Inboxes).', true);
    return;
  }
  $('mail').classList.add('reading');
  document.querySelectorAll('.thread-row.selected').forEach((r) => r.classList.remove('selected'));
  const from = field('From', 'select', { name: 'from' });
  for (const i of state.inboxes) {
    from.input.append(el('option', { value: i.id, textContent: inboxLabel(i), selected: i.id === state.mailbox || state.thread?.inboxId === i.id }));
  }
  const to = field('To', 'input', { type: 'text', name: 'to', required: true, placeholder: 'someone@example.com, \u2026' });
  const cc = field('Cc', 'input', { type: 'text', name: 'cc' });
  const bcc = field('Bcc', 'input', { type: 'text', name: 'bcc', placeholder: 'blind copies: in no header' });
  const subject = field('Subject', 'input', { type: 'text', name: 'subject', required: true });
  const body = field('Message', 'textarea', { name: 'bodyText' });
  const files = attachmentPicker();
  const send = el('button', { type: 'submit', className: 'send', textContent: 'Send' });
  /** The fields filled in (a draft may leave any out). */
  const message = () => {
    const copies = addresses(cc.input.value);
    return { to: addresses(to.input.value), subject: subject.input.value, bodyText: body.input.value, ...(copies.length ? { cc: copies } : {}), ...blind(bcc), ...attached(files) };
  };
  const save = el('button', { type: 'button', className: 'quiet save-draft', textContent: 'Save draft' });
  save.addEventListener(
    'click',
    busy(save, async () => {
      if (!uploadsDone(files)) return;
      const draft: Record<string, string | string[]> = message();
      for (const [k, v] of Object.entries(draft)) if (!v.length) delete draft[k];
      await api('POST', `/inboxes/${enc(from.input.value)}/drafts`, draft);
      notify('Saved as a draft.');
      location.hash = '#drafts';
    }),
  );
  const form = el('form', { className: 'card compose-form', id: 'compose' }, [
    el('h1', { textContent: 'New message' }),
    from,
    to,
    el('div', { className: 'grid2' }, [cc, bcc]),
    subject,
    body,
    files,
    el('div', { className: 'actions' }, [send, save, el('a', { href: `#mail/${enc(state.mailbox || 'all')}`, className: 'back-link', textContent: 'Cancel' })]),
  ]);
  form.addEventListener(
    'submit',
    busy(send, async () => {
      if (!uploadsDone(files)) return;
      const sent = await api<Message>('POST', `/inboxes/${enc(from.input.value)}/messages`, message());
      notify(`Message to ${sent.toAddresses.join(', ')} ${sent.status}${sent.delivery === 'dry-run' ? ' (dry-run)' : ''}.`);
      location.hash = `#mail/${enc(sent.inboxId)}/${enc(sent.threadId)}`;
    }),
  );
  pane.replaceChildren(form);
  pane.dataset.thread = '';
  to.input.focus();
}
