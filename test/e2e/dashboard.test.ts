// The dashboard: its page and assets (strict CSP, nothing external, a script that parses and is
// ASCII, bundled from the TypeScript of src/http/dashboard/client, as in the executable), and the dashboard-only replay endpoint with its error paths. The dashboard in a real
// browser: test/e2e/dashboard-client.test.ts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { createContext, Script } from 'node:vm';
import { build } from 'esbuild';
import { bundleDashboard, bundledDashboard } from '../../src/http/dashboard/bundle.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { smtpTransport } from '../support/mail.ts';

let t: TestServer;
let hook: Receiver;
let webhookId: string;

const deliveries = async (status: string) => (await t.api('GET', `/webhooks/logs?webhookId=${webhookId}&status=${status}`)).body.data as Array<{ id: string; attempt: number; status: string }>;

before(async () => {
  // One retry a few milliseconds later: the delivery is `failed` for good after two attempts.
  t = await startTestServer({ webhooks: { retry_schedule: ['20ms'], timeout: '2s', allow_insecure_targets: true } });
  hook = await startReceiver(500);
  webhookId = (await t.api('POST', '/webhooks', { url: `${hook.url}/hook`, events: ['message.received'] })).body.id;
  const inbox = (await t.api('POST', '/inboxes', { address: 'ops', displayName: 'Ops agent' })).body;
  assert.equal(inbox.address, 'ops@agents.test');
  const transport = smtpTransport(t.server.smtpPort);
  try {
    await transport.sendMail({ from: 'Bob <bob@example.org>', to: 'ops@agents.test', subject: 'Disk almost full on db-1', text: 'Usage is at 93%.' });
  } finally {
    transport.close();
  }
  // One delivery of two attempts, both failed (an attempt a retry followed is failed too).
  await until('two failed attempts', async () => ((await deliveries('failed')).length === 2 ? true : undefined));
});

after(async () => {
  await t?.close();
  await hook?.close();
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

  test('the script is one asset that parses, in ASCII (build/build.ts: the bundle must be ASCII)', async () => {
    const js = await (await fetch(`${t.url}/dashboard/app.js`)).text();
    assert.doesNotThrow(() => new Script(js, { filename: 'app.js' }));
    assert.equal(js.search(/[^\x00-\x7f]/), -1, 'a non-ASCII character: write it as a \\u escape');
    // Untrusted text goes in with textContent; the script never parses HTML.
    assert.doesNotMatch(js, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
  });

  test('the page, script, stylesheet and icon are built from src/http/dashboard/client (the script from TypeScript); the script defines no global; the executable carries them', async () => {
    const files = await bundleDashboard();
    const served = async (path: string) => (await fetch(t.url + path)).text();
    assert.deepEqual({ html: await served('/dashboard'), js: await served('/dashboard/app.js'), css: await served('/dashboard/app.css'), icon: await served('/dashboard/favicon.svg') }, files);
    assert.match(files.css, /\.thread-pane/);
    // Run with only what it touches before the page has loaded: it adds nothing to the page's globals.
    const listening: string[] = [];
    const context = createContext({ document: { addEventListener: (type: string) => listening.push(type) } });
    new Script(files.js).runInContext(context);
    assert.deepEqual(listening, ['DOMContentLoaded']);
    assert.deepEqual(Object.keys(context), ['document']);
    // build/build.ts: the executable's bundle.ts hands out the files made at build time, without esbuild or a file read.
    const entry = "import { dashboardFiles } from './src/http/dashboard/bundle.ts'; module.exports = dashboardFiles();";
    const built = await build({
      stdin: { contents: entry, resolveDir: join(import.meta.dirname, '..', '..'), loader: 'ts' },
      bundle: true,
      platform: 'node',
      format: 'cjs',
      write: false,
      plugins: [bundledDashboard(files)],
    });
    const code = built.outputFiles[0].text;
    assert.doesNotMatch(code, /esbuild|readFileSync/);
    const mod = { exports: undefined as unknown };
    new Script(`(function (module) {${code}\n})`).runInThisContext()(mod);
    assert.deepEqual(await mod.exports, files);
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
    const readOnly = await createApiKey(t.server.ctx, t.accountId, { name: 'viewer', readOnly: true });
    expectError(await t.api('POST', `/dashboard/api/deliveries/${failed.id}/replay`, undefined, { key: readOnly.key }), 403, 'FORBIDDEN');
    const other = await t.newAccount('other');
    expectError(await t.api('POST', `/dashboard/api/deliveries/${failed.id}/replay`, undefined, { key: other.key }), 404, 'NOT_FOUND');
    expectError(await t.api('POST', '/dashboard/api/deliveries/dlv_unknown/replay'), 404, 'NOT_FOUND');
    // A pending attempt (its retry still scheduled) is refused: test/e2e/webhooks.test.ts.
    assert.deepEqual(await deliveries('pending'), [], 'no attempt stays pending once its job ended');
  });
});
