// The dashboard's mail client: mailboxes with unread counts, the list of conversations (search
// with the API's q, paging, labels, the Archive), and the open conversation: senders,
// SPF/DKIM/DMARC badges, labels, attachments, HTML bodies in a sandboxed frame. Opening a
// conversation marks it read (for a write key). Routes: #mail, #mail/<inbox id, all or
// archive>, #mail/<…>/<thread id>.
import { openComposer, showCompose } from './compose.ts';
import { $, ApiError, api, badge, busy, el, enc, failed, may, notify, put, shortWhen, size, state, table, td, TONE, when, writeButton, type Child } from './core.ts';
import { reasonList, screeningBadge } from './guard.ts';
import { refreshList } from './live.ts';
import { route } from './shell.ts';
import type { Attachment, Inbox, Message, Page, Thread } from './types.ts';

export async function loadInboxes(): Promise<Page<Inbox>> {
  const page = await api<Page<Inbox>>('GET', '/inboxes?limit=100');
  state.inboxes = page.data;
  return page;
}

/**
 * Unread messages per inbox: one page of unread messages across the account when it holds
 * them all (the usual case), else the total of one filtered page per inbox.
 */
export async function loadUnread(): Promise<void> {
  const counts: Record<string, number> = {};
  for (const i of state.inboxes) counts[i.id] = 0;
  const page = await api<Page<Message>>('GET', '/messages?unread=true&limit=100');
  if (page.total <= page.data.length) {
    for (const m of page.data) if (m.inboxId in counts) counts[m.inboxId]++;
  } else {
    const totals = await Promise.all(state.inboxes.map((i) => api<Page<Message>>('GET', `/inboxes/${enc(i.id)}/messages?unread=true&limit=1`).then((p) => p.total)));
    state.inboxes.forEach((i, n) => (counts[i.id] = totals[n]));
  }
  state.unread = counts;
}

export function inboxOf(id: string): Inbox | undefined {
  return state.inboxes.find((i) => i.id === id);
}
export function inboxLabel(i: Inbox | undefined): string {
  return i ? (i.displayName ? `${i.displayName} <${i.address}>` : i.address) : '';
}

function unreadTotal(): number {
  return Object.values(state.unread).reduce((n, k) => n + k, 0);
}

function mailboxLink(id: string, name: string, count: number | undefined): HTMLAnchorElement {
  return el('a', { href: `#mail/${enc(id)}`, className: `mailbox${state.mailbox === id ? ' active' : ''}`, dataset: { id }, title: name }, [
    el('span', { className: 'name', textContent: name }),
    el('span', { className: 'count', textContent: count ? String(count) : '' }),
  ]);
}

export function renderMailboxes(): void {
  const box = document.getElementById('mailboxes');
  if (!box) return;
  box.replaceChildren();
  put(box, [
    writeButton('Compose', 'compose', () => showCompose(), 'New message (c)'),
    mailboxLink('all', 'All inboxes', unreadTotal()),
    ...state.inboxes.map((i) => mailboxLink(i.id, i.displayName || i.address, state.unread[i.id])),
    mailboxLink(ARCHIVE_BOX, 'Archive', 0),
  ]);
}

/**
 * Archiving labels every message of a conversation ARCHIVED; the inboxes list the
 * conversations with a message without it (q -label:archived), so mail arriving in an
 * archived conversation brings it back, as in Gmail. The Archive mailbox lists the label.
 */
const ARCHIVED = 'archived';
const ARCHIVE_BOX = 'archive';

/** The list's filter: the search typed, within the Archive or the conversations not archived. */
function listFilter(mailbox: string): string {
  if (mailbox === ARCHIVE_BOX) return `&label=${ARCHIVED}${state.query ? `&q=${enc(state.query)}` : ''}`;
  return `&q=${enc(state.query || `-label:${ARCHIVED}`)}`;
}

/** Labels as chips, archived left out (it has its own button); each removable with a write key. */
function labelChips(labels: string[], remove?: (label: string) => Promise<void>): HTMLSpanElement | null {
  const shown = (labels || []).filter((l) => l !== ARCHIVED);
  if (!shown.length) return null;
  return el(
    'span',
    { className: 'labels' },
    shown.map((l) => {
      const chip = el('span', { className: 'label-chip' }, [l]);
      if (remove && may('send')) {
        const b = el('button', { type: 'button', className: 'link remove-label', textContent: '\u00d7', title: `Remove label ${l}`, attrs: { 'aria-label': `Remove label ${l}` } });
        b.addEventListener(
          'click',
          busy(b, () => remove(l)),
        );
        chip.append(b);
      }
      return chip;
    }),
  );
}

/** The form adding a label (to the conversation or one message), in its slot; again closes it. */
function labelForm(slot: HTMLElement, add: (label: string) => Promise<void>): void {
  if (slot.firstChild) {
    slot.replaceChildren();
    return;
  }
  const input = el('input', { type: 'text', name: 'label', required: true, placeholder: 'a label: letters, digits, _ : . -', attrs: { 'aria-label': 'Label', autocomplete: 'off' } });
  const ok = el('button', { type: 'submit', className: 'small', textContent: 'Add label' });
  const form = el('form', { className: 'label-form' }, [input, ok, el('button', { type: 'button', className: 'small quiet', textContent: 'Cancel', onclick: () => slot.replaceChildren() })]);
  // Labels are lower case ([a-z0-9][a-z0-9_:.-]*): "Urgent" is the label urgent.
  form.addEventListener(
    'submit',
    busy(ok, () => add(input.value.trim().toLowerCase())),
  );
  slot.replaceChildren(form);
  input.focus();
}

/** PATCH of labels (a conversation or a message), then the conversation and the list as they are now. */
async function relabel(path: string, change: { addLabels?: string[]; removeLabels?: string[] }, done: string): Promise<void> {
  await api('PATCH', path, change);
  notify(done);
  if (state.thread) await openThread(state.thread.id);
  await refreshList();
}

/** e: archive the open conversation (back to the list), or move an archived one back. */
async function archiveThread(t: Thread): Promise<void> {
  const archived = t.labels.includes(ARCHIVED);
  await api('PATCH', `/threads/${enc(t.id)}`, archived ? { removeLabels: [ARCHIVED] } : { addLabels: [ARCHIVED] });
  notify(`${archived ? 'Moved to the inbox: \u201c' : 'Archived \u201c'}${t.subject || '(no subject)'}\u201d.`);
  location.hash = `#mail/${enc(state.mailbox)}`;
  await refreshList();
}

/** Conversations per page of the list (the API answers at most 100 a page). */
const PAGE = 50;

/** "1–50 of 57 conversations", or "57 conversations" when they fit on one page. */
function pageHint(offset: number, shown: number, total: number): string {
  const noun = total === 1 ? ' conversation' : ' conversations';
  if (offset === 0 && shown >= total) return total + noun;
  return `${shown ? `${offset + 1}\u2013${offset + shown}` : '0'} of ${total}${noun}`;
}

/** Newer / Older: the previous and next page of conversations (the API's limit and offset). */
function pager(offset: number, shown: number, total: number): HTMLElement | null {
  if (offset === 0 && shown >= total) return null;
  const go = (to: number) => () => {
    state.offset = to;
    void route(true);
  };
  return el('div', { className: 'toolbar pager' }, [
    el('button', { type: 'button', className: 'small quiet', textContent: '\u2190 Newer', disabled: offset === 0, onclick: go(Math.max(0, offset - PAGE)) }),
    el('button', { type: 'button', className: 'small quiet', textContent: 'Older \u2192', disabled: offset + shown >= total, onclick: go(offset + PAGE) }),
  ]);
}

/** Who a conversation is with, from the newest message of it on the page. */
function participant(m: Message): string {
  if (m.direction === 'inbound') return m.fromName || m.fromAddress;
  return `To: ${(m.toAddresses || []).join(', ')}`;
}

const kbd = (key: string) => el('kbd', { textContent: key });

export async function viewMail(view: HTMLElement, mailbox: string, threadId: string): Promise<void> {
  if (!state.inboxes.length) await loadInboxes();
  await loadUnread();
  state.mailbox = mailbox;
  if (state.listKey !== `${mailbox}\n${state.query}`) {
    state.listKey = `${mailbox}\n${state.query}`;
    state.offset = 0;
  }
  const search = el('input', { id: 'q', type: 'search', name: 'q', value: state.query, placeholder: 'Search: words, from:, subject:, has:attachment, is:unread', attrs: { 'aria-label': 'Search' } });
  const form = el('form', { className: 'search', id: 'search', attrs: { role: 'search' } }, [search, el('button', { type: 'submit', textContent: 'Search' })]);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.query = search.value.trim();
    void route(true);
  });
  const heading = state.query ? `Results for \u201c${state.query}\u201d` : mailbox === 'all' ? 'All inboxes' : mailbox === ARCHIVE_BOX ? 'Archive' : inboxLabel(inboxOf(mailbox)) || mailbox;
  const mail = el('div', { className: 'mail', id: 'mail' }, [
    el('nav', { className: 'mailboxes', id: 'mailboxes', attrs: { 'aria-label': 'Inboxes' } }),
    el('div', { className: 'list-pane' }, [
      el('div', { className: 'toolbar' }, [form]),
      el('div', { className: 'toolbar' }, [el('h2', { textContent: heading }), el('span', { className: 'spacer' }), el('span', { className: 'hint', id: 'threads-count' })]),
      el('div', { id: 'threads-body' }),
      el('p', { className: 'hint' }, [
        'Keys: ',
        kbd('j'),
        ' ',
        kbd('k'),
        ' move, ',
        kbd('r'),
        ' reply, ',
        kbd('e'),
        ' archive, ',
        kbd('l'),
        ' label, ',
        kbd('/'),
        ' search, ',
        kbd('c'),
        ' compose, ',
        kbd('?'),
        ' help',
      ]),
    ]),
    el('section', { className: 'thread-pane', id: 'thread' }),
  ]);
  await loadList(mail);
  view.append(mail);
  renderMailboxes();
  if (state.focusSearch) {
    state.focusSearch = false;
    search.focus();
  }
  if (threadId === 'new') showCompose();
  else await openThread(threadId);
}

/**
 * Fills the list of conversations (one page) of the shown mailbox and search: on opening the
 * view, and again when a live event brings new mail (the search box and the open
 * conversation stay as they are).
 */
export async function loadList(root: ParentNode = document): Promise<void> {
  const mailbox = state.mailbox;
  const scope = mailbox === 'all' || mailbox === ARCHIVE_BOX ? '' : `/inboxes/${enc(mailbox)}`;
  // The newest messages need no search unless one is typed (the account's searches at once are few).
  const filter = listFilter(mailbox);
  const newestFilter = state.query || mailbox === ARCHIVE_BOX ? filter : '';
  const offset = state.offset;
  let pages: [Page<Thread>, Page<Message>];
  let refused: ApiError | null = null;
  try {
    pages = await Promise.all([api<Page<Thread>>('GET', `${scope}/threads?limit=${PAGE}&offset=${offset}${filter}`), api<Page<Message>>('GET', `${scope}/messages?limit=100${newestFilter}`)]);
  } catch (err) {
    // A query the API cannot read: say why under the search box, which stays for a better one.
    if (!(err instanceof ApiError && err.code === 'INVALID_QUERY')) throw err;
    refused = err;
    pages = [
      { data: [], total: 0 },
      { data: [], total: 0 },
    ];
    failed(err);
  }
  const newest: Record<string, Message> = {};
  for (const m of pages[1].data) newest[m.threadId] ??= m;
  // Conversations further down (an older page) may have no message on that first page: their
  // newest message comes from the conversation itself, its last page of one.
  await Promise.all(
    pages[0].data
      .filter((t) => !newest[t.id])
      .map((t) => api<Thread>('GET', `/threads/${enc(t.id)}?limit=1&offset=${Math.max(0, t.messageCount - 1)}`).then((full) => (newest[t.id] = full.messages[0]))),
  );
  // The view may have changed while the answers came (a live refresh racing a click).
  const body = root.querySelector<HTMLElement>('#threads-body');
  if (!body || state.mailbox !== mailbox) return;
  const selected = state.thread ? state.thread.id : '';
  const list = el(
    'ul',
    { className: 'threads', id: 'threads' },
    pages[0].data.map((t) => {
      const m = newest[t.id];
      const where = (mailbox === 'all' || mailbox === ARCHIVE_BOX) && inboxOf(t.inboxId) ? `${inboxOf(t.inboxId)!.address} \u00b7 ` : '';
      return el('li', { className: `thread-row${t.unreadCount ? ' unread' : ''}${t.id === selected ? ' selected' : ''}`, dataset: { id: t.id } }, [
        el('a', { href: `#mail/${enc(mailbox)}/${enc(t.id)}` }, [
          el('div', { className: 'line' }, [el('span', { className: 'from', textContent: m ? participant(m) : '' }), el('span', { className: 'when', textContent: shortWhen(t.lastMessageAt) })]),
          el('div', { className: 'line' }, [
            el('span', { className: 'subject', textContent: t.subject || '(no subject)' }),
            labelChips(t.labels),
            m ? screeningBadge(m, false) : null,
            t.messageCount > 1 ? el('span', { className: 'count', textContent: String(t.messageCount) }) : null,
          ]),
          el('div', { className: 'snippet', textContent: where + (m ? (m.bodyText || '').replace(/\s+/g, ' ').slice(0, 140) : '') }),
        ]),
      ]);
    }),
  );
  root.querySelector('#threads-count')!.textContent = pageHint(offset, pages[0].data.length, pages[0].total);
  const empty = refused ? refused.message : state.query ? 'Nothing matches.' : mailbox === ARCHIVE_BOX ? 'Nothing archived.' : 'No mail yet.';
  body.replaceChildren();
  put(body, [pages[0].data.length ? list : el('p', { className: refused ? 'error' : 'empty', textContent: empty }), pager(offset, pages[0].data.length, pages[0].total)]);
}

/** Shows a conversation in the right pane (or the placeholder); the list stays as it is. */
export async function openThread(threadId: string): Promise<void> {
  const pane = $('thread');
  const mail = $('mail');
  document.querySelectorAll<HTMLElement>('.thread-row').forEach((r) => r.classList.toggle('selected', r.dataset.id === threadId));
  mail.classList.toggle('reading', !!threadId);
  state.thread = null;
  if (!threadId) {
    pane.replaceChildren(el('p', { className: 'empty', textContent: 'Select a conversation.' }));
    return;
  }
  const t = await api<Thread>('GET', `/threads/${enc(threadId)}`);
  state.thread = t;
  document.querySelector('.thread-row.selected')?.scrollIntoView({ block: 'nearest' });
  const labelSlot = el('div', { className: 'label-slot' });
  const archived = t.labels.includes(ARCHIVED);
  const threadPath = `/threads/${enc(t.id)}`;
  pane.replaceChildren(
    el('div', { className: 'thread-head' }, [el('a', { className: 'back', href: `#mail/${enc(state.mailbox)}`, textContent: '\u2190 Back' }), el('h1', { textContent: t.subject || '(no subject)' })]),
    el('p', { className: 'muted' }, [
      `${inboxLabel(inboxOf(t.inboxId))} \u00b7 ${t.messageCount}${t.messageCount === 1 ? ' message' : ' messages'}${archived ? ' \u00b7 archived ' : ' '}`,
      labelChips(t.labels, (l) => relabel(threadPath, { removeLabels: [l] }, `Removed the label ${l} from the conversation.`)),
    ]),
    put(el('div', { className: 'actions thread-actions' }), [
      writeButton(archived ? 'Move to inbox' : 'Archive', 'small quiet archive', () => archiveThread(t), archived ? 'Back to the inbox (e)' : 'Archive the conversation (e)'),
      writeButton(
        'Label conversation',
        'small quiet label-thread',
        () => labelForm(labelSlot, (l) => relabel(threadPath, { addLabels: [l] }, `Labelled the conversation ${l}.`)),
        'Add a label to every message of the conversation (l)',
      ),
    ]),
    labelSlot,
  );
  // Opening marks it read (below): the cards show the messages as they will be.
  const marking = t.unreadCount > 0 && may('send');
  for (const m of t.messages) {
    if (marking) m.unread = false;
    pane.append(messageCard(m));
  }
  if (t.messageCount > t.messages.length) pane.append(moreMessages(t, t.messages.length));
  pane.dataset.thread = t.id;
  if (marking) await markRead(t);
}

/** GET /threads/{id} answers a page of messages (at most 100): the next page on demand. */
function moreMessages(t: Thread, shown: number): HTMLButtonElement {
  const button = el('button', { type: 'button', className: 'small quiet more-messages', textContent: `Show ${Math.min(100, t.messageCount - shown)} more of ${t.messageCount - shown}` });
  button.addEventListener(
    'click',
    busy(button, async () => {
      const next = await api<Thread>('GET', `/threads/${enc(t.id)}?limit=100&offset=${shown}`);
      for (const m of next.messages) button.before(messageCard(m));
      shown += next.messages.length;
      if (next.messages.length && next.messageCount > shown) {
        t.messageCount = next.messageCount;
        button.replaceWith(moreMessages(t, shown));
      } else button.remove();
    }),
  );
  return button;
}

async function markRead(t: Thread): Promise<void> {
  await api('PATCH', `/threads/${enc(t.id)}`, { unread: false });
  state.unread[t.inboxId] = Math.max(0, (state.unread[t.inboxId] || 0) - t.unreadCount);
  document.querySelector(`.thread-row[data-id="${CSS.escape(t.id)}"]`)?.classList.remove('unread');
  renderMailboxes();
}

/** PATCH /messages/{id} {unread}: the button, the list row and the counts follow. */
async function toggleUnread(m: Message, button: HTMLButtonElement): Promise<void> {
  const fresh = await api<Message>('PATCH', `/messages/${enc(m.id)}`, { unread: !m.unread });
  m.unread = fresh.unread;
  button.textContent = m.unread ? 'Mark read' : 'Mark unread';
  notify(m.unread ? 'Marked unread.' : 'Marked read.');
  await refreshList();
}

/**
 * DELETE /messages/{id}, on the second click (there is no undo). The only message of a
 * conversation takes the conversation with it: back to the list.
 */
async function deleteMessage(m: Message, card: HTMLElement, button: HTMLButtonElement): Promise<void> {
  if (!button.dataset.armed) {
    button.dataset.armed = '1';
    button.textContent = 'Click again to delete';
    return;
  }
  await api('DELETE', `/messages/${enc(m.id)}`);
  card.remove();
  notify('Deleted the message.');
  if (!document.querySelector('#thread article.message')) location.hash = `#mail/${enc(state.mailbox)}`;
  await refreshList();
}

/** The last message of the open conversation (what r, u and # act on). */
export function lastMessageButton(selector: string): void {
  const cards = document.querySelectorAll('#thread article.message');
  cards[cards.length - 1]?.querySelector<HTMLButtonElement>(selector)?.click();
}

/** SPF, DKIM and DMARC as the server recorded them when the message arrived. */
function authBadges(a: Record<string, string> | null | undefined): HTMLSpanElement[] {
  return ['spf', 'dkim', 'dmarc'].map((k) => {
    const result = a?.[k] || 'none';
    return badge(`${k.toUpperCase()} ${result}`, TONE[result] ?? '', `${k.toUpperCase()} result when the message arrived: ${result}`);
  });
}

/**
 * An HTML body goes into a sandboxed frame (no scripts, an opaque origin, no forms or pop-ups)
 * through srcdoc, never into this page; the page's Content-Security-Policy applies inside it
 * too, so remote images and inline styles stay off.
 */
export function htmlFrame(html: string, title: string): HTMLIFrameElement {
  const frame = el('iframe', { className: 'html-body', title, attrs: { sandbox: '', referrerpolicy: 'no-referrer' } });
  frame.srcdoc = html;
  return frame;
}

/** The HTML body in its frame with the text body one click away, or the text alone. */
function bodyView(m: Pick<Message, 'bodyText' | 'bodyHtml'>): HTMLElement {
  const text = el('pre', { className: 'body', textContent: m.bodyText || (m.bodyHtml ? '(no text part)' : '(empty body)') });
  if (!m.bodyHtml) return text;
  const frame = htmlFrame(m.bodyHtml, 'HTML body of the message (sandboxed)');
  text.hidden = true;
  const htmlTab = el('button', { type: 'button', className: 'small on', textContent: 'HTML' });
  const textTab = el('button', { type: 'button', className: 'small', textContent: 'Text' });
  const show = (html: boolean) => {
    frame.hidden = !html;
    text.hidden = html;
    htmlTab.classList.toggle('on', html);
    textTab.classList.toggle('on', !html);
  };
  htmlTab.onclick = () => show(true);
  textTab.onclick = () => show(false);
  return el('div', { className: 'bodies' }, [el('div', { className: 'tabs' }, [htmlTab, textTab]), frame, text]);
}

/** Attachments as download links (the server answers them with Content-Disposition: attachment). */
export function attachmentList(attachments: Attachment[]): HTMLUListElement | null {
  if (!attachments.length) return null;
  return el(
    'ul',
    { className: 'attachments' },
    attachments.map((a) =>
      el('li', null, [
        el('a', { href: a.url, download: a.filename || '', rel: 'noopener noreferrer', className: 'attachment', title: a.contentType ?? '' }, [`${a.filename || a.id} (${size(a.size)})`]),
      ]),
    ),
  );
}

export function messageCard(m: Message): HTMLElement {
  const inbound = m.direction === 'inbound';
  const card = el('article', { className: `message ${m.direction}`, dataset: { id: m.id } });
  const sender: Child[] = inbound
    ? [el('b', { textContent: m.fromName || m.fromAddress }), m.fromName ? el('span', { className: 'mono', textContent: `<${m.fromAddress}>` }) : null]
    : [el('b', { textContent: `Sent from ${m.fromAddress}` })];
  const to =
    `To: ${(m.toAddresses || []).join(', ')}` +
    ((m.ccAddresses || []).length ? ` \u00b7 Cc: ${m.ccAddresses.join(', ')}` : '') +
    ((m.bccAddresses || []).length ? ` \u00b7 Bcc: ${m.bccAddresses!.join(', ')}` : '');
  const badges = inbound
    ? [screeningBadge(m), ...authBadges(m.authentication as Record<string, string> | null)]
    : [badge(m.status), m.delivery === 'dry-run' ? badge('dry-run', 'warn', 'outbound.mode = "dry-run": nothing left the machine') : null];
  const recipients =
    !inbound && (m.recipients || []).length
      ? table(
          ['Recipient', 'Status', 'Last answer'],
          m.recipients!.map((r) => el('tr', null, [td(r.address, 'mono addr'), el('td', null, [badge(r.status)]), td(r.response || '', 'mono')])),
          '',
        )
      : null;
  const composer = el('div', { className: 'composer-slot' });
  const labelSlot = el('div', { className: 'label-slot' });
  const messagePath = `/messages/${enc(m.id)}`;
  let body = bodyView(m);
  // A list cuts long bodies (bodyTruncated): the whole message is one click away.
  const whole = m.bodyTruncated ? el('button', { type: 'button', className: 'small quiet whole-body', textContent: `Show the whole message (${size(m.size)})` }) : null;
  whole?.addEventListener(
    'click',
    busy(whole, async () => {
      Object.assign(m, await api<Message>('GET', messagePath));
      const full = bodyView(m);
      body.replaceWith(full);
      body = full;
      whole.remove();
    }),
  );
  put(card, [
    el('header', null, [el('div', { className: 'sender' }, sender), el('span', { className: 'when muted', textContent: when(m.createdAt) })]),
    el('div', { className: 'to', textContent: to }),
    el('div', { className: 'badges' }, badges),
    m.screening?.verdict === 'review' ? reasonList(m.screening.reasons, 'reasons screening') : null,
    labelChips(m.labels, (l) => relabel(messagePath, { removeLabels: [l] }, `Removed the label ${l} from the message.`)),
    body,
    whole,
    attachmentList(m.attachments || []),
    recipients,
    put(el('div', { className: 'actions' }), [
      writeButton('Reply', 'small reply', () => openComposer(composer, 'reply', m)),
      writeButton('Reply all', 'small quiet reply-all', () => openComposer(composer, 'reply-all', m)),
      writeButton('Forward', 'small quiet forward', () => openComposer(composer, 'forward', m)),
      writeButton(m.unread ? 'Mark read' : 'Mark unread', 'small quiet mark', (b) => toggleUnread(m, b), 'Mark read or unread (u)'),
      writeButton(
        'Label message',
        'small quiet label-message',
        () => labelForm(labelSlot, (l) => relabel(messagePath, { addLabels: [l] }, `Labelled the message ${l}.`)),
        'Add a label to this message',
      ),
      writeButton('Delete', 'small danger delete', (b) => deleteMessage(m, card, b), 'Delete this message (#, twice)', 'manage'),
    ]),
    labelSlot,
    composer,
  ]);
  return card;
}
