// The dashboard's frame and the script's entry: signing in and out, routing between views by
// the URL's hash, keyboard shortcuts and their help, start-up.
import { viewDomains, viewInboxes, viewKeys, viewWebhooks } from './admin.ts';
import { replyToOpen, showCompose } from './compose.ts';
import { $, ApiError, api, clearNotice, el, failed, notice, STORE, state } from './core.ts';
import { viewDrafts } from './drafts.ts';
import { countWaiting, viewApprovals, viewAudit, viewHeld, viewSuppressions } from './guard.ts';
import { live, startLive, stopLive } from './live.ts';
import { lastMessageButton, openThread, viewMail } from './mail.ts';
import type { ApiKey, Page } from './types.ts';

/** What the header shows only to a signed-in key. */
const SIGNED_IN = ['nav', 'signout', 'help-toggle'];

function showSignin(message?: string): void {
  $('signin').hidden = false;
  $('view').replaceChildren();
  for (const id of [...SIGNED_IN, 'help']) $(id).hidden = true;
  for (const id of ['who', 'held-count', 'approvals-count']) $(id).textContent = '';
  const e = $('signin-error');
  e.textContent = message ?? '';
  e.hidden = !message;
  $('key').focus();
}

export function signOut(message?: string): void {
  sessionStorage.removeItem(STORE);
  stopLive();
  state.inboxes = [];
  state.query = '';
  showSignin(message);
}

/** Checks the key against the API; learns whether it may write. */
async function signIn(key: string): Promise<boolean> {
  sessionStorage.setItem(STORE, key);
  try {
    const keys = await api<Page<ApiKey>>('GET', '/account/api-keys');
    const mine = (keys.data || []).find((k) => key.startsWith(k.keyPrefix));
    state.readOnly = !!mine?.readOnly;
    // A key not in the list it may read (none should be): every action offered, the server decides.
    state.scopes = mine?.scopes ?? ['read', 'send', 'manage', 'review'];
    $('who').textContent = mine ? `key ${mine.name || mine.keyPrefix}${mine.readOnly ? ' (read-only)' : ''}` : '';
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      signOut(`That key was refused: ${err.message}`);
      return false;
    }
    throw err;
  }
  $('signin').hidden = true;
  for (const id of SIGNED_IN) $(id).hidden = false;
  if (!live.abort) void startLive();
  countWaiting().catch(failed);
  return true;
}

// ---- routing ---------------------------------------------------------------------------

const webhookFilter = { status: '' };
const suppressionFilter = { address: '' };
const auditFilter = { action: '' };
let shown = { name: '', mailbox: '', query: '' };

function parseHash(): { name: string; mailbox: string; thread: string } {
  let parts = location.hash
    .replace(/^#/, '')
    .split('/')
    .map((p) => decodeURIComponent(p));
  let name = parts[0] || 'mail';
  // Old links (#messages/<inbox>) open the mail client.
  if (name === 'messages') {
    name = 'mail';
    parts = ['mail', parts[1] || 'all'];
  }
  return { name, mailbox: parts[1] || 'all', thread: parts[2] || '' };
}

/**
 * Shows the view the hash names. Within the mail view, moving between conversations of the
 * same list only swaps the conversation (j/k stay quick); force renders everything again.
 */
export async function route(force?: boolean): Promise<void> {
  if (!sessionStorage.getItem(STORE)) {
    showSignin();
    return;
  }
  const at = parseHash();
  // A notice from the action that led here stays; an older one goes with the view it was about.
  if (force !== true && Date.now() - notice.at > 1500) clearNotice();
  try {
    if (force !== true && at.name === 'mail' && shown.name === 'mail' && shown.mailbox === at.mailbox && shown.query === state.query && document.getElementById('thread')) {
      if (at.thread === 'new') showCompose();
      else await openThread(at.thread);
      return;
    }
  } catch (err) {
    failed(err);
    return;
  }
  document.querySelectorAll<HTMLElement>('nav#nav a').forEach((a) => a.classList.toggle('active', a.dataset.view === at.name));
  const view = el('section', { id: 'view', className: `view-${at.name}` });
  $('view').replaceWith(view);
  shown = { name: at.name, mailbox: at.mailbox, query: state.query };
  try {
    if (at.name === 'drafts') await viewDrafts(view);
    else if (at.name === 'inboxes') await viewInboxes(view);
    else if (at.name === 'webhooks') await viewWebhooks(view, webhookFilter);
    else if (at.name === 'domains') await viewDomains(view);
    else if (at.name === 'keys') await viewKeys(view);
    else if (at.name === 'held') await viewHeld(view);
    else if (at.name === 'approvals') await viewApprovals(view);
    else if (at.name === 'suppressions') await viewSuppressions(view, suppressionFilter);
    else if (at.name === 'audit') await viewAudit(view, auditFilter);
    else await viewMail(view, at.mailbox, at.thread);
    view.dataset.loaded = 'true';
  } catch (err) {
    failed(err);
  }
}

// ---- keyboard --------------------------------------------------------------------------

function toggleHelp(show?: boolean): void {
  const help = $('help');
  help.hidden = show === undefined ? !help.hidden : !show;
}

/** j/k: the next or previous conversation of the list. */
function moveThread(step: number): void {
  const rows = Array.from(document.querySelectorAll('.thread-row'));
  if (!rows.length) return;
  const at = rows.findIndex((r) => r.classList.contains('selected'));
  const next = rows[at === -1 ? (step > 0 ? 0 : rows.length - 1) : Math.min(rows.length - 1, Math.max(0, at + step))];
  location.hash = next.querySelector('a')!.getAttribute('href')!;
}

function focusSearch(): void {
  const q = document.getElementById('q') as HTMLInputElement | null;
  if (q) {
    q.focus();
    q.select();
    return;
  }
  state.focusSearch = true;
  location.hash = '#mail';
}

/** A button of the open conversation's head (e archives, l labels). */
function threadButton(selector: string): void {
  document.querySelector<HTMLButtonElement>(`#thread .thread-actions ${selector}`)?.click();
}

const SHORTCUTS: Record<string, () => void> = {
  j: () => moveThread(1),
  k: () => moveThread(-1),
  r: replyToOpen,
  u: () => lastMessageButton('button.mark'),
  '#': () => lastMessageButton('button.delete'),
  e: () => threadButton('button.archive'),
  l: () => threadButton('button.label-thread'),
  '/': focusSearch,
  c: () => {
    if (document.getElementById('thread')) showCompose();
    else location.hash = '#mail/all/new';
  },
  '?': () => toggleHelp(),
};

function onKey(ev: KeyboardEvent): void {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || !sessionStorage.getItem(STORE)) return;
  const t = ev.target as HTMLElement | null;
  const typing = !!t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
  if (ev.key === 'Escape') {
    toggleHelp(false);
    if (typing) t.blur();
    return;
  }
  if (typing || !SHORTCUTS[ev.key]) return;
  ev.preventDefault();
  SHORTCUTS[ev.key]();
}

// ---- start -----------------------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = $('key') as HTMLInputElement;
    const key = input.value.trim();
    if (!key) return;
    signIn(key)
      .then((ok) => {
        if (!ok) return;
        input.value = '';
        return route(true);
      })
      .catch(failed);
  });
  $('signout').addEventListener('click', () => signOut());
  $('help-toggle').addEventListener('click', () => toggleHelp());
  $('notice-close').addEventListener('click', clearNotice);
  document.addEventListener('keydown', onKey);
  window.addEventListener('hashchange', () => void route());
  const key = sessionStorage.getItem(STORE);
  if (!key) {
    showSignin();
    return;
  }
  signIn(key)
    .then((ok) => (ok ? route(true) : undefined))
    .catch(failed);
});
