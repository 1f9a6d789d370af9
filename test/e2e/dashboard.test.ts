// The dashboard: its page and assets (strict CSP, nothing external), the dashboard-only replay
// endpoint with its error paths, and an end-to-end run in headless Chromium driven by
// playwright-core: sign in, see an inbox and a message, replay a failed delivery, verify a
// domain. The browser part skips, saying why, when /usr/bin/chromium is missing.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApiKey } from '../../src/domain/apikeys.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { smtpTransport } from '../support/mail.ts';

const CHROMIUM = '/usr/bin/chromium';

let t: TestServer;
let dns: TestDns;
let hook: Receiver;
let webhookId: string;
let domainId: string;


const deliveries = async (status: string) => (await t.api('GET', `/webhooks/logs?webhookId=${webhookId}&status=${status}`)).body.data as Array<{ id: string; attempt: number; status: string }>;

/** Publishes every record the API asks for, so a verify finds them all. */
async function publishRecords(id: string): Promise<void> {
  const d = (await t.api('GET', `/domains/${id}`)).body;
  for (const r of d.dnsRecords as Array<{ type: string; name: string; value: string; priority?: number }>) {
    if (r.type === 'MX') dns.add(r.name, { type: 'MX', exchange: r.value, priority: r.priority ?? 10 });
    else dns.add(r.name, { type: 'TXT', value: r.value });
  }
}

before(async () => {
  dns = await startTestDns();
  dns.set('example.org', [{ type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 -all' }]);
  // One retry a few milliseconds later: the delivery is `failed` for good after two attempts.
  t = await startTestServer({ dns: { servers: [dns.server], timeout: '1s' }, webhooks: { retry_schedule: ['20ms'], timeout: '2s', allow_insecure_targets: true } });
  hook = await startReceiver(500);
  webhookId = (await t.api('POST', '/webhooks', { url: `${hook.url}/hook`, events: ['message.received'] })).body.id;
  const inbox = (await t.api('POST', '/inboxes', { address: 'ops', displayName: 'Ops agent' })).body;
  assert.equal(inbox.address, 'ops@agents.test');
  const transport = smtpTransport(t.server.smtpPort);
  try {
    await transport.sendMail({ from: 'Bob <bob@example.org>', to: 'ops@agents.test', subject: 'Disk almost full on db-1', text: 'Usage is at 93%.\nPlease have a look.' });
    // Mail from strangers: markup in it must stay text on the page.
    await transport.sendMail({ from: 'mallory@example.org', to: 'ops@agents.test', subject: '<img src=x id=pwn onerror="document.title=1">Invoice', html: '<b id=pwn2>bold</b>' });
  } finally {
    transport.close();
  }
  // Two deliveries of two attempts each, all failed (an attempt a retry followed is failed too).
  await until('four failed attempts', async () => ((await deliveries('failed')).length === 4 ? true : undefined));
  domainId = (await t.api('POST', '/domains', { domain: 'example.net' })).body.id;
  assert.ok(domainId);
});

after(async () => {
  await t?.close();
  await hook?.close();
  await dns?.close();
});

describe('dashboard page', () => {
  test('is served without a key, with a strict Content-Security-Policy and nothing external', async () => {
    const res = await fetch(`${t.url}/dashboard`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    const html = await res.text();
    assert.match(html, /<script src="\/dashboard\/app\.js" defer><\/script>/);
    // No inline script or style, no address outside this server.
    assert.doesNotMatch(html, /<script>|<style|style="|https?:\/\//);
    for (const [path, type] of [
      ['/dashboard/favicon.svg', /^image\/svg\+xml/],
      ['/dashboard/app.js', /^text\/javascript/],
      ['/dashboard/app.css', /^text\/css/],
    ] as const) {
      const a = await fetch(t.url + path);
      assert.equal(a.status, 200, path);
      assert.match(a.headers.get('content-type') ?? '', type);
      // (The SVG namespace is a name, never fetched.)
      assert.doesNotMatch(await a.text(), /https?:\/\/(?!www\.w3\.org\/2000\/svg)/, `${path} refers to an outside address`);
    }
  });

  test('unknown dashboard paths are 404 NOT_FOUND', async () => {
    const res = await t.api('GET', '/dashboard/nope.js', undefined, { key: null });
    expectError(res, 404, 'NOT_FOUND');
  });
});

describe('POST /dashboard/api/deliveries/:id/replay', () => {
  test('error paths: no key, read-only key, another account, unknown id', async () => {
    const [failed] = await deliveries('failed');
    expectError(await t.api('POST', `/dashboard/api/deliveries/${failed.id}/replay`, undefined, { key: null }), 401, 'UNAUTHORIZED');
    const readOnly = createApiKey(t.server.ctx, t.accountId, { name: 'viewer', readOnly: true });
    expectError(await t.api('POST', `/dashboard/api/deliveries/${failed.id}/replay`, undefined, { key: readOnly.key }), 403, 'FORBIDDEN');
    const other = t.newAccount('other');
    expectError(await t.api('POST', `/dashboard/api/deliveries/${failed.id}/replay`, undefined, { key: other.key }), 404, 'NOT_FOUND');
    expectError(await t.api('POST', '/dashboard/api/deliveries/dlv_unknown/replay'), 404, 'NOT_FOUND');
    // A pending attempt (its retry still scheduled) is refused: test/e2e/webhooks.test.ts.
    assert.deepEqual(await deliveries('pending'), [], 'no attempt stays pending once its job ended');
  });
});

describe('dashboard in headless Chromium', () => {
  const skip = existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing (apt-get install chromium); the browser test is skipped`;
  if (skip) console.log(`# skip: ${skip}`);

  test('sign in, see an inbox and a message, replay a failed delivery, verify a domain', { skip }, async () => {
    const { chromium } = await import('playwright-core');
    const profile = mkdtempSync(join(tmpdir(), 'mailroom-chromium-'));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1280, height: 860 },
    });
    const problems: string[] = [];
    const outside: string[] = [];
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(e.message));
      page.on('request', (r) => {
        if (!r.url().startsWith(t.url) && !r.url().startsWith('data:')) outside.push(r.url());
      });

      await page.goto(`${t.url}/dashboard`);
      await page.locator('#signin').waitFor();
      // A wrong key is refused and nothing is kept.
      await page.fill('#key', 'mr_live_notavalidkey0000000000000000000000000');
      await page.click('#signin-form button[type=submit]');
      await page.locator('#signin-error').waitFor();
      assert.match(await page.textContent('#signin-error') ?? '', /refused/);
      assert.equal(await page.evaluate(() => sessionStorage.getItem('mailroom.apiKey')), null);
      // The browser logs the refused request (401) as a console error: expected, so forget it.
      problems.length = 0;

      await page.fill('#key', t.key);
      await page.click('#signin-form button[type=submit]');
      await page.locator('.view-inboxes[data-loaded=true]').waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.getItem('mailroom.apiKey')), t.key);
      const inboxRow = page.locator('tr.inbox-row', { hasText: 'ops@agents.test' });
      await inboxRow.waitFor();
      assert.match((await inboxRow.textContent()) ?? '', /Ops agent.*active/);
      await page.screenshot({ path: join(process.env.MAILROOM_SCREENSHOT_DIR ?? profile, 'dashboard-inboxes.png'), fullPage: true });

      // The inbox row opens its messages; the message opens its detail.
      await inboxRow.click();
      await page.locator('.view-messages[data-loaded=true]').waitFor();
      const messageRow = page.locator('tr.message-row', { hasText: 'Disk almost full on db-1' });
      await messageRow.waitFor();
      assert.match((await messageRow.textContent()) ?? '', /bob@example\.org.*received/);
      const hostile = page.locator('tr.message-row', { hasText: '<img src=x id=pwn' });
      await hostile.waitFor();
      await hostile.click();
      await page.locator('#message-detail h2', { hasText: '<img src=x id=pwn' }).waitFor();
      assert.equal(await page.locator('#pwn, #pwn2').count(), 0, 'markup from a message never becomes elements');
      await messageRow.click();
      await page.locator('#message-detail pre.body', { hasText: 'Usage is at 93%.' }).waitFor();
      await page.screenshot({ path: join(process.env.MAILROOM_SCREENSHOT_DIR ?? profile, 'dashboard-messages.png'), fullPage: true });

      // The key survives a reload of the tab (session storage).
      await page.reload();
      await page.locator('.view-messages[data-loaded=true]').waitFor();

      // Replay the failed delivery once the receiver works again.
      hook.fallback = 200;
      const before = hook.received.length;
      await page.click('nav a[data-view=webhooks]');
      await page.locator('.view-webhooks[data-loaded=true]').waitFor();
      await page.locator('tr.webhook-row', { hasText: `${hook.url}/hook` }).waitFor();
      const failedRow = page.locator('tr.delivery-row[data-status=failed]').first();
      await failedRow.locator('button.replay').click();
      await page.locator('#notice', { hasText: 'Replay queued' }).waitFor();
      await hook.waitFor(before + 1);
      await page.click('.view-webhooks button:text("Refresh")');
      await page.locator('tr.delivery-row[data-status=success]').waitFor();
      assert.equal((await deliveries('success')).length, 1);
      assert.equal(hook.received.at(-1)?.json?.type, 'message.received');

      // Verify a domain whose records are published.
      await publishRecords(domainId);
      await page.click('nav a[data-view=domains]');
      await page.locator('.view-domains[data-loaded=true]').waitFor();
      const card = page.locator('.domain', { hasText: 'example.net' });
      assert.match((await card.textContent()) ?? '', /sending pending/);
      assert.ok((await card.locator('tr').count()) >= 5, 'the DNS records are listed');
      await card.locator('button.verify').click();
      await page.locator('.domain', { hasText: 'sending verified' }).waitFor();
      assert.match((await page.locator('.domain').textContent()) ?? '', /receiving verified/);
      assert.equal((await t.api('GET', `/domains/${domainId}`)).body.sendingStatus, 'verified');

      await page.screenshot({ path: join(process.env.MAILROOM_SCREENSHOT_DIR ?? profile, 'dashboard-domains.png'), fullPage: true });
      await page.click('nav a[data-view=webhooks]');
      await page.locator('.view-webhooks[data-loaded=true]').waitFor();
      await page.screenshot({ path: join(process.env.MAILROOM_SCREENSHOT_DIR ?? profile, 'dashboard-webhooks.png'), fullPage: true });

      // Signing out forgets the key.
      await page.click('#signout');
      await page.locator('#signin').waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.getItem('mailroom.apiKey')), null);

      assert.deepEqual(problems, [], 'no script errors or CSP violations in the console');
      assert.deepEqual(outside, [], 'no request left this server');
    } finally {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    }
  });
});
