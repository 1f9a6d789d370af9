// The dashboard script's foundation: building elements, calling the API with the signed-in key,
// notices, badges, tables and form fields. Every value from the server is put in the page with
// textContent, never as HTML: subjects, names and bodies come from strangers on the internet.
import { signOut } from './shell.ts';
import type { Attachment, Inbox, Thread, Webhook } from './types.ts';

export const STORE = 'mailroom.apiKey';

/** What the views share: the inboxes, unread counts per inbox, the key's rights, the open conversation. */
export const state = {
  inboxes: [] as Inbox[],
  unread: {} as Record<string, number>,
  readOnly: false,
  /** The signed-in key's scopes (read, send, manage, review): a view offers only what the key may do. */
  scopes: [] as string[],
  webhooks: [] as Webhook[],
  query: '',
  thread: null as Thread | null,
  mailbox: '',
  focusSearch: false,
  offset: 0,
  listKey: '',
};

export function $(id: string): HTMLElement {
  return document.getElementById(id)!;
}
export const enc = encodeURIComponent;

export type Child = Node | string | number | null | undefined | false;
/** Element properties, on* listeners, dataset and attrs (attributes). */
export type Props = { [key: string]: unknown; dataset?: Record<string, string>; attrs?: Record<string, string> };

/** el('td', {className: 'num'}, ['text', child]); on* props become listeners, attrs sets attributes. */
export function el<K extends keyof HTMLElementTagNameMap>(tag: K, props?: Props | null, children?: Child[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props ?? {})) {
    if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k === 'attrs') for (const [a, value] of Object.entries(v as Record<string, string>)) node.setAttribute(a, value);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v as EventListener);
    else (node as unknown as Record<string, unknown>)[k] = v;
  }
  for (const c of children ?? []) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return node;
}

/** Appends the children that are there (a view leaves out what a read-only key cannot use). */
export function put<T extends HTMLElement>(node: T, children: Array<Node | null | undefined | false>): T {
  for (const c of children) if (c) node.append(c);
  return node;
}

export function when(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** The time for today's mail, the date for older. */
export function shortWhen(iso: string): string {
  const d = new Date(iso);
  if (isNaN(d.getTime())) return iso || '';
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : d.toLocaleDateString();
}

export function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1048576) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / 1048576).toFixed(1)} MB`;
}

export const TONE: Record<string, string> = {
  active: 'ok',
  verified: 'ok',
  success: 'ok',
  sent: 'ok',
  delivered: 'ok',
  received: 'ok',
  pass: 'ok',
  held: 'warn',
  pending: 'warn',
  pending_dkim: 'warn',
  queued: 'warn',
  sending: 'warn',
  scheduled: 'warn',
  neutral: 'warn',
  softfail: 'warn',
  temperror: 'warn',
  failed: 'bad',
  bounced: 'bad',
  complained: 'bad',
  suspended: 'bad',
  inactive: 'bad',
  fail: 'bad',
  permerror: 'bad',
  canceled: 'bad',
  suppressed: 'bad',
};
export function badge(text: string, tone?: string, title?: string): HTMLSpanElement {
  return el('span', { className: `badge ${tone === undefined ? (TONE[text] ?? '') : tone}`, textContent: text, title: title ?? '' });
}

/** When the last notice was shown (route() leaves a fresh one) and its timer. */
export const notice = { at: 0, timer: undefined as ReturnType<typeof setTimeout> | undefined };

/** A notice that goes away by itself (and on the next view): never a banner that stays. */
export function notify(text: string, bad?: boolean): void {
  const n = $('notice');
  $('notice-text').textContent = text;
  n.className = bad ? 'bad' : '';
  n.hidden = false;
  notice.at = Date.now();
  clearTimeout(notice.timer);
  notice.timer = setTimeout(clearNotice, bad ? 10000 : 5000);
}
export function clearNotice(): void {
  $('notice').hidden = true;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** One API call with the signed-in key: the JSON answer, or an ApiError with the API's code. */
// The answer is JSON: a caller names the shape it reads (api<Thread>), else it is any.
export async function api<T = any>(method: string, path: string, body?: unknown, extraHeaders?: Record<string, string>): Promise<T> {
  const key = sessionStorage.getItem(STORE);
  const headers: Record<string, string> = { Authorization: `Bearer ${key}`, Accept: 'application/json', ...extraHeaders };
  const init: RequestInit = { method, headers, cache: 'no-store' };
  // A FormData (an upload) goes as multipart/form-data, with the boundary the browser sets.
  if (body instanceof FormData) init.body = body;
  else if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const err = data?.error ?? { code: `HTTP_${res.status}`, message: res.statusText };
    throw new ApiError(res.status, err.code, err.message + (err.requestId ? ` (request ${err.requestId})` : ''));
  }
  return data as T;
}

export function failed(err: unknown): void {
  if (err instanceof ApiError && err.status === 401) {
    signOut(`The server refused the key: ${err.message}`);
    return;
  }
  notify(err instanceof ApiError ? `${err.code}: ${err.message}` : String(err), true);
}

/** Runs an action of a button: disabled while it runs, errors as a notice. */
export function busy(button: HTMLButtonElement, fn: () => unknown): (ev?: Event) => Promise<void> {
  return async (ev) => {
    ev?.preventDefault();
    button.disabled = true;
    try {
      await fn();
    } catch (err) {
      failed(err);
    } finally {
      button.disabled = false;
    }
  };
}

/** Whether the signed-in key has `scope` (src/http/routes.ts ROUTE_SCOPES says which route needs which). */
export const may = (scope: string): boolean => !state.readOnly && state.scopes.includes(scope);

/**
 * A write action, or nothing for a key without the scope it needs (the server would answer 403
 * INSUFFICIENT_SCOPE): `send` for sending and marking mail, `manage` for deleting it and for
 * the account's settings, `review` for releasing what was held.
 */
export function writeButton(text: string, className: string, onclick: (b: HTMLButtonElement) => unknown, title?: string, scope = 'send'): HTMLButtonElement | null {
  if (!may(scope)) return null;
  const b = el('button', { type: 'button', className, textContent: text, title: title ?? '' });
  b.addEventListener(
    'click',
    busy(b, () => onclick(b)),
  );
  return b;
}

/** A button that acts on its second click (the first asks): deleting, canceling. */
export function armed(b: HTMLButtonElement, again: string): boolean {
  if (b.dataset.armed) return true;
  b.dataset.armed = '1';
  b.textContent = again;
  return false;
}

export function table(headers: string[], rows: HTMLTableRowElement[], empty: string): HTMLElement {
  if (!rows.length) return el('p', { className: 'empty', textContent: empty });
  return el('div', { className: 'scroll' }, [
    el('table', null, [
      el('thead', null, [
        el(
          'tr',
          null,
          headers.map((h) => el('th', { className: h.startsWith('#') ? 'num' : '', textContent: h.replace(/^#/, '') })),
        ),
      ]),
      el('tbody', null, rows),
    ]),
  ]);
}
export function td(v: Child, cls?: string): HTMLTableCellElement {
  return el('td', { className: cls ?? '' }, [v]);
}

let fieldIds = 0;
/** A labelled input: field('To', 'input', {type: 'text', value: ...}). */
export function field<K extends 'input' | 'textarea' | 'select'>(label: string, tag: K, props?: Props): HTMLDivElement & { input: HTMLElementTagNameMap[K] } {
  const input = el(tag, { id: `f${++fieldIds}`, ...props });
  const wrap = el('div', { className: 'field' }, [el('label', { htmlFor: input.id, textContent: label }), input]);
  return Object.assign(wrap, { input });
}

/** "a@x, b@y" -> ['a@x', 'b@y']. */
export function addresses(text: string): string[] {
  return String(text || '')
    .split(/[,;\s]+/)
    .filter((s) => s);
}

/** A value shown once (a new key, a webhook secret) until dismissed. */
export function shownOnce(title: string, value: string, note: string): HTMLDivElement {
  const box = el('div', { className: 'card once' }, [
    el('b', { textContent: title }),
    el('code', { className: 'mono once-value', textContent: value }),
    el('p', { className: 'muted', textContent: note }),
  ]);
  box.append(el('button', { type: 'button', className: 'small quiet', textContent: 'I have stored it', onclick: () => box.remove() }));
  return box;
}

export type Picker = HTMLDivElement & { ids(): string[]; uploading(): boolean };

/**
 * Attachments for a message or a draft: each file chosen is uploaded at once (POST
 * /attachments, streamed to disk by the server) and listed with a Remove button; ids() are
 * the uploaded ones, in order, for attachmentIds.
 */
export function attachmentPicker(): Picker {
  const input = el('input', { id: `f${++fieldIds}`, type: 'file', multiple: true, name: 'file' });
  const list = el('ul', { className: 'attachments picked' });
  const uploaded: Attachment[] = [];
  let pending = 0;
  const upload = async (f: File) => {
    const item = el('li', { className: 'uploading', textContent: `${f.name} (uploading\u2026)` });
    list.append(item);
    pending++;
    try {
      const form = new FormData();
      form.append('file', f, f.name);
      const a = await api<Attachment>('POST', '/attachments', form);
      uploaded.push(a);
      item.className = 'uploaded';
      const remove = () => {
        uploaded.splice(uploaded.indexOf(a), 1);
        item.remove();
      };
      item.replaceChildren(
        `${a.filename} (${size(a.size)}) `,
        el('button', { type: 'button', className: 'link', textContent: 'Remove', attrs: { 'aria-label': `Remove ${a.filename}` }, onclick: remove }),
      );
    } catch (err) {
      item.remove();
      failed(err);
    } finally {
      pending--;
    }
  };
  input.addEventListener('change', () => {
    const files = Array.from(input.files ?? []);
    input.value = '';
    for (const f of files) void upload(f);
  });
  const wrap = el('div', { className: 'field' }, [el('label', { htmlFor: input.id, textContent: 'Attachments' }), input, list]);
  return Object.assign(wrap, { ids: () => uploaded.map((a) => a.id), uploading: () => pending > 0 });
}

/** Refuses to send while a file is still uploading (it would go without it). */
export function uploadsDone(picker: Picker): boolean {
  if (!picker.uploading()) return true;
  notify('Wait until the attachments have uploaded.', true);
  return false;
}
