// The dashboard's guard rails for a person (PRODUCT.md "Guarding agents"): the Held view
// (inbound mail screening held: its reasons, the offending words marked in the text, Release and
// Delete), the Approvals view (sends the outbound policy held: the whole of what would go out,
// Approve and Cancel), the suppression list and the audit log; and the screening verdict as a
// badge wherever a message shows. Routes: #held, #approvals, #suppressions, #audit. Message
// content is a stranger's: text goes in with textContent, HTML only into the sandboxed frame.
import { api, ApiError, armed, badge, busy, el, enc, failed, field, may, notify, put, state, table, td, when, writeButton } from './core.ts';
import { attachmentList, htmlFrame, inboxLabel, inboxOf, loadInboxes } from './mail.ts';
import { route } from './shell.ts';
import type { AuditEntry, Message, Page, Suppression } from './types.ts';

type Reason = { code: string; detail: string };

const reasonText = (reasons: Reason[]) => reasons.map((r) => `${r.code}: ${r.detail}`).join('\n');

/** The screener's verdict ("Review" or "Clear"), its reasons as the tooltip; nothing for mail not screened. */
export function screeningBadge(m: Pick<Message, 'screening'>, clearToo = true): HTMLSpanElement | null {
  const s = m.screening;
  if (!s || (s.verdict === 'clear' && !clearToo)) return null;
  if (s.verdict === 'clear') return badge('Clear', 'ok', 'Screening found nothing to review');
  return badge('Review', 'bad', `Screening (score ${s.score}) asks a person to look:\n${reasonText(s.reasons)}`);
}

/** The reasons, one a line: the code and what was found. */
export function reasonList(reasons: Reason[], className = 'reasons'): HTMLUListElement | null {
  if (!reasons.length) return null;
  return el(
    'ul',
    { className },
    reasons.map((r) => el('li', null, [el('code', { textContent: r.code }), ' ', el('span', { textContent: r.detail })])),
  );
}

/** Words of a detail worth finding in the text: what it quotes (“…”, cut parts split on …) and the hosts it names. */
function spansOf(reasons: Reason[]): string[] {
  const found = new Set<string>();
  for (const r of reasons) {
    for (const q of r.detail.matchAll(/\u201c([^\u201d]+)\u201d?/g)) for (const part of q[1].split('\u2026')) if (part.trim().length >= 3) found.add(part.trim());
    // "a lookalike of <own domain>": the own domain is not what offends.
    const named = r.detail.split(/\ba lookalike of\b/)[0];
    for (const h of named.matchAll(/\b(?:[a-z0-9-]+\.)+(?:xn--[a-z0-9-]+|[a-z]{2,})\b/gi)) found.add(h[0]);
  }
  // Longest first: a phrase wins over a host inside it. At most a few dozen (a regular expression each).
  return [...found].sort((a, b) => b.length - a.length).slice(0, 40);
}

/**
 * The text with what the reasons name marked (<mark>), built from text nodes only. Whitespace
 * is matched loosely (the screener collapses it) and case is ignored.
 */
export function highlighted(text: string, reasons: Reason[]): HTMLPreElement {
  const pre = el('pre', { className: 'body marked' });
  const spans = spansOf(reasons);
  if (!spans.length) {
    pre.textContent = text;
    return pre;
  }
  const pattern = new RegExp(spans.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\s+/g, '\\s+')).join('|'), 'gi');
  let at = 0;
  for (const m of text.matchAll(pattern)) {
    if (!m[0]) continue;
    pre.append(text.slice(at, m.index), el('mark', { textContent: m[0], title: 'Named by a screening reason' }));
    at = m.index + m[0].length;
  }
  pre.append(text.slice(at));
  return pre;
}

/** How many wait in Held and in Approvals, on the navigation (a key with review only: it alone reads held mail). */
export async function countWaiting(): Promise<void> {
  if (!may('review')) return;
  const [inbound, outbound] = await Promise.all(['inbound', 'outbound'].map((d) => api<Page<Message>>('GET', `/messages?status=held&direction=${d}&limit=1`).then((p) => p.total)));
  showWaiting('held-count', inbound);
  showWaiting('approvals-count', outbound);
}
function showWaiting(id: string, n: number): void {
  const badge = document.getElementById(id);
  if (badge) {
    badge.textContent = n ? String(n) : '';
    badge.title = `${n} waiting for a person`;
  }
}

/** The text of a view of held messages: its title, what it is, and what it says when empty or refused. */
interface HeldList {
  /** The navigation's count of them. */
  countId: string;
  title: string;
  about: string;
  direction: 'inbound' | 'outbound';
  empty: string;
  refused: string;
  card: (m: Message) => HTMLElement;
}

/**
 * Held messages of one direction, whole (a list cuts long bodies; a person approves what is
 * sent, not the start of it). A key without review is told so, not shown an error.
 */
async function heldView(view: HTMLElement, v: HeldList): Promise<void> {
  if (!state.inboxes.length) await loadInboxes();
  view.append(el('h1', { textContent: v.title }), el('p', { className: 'muted', textContent: v.about }));
  let list: Message[];
  try {
    const page = await api<Page<Message>>('GET', `/messages?status=held&direction=${v.direction}&limit=100`);
    list = page.data;
    showWaiting(v.countId, page.total);
  } catch (err) {
    if (!(err instanceof ApiError) || err.code !== 'INSUFFICIENT_SCOPE') throw err;
    view.append(el('p', { className: 'empty', textContent: v.refused }));
    return;
  }
  if (!list.length) view.append(el('p', { className: 'empty', textContent: v.empty }));
  const whole = await Promise.all(list.map((m) => (m.bodyTruncated ? api<Message>('GET', `/messages/${enc(m.id)}`) : Promise.resolve(m))));
  for (const m of whole) view.append(v.card(m));
}

// ---- Held: inbound mail screening held ----------------------------------------------------

export const viewHeld = (view: HTMLElement) =>
  heldView(view, {
    countId: 'held-count',
    title: 'Held',
    about: 'Mail that screening held in inboxes set to hold: no agent has seen it. Release hands it to the agent as if it had just arrived; Delete removes it.',
    direction: 'inbound',
    empty: 'Nothing held.',
    refused: 'Held mail needs a key with the review scope.',
    card: heldCard,
  });

/** What is left of a card once acted on: a line saying so, with a link to the conversation when it goes on. */
function acted(card: HTMLElement, said: string, open?: Message): void {
  countWaiting().catch(failed);
  card.replaceWith(
    el('p', { className: 'muted gone' }, [said, open ? ' ' : '', open ? el('a', { href: `#mail/${enc(open.inboxId)}/${enc(open.threadId)}`, textContent: 'Open the conversation' }) : '']),
  );
}

const subjectOf = (m: Message) => `\u201c${m.subject || '(no subject)'}\u201d`;

function heldCard(m: Message): HTMLElement {
  const card = el('article', { className: 'card held', dataset: { id: m.id } });
  const reasons = m.screening?.reasons ?? [];
  const release = writeButton(
    'Release',
    'release',
    async () => {
      const out = await api<Message>('POST', `/messages/${enc(m.id)}/release`);
      notify(`Released ${subjectOf(out)} to ${inboxOf(out.inboxId)?.address ?? 'its inbox'}.`);
      acted(card, `Released ${subjectOf(out)}.`, out);
    },
    undefined,
    'review',
  );
  const remove = writeButton(
    'Delete',
    'danger delete',
    async (b) => {
      if (!armed(b, 'Click again to delete')) return;
      await api('DELETE', `/messages/${enc(m.id)}`);
      notify('Deleted the held message.');
      acted(card, `Deleted ${subjectOf(m)}.`);
    },
    undefined,
    'manage',
  );
  put(card, [
    el('h2', { textContent: m.subject || '(no subject)' }),
    meta([
      ['From', m.fromName ? `${m.fromName} <${m.fromAddress}>` : m.fromAddress],
      ['To', inboxLabel(inboxOf(m.inboxId)) || m.toAddresses.join(', ')],
      ['Received', when(m.createdAt)],
    ]),
    el('div', { className: 'badges' }, [screeningBadge(m), m.screening ? el('span', { className: 'muted', textContent: `score ${m.screening.score}` }) : null]),
    el('h3', { textContent: 'Why it was held' }),
    reasonList(reasons) ?? el('p', { className: 'muted', textContent: 'No reason recorded.' }),
    el('h3', { textContent: 'Text, with what the reasons name marked' }),
    highlighted(m.bodyText || (m.bodyHtml ? '(no text part)' : '(empty body)'), reasons),
    m.bodyHtml ? el('h3', { textContent: 'HTML part (sandboxed: no scripts, no remote content)' }) : null,
    m.bodyHtml ? htmlFrame(m.bodyHtml, 'HTML part of the held message (sandboxed)') : null,
    attachmentList(m.attachments || []),
    put(el('div', { className: 'actions' }), [release, remove]),
  ]);
  return card;
}

function meta(pairs: Array<[string, string]>): HTMLElement {
  return el(
    'dl',
    { className: 'meta' },
    pairs.filter((p) => p[1]).flatMap((p) => [el('dt', { textContent: p[0] }), el('dd', { textContent: p[1] })]),
  );
}

// ---- Approvals: sends held for a person ---------------------------------------------------

export const viewApprovals = (view: HTMLElement) =>
  heldView(view, {
    countId: 'approvals-count',
    title: 'Approvals',
    about: 'Sends the outbound policy held for a person. Each shows all that would go out: every recipient, both parts, the attachments. Approve sends it as shown; Cancel drops it.',
    direction: 'outbound',
    empty: 'No sends waiting for approval.',
    refused: 'Held sends need a key with the review scope.',
    card: approvalCard,
  });

function approvalCard(m: Message): HTMLElement {
  const card = el('article', { className: 'card approval', dataset: { id: m.id } });
  const approve = writeButton(
    'Approve',
    'approve',
    async () => {
      const out = await api<Message>('POST', `/messages/${enc(m.id)}/release`);
      notify(`Approved ${subjectOf(out)}: ${out.status}.`);
      acted(card, `Approved ${subjectOf(out)} (${out.status}).`, out);
    },
    undefined,
    'review',
  );
  const cancel = writeButton('Cancel', 'danger cancel', async (b) => {
    if (!armed(b, 'Click again to cancel the send')) return;
    await api('POST', `/messages/${enc(m.id)}/cancel`);
    notify(`Canceled ${subjectOf(m)}: it will not be sent.`);
    acted(card, `Canceled ${subjectOf(m)}.`);
  });
  const list = (v: string[] | undefined) => (v ?? []).join(', ');
  put(card, [
    el('h2', { textContent: m.subject || '(no subject)' }),
    meta([
      ['From', inboxLabel(inboxOf(m.inboxId)) || m.fromAddress],
      ['To', list(m.toAddresses)],
      ['Cc', list(m.ccAddresses)],
      ['Bcc', list(m.bccAddresses)],
      ['Made', when(m.createdAt)],
    ]),
    el('h3', { textContent: 'Why it was held' }),
    reasonList(m.hold?.reasons ?? []) ?? el('p', { className: 'muted', textContent: 'No reason recorded.' }),
    el('h3', { textContent: 'Text part' }),
    el('pre', { className: 'body text-part', textContent: m.bodyText || '(none)' }),
    el('h3', { textContent: 'HTML part' }),
    m.bodyHtml ? htmlFrame(m.bodyHtml, 'HTML part of the held send (sandboxed)') : el('p', { className: 'muted', textContent: '(none)' }),
    el('h3', { textContent: 'Attachments' }),
    attachmentList(m.attachments || []) ?? el('p', { className: 'muted', textContent: '(none)' }),
    put(el('div', { className: 'actions' }), [approve, cancel]),
  ]);
  return card;
}

// ---- Suppressions -------------------------------------------------------------------------

export async function viewSuppressions(view: HTMLElement, filter: { address: string }): Promise<void> {
  const page = await api<Page<Suppression>>('GET', `/suppressions?limit=100${filter.address ? `&address=${enc(filter.address)}` : ''}`);
  const find = el('input', { type: 'search', name: 'address', value: filter.address, placeholder: 'an address', attrs: { 'aria-label': 'Find an address' } });
  const finder = el('form', { className: 'search' }, [find, el('button', { type: 'submit', textContent: 'Find' })]);
  finder.addEventListener('submit', (ev) => {
    ev.preventDefault();
    filter.address = find.value.trim();
    void route(true);
  });
  const address = field('Address', 'input', { type: 'email', name: 'suppress', required: true, placeholder: 'someone@example.net' });
  const add = el('button', { type: 'submit', textContent: 'Suppress' });
  const form = !may('manage') ? null : el('form', { className: 'card create' }, [el('h2', { textContent: 'Suppress an address' }), address, el('div', { className: 'actions' }, [add])]);
  form?.addEventListener(
    'submit',
    busy(add, async () => {
      const s = await api<Suppression>('POST', '/suppressions', { address: address.input.value.trim() });
      notify(`Suppressed ${s.address}: no send attempts it.`);
      await route(true);
    }),
  );
  put(view, [
    el('h1', { textContent: 'Suppressions' }),
    el('p', { className: 'muted', textContent: 'Addresses no send attempts: added by hard bounces, complaints, one-click unsubscribes, or by hand. Removing one needs a key with the review scope.' }),
    el('div', { className: 'toolbar' }, [finder, el('span', { className: 'hint', textContent: `${page.total} suppressed` })]),
    table(
      ['Address', 'Reason', 'Since', 'Message', ''],
      page.data.map((s) =>
        el('tr', { className: 'suppression-row', dataset: { address: s.address } }, [
          td(s.address, 'mono addr'),
          el('td', null, [badge(s.reason, s.reason === 'manual' ? '' : 'bad')]),
          td(when(s.createdAt), 'when'),
          td(s.messageId ?? '', 'mono'),
          el('td', null, [
            writeButton(
              'Remove',
              'small danger remove',
              async (b) => {
                if (!armed(b, 'Click again to remove')) return;
                await api('DELETE', `/suppressions/${enc(s.address)}`);
                notify(`${s.address} may be sent to again.`);
                await route(true);
              },
              `Lift the suppression of ${s.address}`,
              'review',
            ),
          ]),
        ]),
      ),
      filter.address ? 'That address is not suppressed.' : 'No address is suppressed.',
    ),
    page.total > page.data.length ? el('p', { className: 'muted', textContent: `Showing the ${page.data.length} most recent of ${page.total}; find one by its address.` }) : null,
    form,
  ]);
}

// ---- Audit log ----------------------------------------------------------------------------

/** The actions PRODUCT.md names ("Audit"), for the filter. */
const ACTIONS = [
  'message.held',
  'message.released',
  'message.canceled',
  'suppression.added',
  'suppression.removed',
  'key.created',
  'key.revoked',
  'list.added',
  'list.removed',
  'inbox.updated',
  'inbox.suspended',
];
const AUDIT_PAGE = 100;

export async function viewAudit(view: HTMLElement, filter: { action: string }): Promise<void> {
  view.append(el('h1', { textContent: 'Audit log' }));
  let first: AuditEntry[];
  const path = (after?: string) => `/audit?limit=${AUDIT_PAGE}${filter.action ? `&action=${enc(filter.action)}` : ''}${after ? `&after=${enc(after)}` : ''}`;
  try {
    first = (await api<{ data: AuditEntry[] }>('GET', path())).data;
  } catch (err) {
    if (!(err instanceof ApiError) || err.code !== 'INSUFFICIENT_SCOPE') throw err;
    view.append(el('p', { className: 'empty', textContent: 'The audit log needs a key with the review scope.' }));
    return;
  }
  const pick: HTMLSelectElement = el(
    'select',
    {
      id: 'audit-action',
      attrs: { 'aria-label': 'Action' },
      onchange: () => {
        filter.action = pick.value;
        void route(true);
      },
    },
    ['', ...ACTIONS].map((a) => el('option', { value: a, textContent: a || 'all actions', selected: a === filter.action })),
  );
  const row = (e: AuditEntry) =>
    el('tr', { className: 'audit-row', dataset: { id: e.id, action: e.action } }, [
      td(when(e.createdAt), 'when'),
      td(e.actor.id ? `${e.actor.type} ${e.actor.id}` : e.actor.type, 'mono'),
      td(e.action),
      td(e.target, 'mono'),
      td(Object.keys(e.detail ?? {}).length ? JSON.stringify(e.detail) : '', 'mono long'),
    ]);
  const shown = table(['When', 'Actor', 'Action', 'Target', 'Detail'], first.map(row), filter.action ? `No ${filter.action} entries.` : 'The audit log is empty.');
  const older = first.length === AUDIT_PAGE ? el('button', { type: 'button', className: 'small quiet', textContent: 'Older entries' }) : null;
  let last = first.at(-1)?.id;
  older?.addEventListener(
    'click',
    busy(older, async () => {
      const next = (await api<{ data: AuditEntry[] }>('GET', path(last))).data;
      shown.querySelector('tbody')?.append(...next.map(row));
      last = next.at(-1)?.id ?? last;
      if (next.length < AUDIT_PAGE) older.remove();
    }),
  );
  put(view, [
    el('div', { className: 'toolbar' }, [
      el('span', { className: 'muted', textContent: 'Newest first. Who did what: a key (its id), the CLI, mailroom itself.' }),
      el('span', { className: 'spacer' }),
      pick,
    ]),
    shown,
    older,
  ]);
}
