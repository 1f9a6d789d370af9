// The dashboard's operator views: inboxes (create one), webhooks (create one, the delivery log,
// replay of a failed delivery through the one dashboard-only endpoint), domains (records,
// verify) and API keys (create one). Routes: #inboxes, #webhooks, #domains, #keys.
import { $, api, armed, badge, busy, el, enc, failed, field, may, notify, put, shownOnce, state, STORE, table, td, when, writeButton } from './core.ts';
import { loadInboxes } from './mail.ts';
import { route } from './shell.ts';
import type { ApiKey, CreatedApiKey, Delivery, DmarcSummary, DomainWithCheck as Domain, Inbox, Page, TlsReports, Webhook } from './types.ts';

function stat(n: number, label: string): HTMLElement {
  return el('div', { className: 'stat' }, [el('b', { textContent: String(n) }), el('span', { textContent: label })]);
}

/** A form in a card that runs submit() and then shows the view again (with what it returns first). */
function createForm(title: string, fields: HTMLElement[], buttonText: string, submit: () => Promise<HTMLElement | void>): HTMLFormElement | null {
  // Inboxes, webhooks and keys are the account's settings: scope manage.
  if (!may('manage')) return null;
  const button = el('button', { type: 'submit', textContent: buttonText });
  const form = el('form', { className: 'card create' }, [el('h2', { textContent: title }), ...fields, el('div', { className: 'actions' }, [button])]);
  form.addEventListener(
    'submit',
    busy(button, async () => {
      const shown = await submit();
      await route(true);
      if (shown) $('view').prepend(shown);
    }),
  );
  return form;
}

export async function viewInboxes(view: HTMLElement): Promise<void> {
  const page = await loadInboxes();
  const sum = (f: 'sendsToday' | 'totalSent' | 'bounceCount' | 'complaintCount') => page.data.reduce((n, i) => n + (i[f] || 0), 0);
  const address = field('Address (optional: a local part such as "support", or a full address)', 'input', { type: 'text', name: 'address', placeholder: 'random when empty' });
  const name = field('Display name (optional)', 'input', { type: 'text', name: 'displayName' });
  put(view, [
    el('h1', { textContent: 'Inboxes' }),
    el('div', { className: 'stats' }, [
      stat(page.total, 'inboxes'),
      stat(sum('sendsToday'), 'sent today'),
      stat(sum('totalSent'), 'sent in total'),
      stat(sum('bounceCount'), 'bounces'),
      stat(sum('complaintCount'), 'complaints'),
    ]),
    table(
      ['Address', 'Name', 'Status', 'Screening', 'Approval', '#Today / limit', '#Total sent', '#Bounces', '#Complaints', 'Created'],
      page.data.map((i) =>
        el('tr', { className: 'clickable inbox-row', dataset: { id: i.id }, title: 'Open its mail', onclick: () => (location.hash = `#mail/${enc(i.id)}`) }, [
          td(i.address, 'mono addr'),
          td(i.displayName || ''),
          el('td', null, [badge(i.status)]),
          el('td', null, [badge(i.screening, i.screening === 'hold' ? 'ok' : i.screening === 'off' ? 'bad' : '')]),
          td(i.sendPolicy.approval === 'none' ? 'none' : i.sendPolicy.approval.replace('_', ' ')),
          td(`${i.sendsToday} / ${i.dailySendLimit}${i.sendPolicy.hourlySendLimit === null ? '' : ` (${i.sendPolicy.hourlySendLimit}/h)`}`, 'num'),
          td(i.totalSent, 'num'),
          td(i.bounceCount, 'num'),
          td(i.complaintCount, 'num'),
          td(when(i.createdAt)),
        ]),
      ),
      'No inboxes yet.',
    ),
    page.total > page.data.length ? el('p', { className: 'muted', textContent: `Showing the ${page.data.length} most recent of ${page.total}.` }) : null,
    createForm('New inbox', [el('div', { className: 'grid2' }, [address, name])], 'Create inbox', async () => {
      const body: { address?: string; displayName?: string } = {};
      if (address.input.value.trim()) body.address = address.input.value.trim();
      if (name.input.value.trim()) body.displayName = name.input.value.trim();
      const inbox = await api<Inbox>('POST', '/inboxes', body);
      notify(`Created inbox ${inbox.address}.`);
    }),
    page.data.length ? guardForm(page.data) : null,
  ]);
}

/**
 * An inbox's guard rails (PATCH /inboxes/{id}, scope manage): how its inbound mail is screened
 * and when its sends wait for a person. The fields show the chosen inbox's settings.
 */
/** The inbox the guard-rails form showed last: still chosen when the view is drawn again after a save. */
let guarded = '';

function guardForm(inboxes: Inbox[]): HTMLFormElement | null {
  const options = (values: string[]) => values.map((v) => el('option', { value: v, textContent: v.replace('_', ' ') }));
  const which = field('Inbox', 'select', { name: 'inbox' });
  which.input.append(...inboxes.map((i) => el('option', { value: i.id, textContent: i.address })));
  const screening = field('Screening of inbound mail', 'select', { name: 'screening' });
  screening.input.append(...options(['off', 'monitor', 'hold']));
  const approval = field('Sends wait for approval', 'select', { name: 'approval' });
  approval.input.append(...options(['none', 'first_contact', 'always']));
  const hourly = field('Sends an hour at most (empty: no hourly limit)', 'input', { type: 'number', name: 'hourlySendLimit', min: '0', step: '1' });
  if (inboxes.some((i) => i.id === guarded)) which.input.value = guarded;
  const fill = () => {
    guarded = which.input.value;
    const i = inboxes.find((x) => x.id === guarded)!;
    screening.input.value = i.screening;
    approval.input.value = i.sendPolicy.approval;
    hourly.input.value = i.sendPolicy.hourlySendLimit === null ? '' : String(i.sendPolicy.hourlySendLimit);
  };
  which.input.addEventListener('change', fill);
  fill();
  return createForm('Guard rails of an inbox', [which, el('div', { className: 'grid2' }, [screening, approval]), hourly], 'Save settings', async () => {
    const limit = hourly.input.value.trim();
    const inbox = await api<Inbox>('PATCH', `/inboxes/${enc(which.input.value)}`, {
      screening: screening.input.value,
      sendPolicy: { approval: approval.input.value, hourlySendLimit: limit === '' ? null : Number(limit) },
    });
    notify(`${inbox.address}: screening ${inbox.screening}, approval ${inbox.sendPolicy.approval.replace('_', ' ')}.`);
  });
}

export async function viewWebhooks(view: HTMLElement, filter: { status: string }): Promise<void> {
  const [hooks, catalog, logs] = await Promise.all([
    api<Page<Webhook>>('GET', '/webhooks'),
    api<Page<{ name: string; description: string }>>('GET', '/webhooks/catalog'),
    api<Page<Delivery>>('GET', `/webhooks/logs?limit=100${filter.status ? `&status=${filter.status}` : ''}`),
  ]);
  state.webhooks = hooks.data;
  const onlyFailed: HTMLSelectElement = el(
    'select',
    {
      id: 'log-status',
      attrs: { 'aria-label': 'Delivery status' },
      onchange: () => {
        filter.status = onlyFailed.value;
        void route(true);
      },
    },
    ['', 'failed', 'success', 'pending'].map((s) => el('option', { value: s, textContent: s || 'all statuses', selected: s === (filter.status || '') })),
  );
  const url = field('URL (https; the server must be able to reach it)', 'input', { type: 'text', name: 'url', required: true, placeholder: 'the https URL of your receiver' });
  const boxes = catalog.data.map((e) => el('input', { type: 'checkbox', value: e.name, name: 'events', title: e.description }));
  put(view, [
    el('h1', { textContent: 'Webhooks' }),
    table(
      ['URL', 'Events', 'State', 'Created'],
      hooks.data.map((h) =>
        el('tr', { className: 'webhook-row', dataset: { id: h.id } }, [
          td(h.url, 'mono long'),
          td(h.events?.length ? h.events.join(', ') : 'all events'),
          el('td', null, [badge(h.isActive ? 'active' : 'inactive')]),
          td(when(h.createdAt)),
        ]),
      ),
      'No webhooks yet.',
    ),
    createForm(
      'New webhook',
      [
        url,
        el('label', { textContent: 'Events (none ticked: every event)' }),
        el(
          'div',
          null,
          boxes.map((b) => el('label', { className: 'check', title: b.title }, [b, b.value])),
        ),
      ],
      'Create webhook',
      async () => {
        const picked = boxes.filter((b) => b.checked).map((b) => b.value);
        const hook = await api<Webhook & { secret: string }>('POST', '/webhooks', { url: url.input.value.trim(), ...(picked.length ? { events: picked } : {}) });
        notify(`Created webhook ${hook.id}.`);
        return shownOnce(`Signing secret of ${hook.url}`, hook.secret, "Shown only once: the receiver checks each delivery's signature with it.");
      },
    ),
    el('div', { className: 'toolbar' }, [
      el('h2', { textContent: 'Delivery log' }),
      el('span', { className: 'spacer' }),
      onlyFailed,
      el('button', { type: 'button', className: 'small', textContent: 'Refresh', onclick: () => void route(true) }),
    ]),
    table(
      ['When', 'Event', 'Webhook', 'Status', '#HTTP', '#Attempt', '#ms', 'Error', ''],
      logs.data.map((d) => {
        const action = d.status === 'failed' ? writeButton('Replay', 'small replay', (b) => replay(b, d), 'Send this event again as one new attempt', 'manage') : null;
        return el('tr', { className: 'delivery-row', dataset: { id: d.id, status: d.status } }, [
          td(when(d.createdAt), 'when'),
          td(d.eventType),
          td(urlOf(d.webhookId), 'mono long'),
          el('td', null, [badge(d.status)]),
          td(d.httpStatus === null ? '-' : d.httpStatus, 'num'),
          td(d.attempt, 'num'),
          td(d.durationMs, 'num'),
          td(d.error || '', 'mono long'),
          el('td', null, [action]),
        ]);
      }),
      'No deliveries logged.',
    ),
  ]);
}

async function replay(button: HTMLButtonElement, d: Delivery): Promise<void> {
  const r = await api<{ webhookId: string; attempt: number }>('POST', `/dashboard/api/deliveries/${enc(d.id)}/replay`);
  notify(`Replay queued: ${d.eventType} to ${urlOf(r.webhookId || d.webhookId)} as attempt ${r.attempt}.`);
  button.replaceWith(el('span', { className: 'muted', textContent: 'Queued' }));
  // The job runner picks it up at once; show its outcome shortly after.
  setTimeout(() => {
    if (location.hash.startsWith('#webhooks')) void route(true);
  }, 1500);
}
function urlOf(webhookId: string): string {
  return state.webhooks.find((w) => w.id === webhookId)?.url ?? webhookId;
}

export async function viewDomains(view: HTMLElement): Promise<void> {
  const list = await api<Page<Domain>>('GET', '/domains');
  view.append(el('h1', { textContent: 'Domains' }));
  if (!list.data.length) view.append(el('p', { className: 'empty', textContent: 'No custom domains. Add one with POST /domains or mailroom domains add.' }));
  for (const d of list.data) view.append(domainCard(d));
}

function domainCard(d: Domain): HTMLElement {
  const card = el('div', { className: 'card domain', dataset: { id: d.id } });
  const verify = el('button', { type: 'button', className: 'verify', textContent: 'Verify now', hidden: !may('manage') });
  verify.addEventListener(
    'click',
    busy(verify, async () => {
      verify.textContent = 'Checking DNS\u2026';
      try {
        const fresh = await api<Domain>('POST', `/domains/${enc(d.id)}/verify`);
        card.replaceWith(domainCard(fresh));
        notify(`${fresh.domain}: sending ${fresh.sendingStatus}, receiving ${fresh.receivingStatus}.`);
      } finally {
        verify.textContent = 'Verify now';
      }
    }),
  );
  const checks = new Map((d.dnsCheck ?? []).map((c) => [`${c.type} ${c.name}`, c]));
  const reports = el('div', { className: 'domain-reports' }, [el('p', { className: 'muted', textContent: 'Loading the reports\u2026' })]);
  const rows = (d.dnsRecords ?? []).map((r) => {
    const c = checks.get(`${r.type} ${r.name}`);
    return el('tr', null, [
      td(r.type),
      td(r.name, 'mono host'),
      td(r.priority === undefined ? '' : r.priority, 'num'),
      td(r.value, 'mono long'),
      el('td', null, [c ? badge(c.state === 'found' ? 'verified' : c.state) : null, c?.detail ? el('div', { className: 'muted', textContent: c.detail }) : null]),
    ]);
  });
  put(card, [
    el('div', { className: 'domain-head' }, [
      el('h2', { textContent: d.domain }),
      el('span', null, ['sending ', badge(d.sendingStatus)]),
      el('span', null, ['receiving ', badge(d.receivingStatus)]),
      verify,
    ]),
    el('p', { className: 'muted', textContent: (d.lastCheckedAt ? `Last checked ${when(d.lastCheckedAt)}. ` : 'Not checked yet. ') + (d.lastCheckError || '') }),
    table(['Type', 'Name', '#Priority', 'Value', d.dnsCheck ? 'In DNS' : ''], rows, 'No records.'),
    reports,
  ]);
  domainReports(reports, d.id).catch(failed);
  return card;
}

/** DMARC aggregate and TLS-RPT reports receivers sent about the domain, the last 30 days. */
async function domainReports(box: HTMLElement, id: string): Promise<void> {
  const [dmarc, tls] = await Promise.all([api<DmarcSummary>('GET', `/domains/${enc(id)}/dmarc`), api<TlsReports>('GET', `/domains/${enc(id)}/tls-reports`)]);
  const pct = (n: number, of: number) => (of ? `${n} (${Math.round((100 * n) / of)}%)` : String(n));
  const t = dmarc.totals;
  box.replaceChildren();
  put(box, [
    el('h3', { textContent: `DMARC reports, last ${dmarc.days} days` }),
    t.messages
      ? el('div', { className: 'stats' }, [
          stat(t.messages, 'messages reported'),
          stat(t.dmarcPass, 'passed DMARC'),
          stat(t.dkimAligned, 'DKIM aligned'),
          stat(t.spfAligned, 'SPF aligned'),
          stat(t.quarantined + t.rejected, 'quarantined or rejected'),
        ])
      : null,
    table(
      ['Sending IP', '#Messages', '#DMARC pass', '#DKIM aligned', '#SPF aligned', '#Quarantined', '#Rejected'],
      dmarc.sources.map((s) =>
        el('tr', { className: 'dmarc-source' }, [
          td(s.sourceIp, 'mono'),
          td(s.messages, 'num'),
          td(pct(s.dmarcPass, s.messages), 'num'),
          td(pct(s.dkimAligned, s.messages), 'num'),
          td(pct(s.spfAligned, s.messages), 'num'),
          td(s.quarantined, 'num'),
          td(s.rejected, 'num'),
        ]),
      ),
      `No DMARC reports received (receivers mail them to dmarc-reports@${dmarc.domain}).`,
    ),
    dmarc.reports.length ? el('p', { className: 'muted', textContent: `From ${[...new Set(dmarc.reports.map((r) => r.orgName))].join(', ')}.` }) : null,
    el('h3', { textContent: `TLS reports, last ${tls.days} days` }),
    table(
      ['Reporter', 'Range', '#Sessions ok', '#Failed', 'Failures'],
      tls.data.map((r) =>
        el('tr', { className: 'tls-report' }, [
          td(r.orgName),
          td(`${when(r.begin)} – ${when(r.end)}`),
          td(r.successCount, 'num'),
          el('td', { className: 'num' }, [r.failureCount ? badge(String(r.failureCount), 'bad') : '0']),
          td(r.policies.flatMap((p) => p.failures.map((f) => `${f.resultType} ×${f.count}${f.receivingMx ? ` at ${f.receivingMx}` : ''} (${p.type})`)).join('; '), 'mono long'),
        ]),
      ),
      `No TLS reports received (senders mail them to tls-reports@${tls.domain}).`,
    ),
  ]);
}

const SCOPES = ['read', 'send', 'manage', 'review'];
const SCOPE_MEANS: Record<string, string> = {
  read: 'every GET',
  send: 'send, reply, forward, drafts, cancel, labels and read state, uploads',
  manage: 'inboxes and their settings, lists, webhooks, domains, keys',
  review: 'release held mail, approve held sends, lift suppressions, read the audit log',
};

export async function viewKeys(view: HTMLElement): Promise<void> {
  const keys = await api<Page<ApiKey>>('GET', '/account/api-keys');
  if (!state.inboxes.length) await loadInboxes();
  const mine = sessionStorage.getItem(STORE) ?? '';
  const name = field('Name', 'input', { type: 'text', name: 'name', placeholder: 'e.g. support-agent' });
  // A key makes keys with at most its own scopes and inboxes: only those are offered.
  const scopeBoxes = SCOPES.filter((sc) => state.scopes.includes(sc)).map((sc) => el('input', { type: 'checkbox', name: 'scopes', value: sc, checked: true, title: SCOPE_MEANS[sc] }));
  const inboxBoxes = state.inboxes.map((i) => el('input', { type: 'checkbox', name: 'inboxIds', value: i.id, title: i.address }));
  const address = (id: string) => state.inboxes.find((i) => i.id === id)?.address ?? id;
  put(view, [
    el('h1', { textContent: 'API keys' }),
    el('p', {
      className: 'muted',
      textContent:
        "Keys of this account; their values are never shown again after creation. A key's scopes say what it may do (an agent's key usually has read and send, a person's review too), its inboxes where (none listed: every inbox).",
    }),
    table(
      ['Name', 'Prefix', 'Scopes', 'Inboxes', 'Last used', 'Expires', 'Created', ''],
      keys.data.map((k) =>
        el('tr', { className: 'key-row', dataset: { id: k.id } }, [
          td(k.name || ''),
          td(`${k.keyPrefix}\u2026`, 'mono'),
          el(
            'td',
            { className: 'scopes' },
            k.scopes.map((sc) => badge(sc, sc === 'review' || sc === 'manage' ? 'warn' : '', SCOPE_MEANS[sc])),
          ),
          td(k.inboxIds.length ? k.inboxIds.map(address).join(', ') : 'every inbox', 'mono'),
          td(when(k.lastUsedAt) || 'never'),
          td(when(k.expiresAt) || 'never'),
          td(when(k.createdAt)),
          el('td', null, [
            mine.startsWith(k.keyPrefix)
              ? el('span', { className: 'muted', textContent: 'this key' })
              : writeButton(
                  'Revoke',
                  'small danger revoke',
                  async (b) => {
                    if (!armed(b, 'Click again to revoke')) return;
                    await api('DELETE', `/account/api-keys/${enc(k.id)}`);
                    notify(`Revoked the key ${k.name || k.keyPrefix}: it works no more.`);
                    await route(true);
                  },
                  `Revoke ${k.name || k.keyPrefix}`,
                  'manage',
                ),
          ]),
        ]),
      ),
      'No keys.',
    ),
    createForm(
      'New API key',
      [
        name,
        el('label', { textContent: 'Scopes' }),
        el(
          'div',
          null,
          scopeBoxes.map((b) => el('label', { className: 'check', title: b.title }, [b, b.value])),
        ),
        el('label', { textContent: 'Inboxes (none ticked: every inbox this key reaches)' }),
        el(
          'div',
          null,
          inboxBoxes.map((b) => el('label', { className: 'check' }, [b, b.title])),
        ),
      ],
      'Create key',
      async () => {
        const scopes = scopeBoxes.filter((b) => b.checked).map((b) => b.value);
        const inboxIds = inboxBoxes.filter((b) => b.checked).map((b) => b.value);
        const created = await api<CreatedApiKey>('POST', '/account/api-keys', {
          ...(name.input.value.trim() ? { name: name.input.value.trim() } : {}),
          scopes,
          ...(inboxIds.length ? { inboxIds } : {}),
        });
        notify(`Created key ${created.name || created.prefix}.`);
        return shownOnce(`New API key${created.name ? ` ${created.name}` : ''}`, created.key, created.message);
      },
    ),
  ]);
}
