// Send budgets and inbox settings (PRODUCT.md "Inbox settings", "Outbound policy" → Budgets;
// issue 29): PATCH /inboxes/{id} sets the display name and the send policy (scope `manage`, an
// `inbox.updated` audit entry); `hourlySendLimit` per inbox and `[limits] account_daily_send_limit`
// refuse a send with 429 over the API, MCP send_message and at the end of DATA over SMTP
// submission (451 4.7.1), and a scheduled send at its time; a suspension or a lowered limit set
// by the CLI stays with the address when the inbox is deleted and created again. On both engines.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Clock } from '../../src/context.ts';
import type { JobRunner } from '../../src/jobs/runner.ts';
import { runCli } from '../support/cli.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

const MINUTE = 60_000;
// The server's clock starts 10 minutes into a UTC hour and runs with the real one, plus
// `offset`: a scheduled send two minutes ahead falls in the same clock hour as a send now.
const start = Date.now();
const base = Math.floor(start / (60 * MINUTE)) * 60 * MINUTE + 10 * MINUTE;
let offset = 0;
const clock: Clock = { now: () => new Date(base + (Date.now() - start) + offset) };

let t: TestServer;

before(async () => {
  t = await startTestServer({ submission: { listen: '127.0.0.1:0' }, limits: { account_daily_send_limit: 20, requests_per_minute: 100000 } }, { clock });
});

after(async () => {
  await t?.close();
});

/** Runs the CLI against the test server's data; answers its result (exit code, output). */
const runOn = (...args: string[]) => {
  const config = join(t.dataDir, 'cli.toml');
  writeFileSync(config, `data_dir = ${JSON.stringify(t.dataDir)}\nhostname = "mx.test.localhost"\nshared_domain = "agents.test"\n`);
  return runCli(['--config', config, ...args]);
};
const cli = async (...args: string[]) => {
  const res = await runOn(...args);
  assert.equal(res.code, 0, res.stderr);
  return res.stdout;
};

const send = (inboxId: string, to: string[], extra: Record<string, unknown> = {}) => t.api('POST', `/inboxes/${inboxId}/messages`, { to, subject: 'budget', bodyText: 'x', ...extra });

describe('inbox settings', () => {
  test('PATCH sets displayName and sendPolicy, shown on the inbox, with one inbox.updated audit entry', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'settings' })).body;
    assert.deepEqual(inbox.sendPolicy, { approval: 'none', hourlySendLimit: null });
    const res = await t.api('PATCH', `/inboxes/${inbox.id}`, { displayName: 'Settings agent', sendPolicy: { approval: 'first_contact', hourlySendLimit: 5 } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.displayName, 'Settings agent');
    assert.deepEqual(res.body.sendPolicy, { approval: 'first_contact', hourlySendLimit: 5 });
    assert.deepEqual((await t.api('GET', `/inboxes/${inbox.id}`)).body.sendPolicy, { approval: 'first_contact', hourlySendLimit: 5 });
    // Omitted fields of sendPolicy take their defaults.
    assert.deepEqual((await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { approval: 'always' } })).body.sendPolicy, { approval: 'always', hourlySendLimit: null });

    const reviewer = (await t.api('POST', '/account/api-keys', { name: 'person', scopes: ['read', 'review'] })).body.key;
    const entries = (await t.api('GET', `/audit?action=inbox.updated`, undefined, { key: reviewer })).body.data;
    assert.deepEqual(
      entries.map((e: any) => [e.target, e.actor, e.detail]),
      [
        [inbox.id, { type: 'key', id: t.keyId }, { approval: 'always', hourlySendLimit: null }],
        [inbox.id, { type: 'key', id: t.keyId }, { displayName: 'Settings agent', approval: 'first_contact', hourlySendLimit: 5 }],
      ],
    );
  });

  test('refused: a send-only key (403 INSUFFICIENT_SCOPE), screening, a bad approval or limit (400 VALIDATION_ERROR), another account (404)', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'guarded' })).body;
    const sender = (await t.api('POST', '/account/api-keys', { name: 'agent', scopes: ['read', 'send'] })).body.key;
    expectError(await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { hourlySendLimit: null } }, { key: sender }), 403, 'INSUFFICIENT_SCOPE');
    const screening = await t.api('PATCH', `/inboxes/${inbox.id}`, { screening: 'loud' });
    expectError(screening, 400, 'VALIDATION_ERROR');
    assert.match(screening.body.error.message, /screening/);
    expectError(await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { approval: 'sometimes' } }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { hourlySendLimit: -1 } }), 400, 'VALIDATION_ERROR');
    expectError(await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { hourlySendLimit: 1.5 } }), 400, 'VALIDATION_ERROR');
    const other = await t.newAccount('other');
    expectError(await t.api('PATCH', `/inboxes/${inbox.id}`, { displayName: 'x' }, { key: other.key }), 404, 'INBOX_NOT_FOUND');
    assert.deepEqual((await t.api('GET', `/inboxes/${inbox.id}`)).body.sendPolicy, { approval: 'none', hourlySendLimit: null });
  });
});

describe('hourly send limit', () => {
  test('API: one count per send whatever its recipients; the next is 429 HOURLY_SEND_LIMIT_EXCEEDED', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'hourly' })).body;
    assert.equal((await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { hourlySendLimit: 2 } })).status, 200);
    assert.equal((await send(inbox.id, ['a@remote.test', 'b@remote.test', 'c@remote.test'])).status, 202);
    assert.equal((await send(inbox.id, ['d@remote.test'])).status, 202);
    const over = await send(inbox.id, ['e@remote.test']);
    expectError(over, 429, 'HOURLY_SEND_LIMIT_EXCEEDED');
    assert.match(over.body.error.message, /hourly send limit of 2/);
    // MCP send_message meets the same check.
    const client = new Client({ name: 'budgets-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${t.key}` } } }));
    try {
      const res = (await client.callTool({ name: 'send_message', arguments: { inboxId: inbox.id, to: ['f@remote.test'], subject: 's', bodyText: 'x' } })) as CallToolResult;
      assert.equal(res.isError, true);
      const error = (res.structuredContent as { error: { code: string; status: number } }).error;
      assert.deepEqual([error.code, error.status], ['HOURLY_SEND_LIMIT_EXCEEDED', 429]);
    } finally {
      await client.close();
    }
    // Lifting it lets the inbox send again.
    assert.equal((await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { hourlySendLimit: null } })).status, 200);
    assert.equal((await send(inbox.id, ['g@remote.test'])).status, 202);
    await t.api('DELETE', `/inboxes/${inbox.id}`);
  });

  test('SMTP submission: 451 4.7.1 at the end of DATA when reached during the transaction, then at MAIL FROM; nothing is stored', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'hourly-smtp' })).body;
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: t.server.submissionPort, secure: false, ignoreTLS: true, auth: { user: inbox.address, pass: t.key } });
    try {
      await transport.sendMail({ from: inbox.address, to: 'one@remote.test', subject: 'one', text: 'x' });
      // The limit set between RCPT and DATA: the count in the send's transaction refuses it.
      const { client } = await SmtpClient.open(t.server.submissionPort);
      assert.equal((await client.cmd('EHLO client.test')).code, 250);
      assert.equal((await client.cmd(`AUTH PLAIN ${Buffer.from(`\0${inbox.address}\0${t.key}`).toString('base64')}`)).code, 235);
      assert.equal((await client.cmd(`MAIL FROM:<${inbox.address}>`)).code, 250);
      assert.equal((await client.cmd('RCPT TO:<two@remote.test>')).code, 250);
      assert.equal((await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { hourlySendLimit: 1 } })).status, 200);
      const r = await client.data(Buffer.from(`From: ${inbox.address}\r\nTo: two@remote.test\r\nSubject: two\r\n\r\nover the limit\r\n`));
      assert.equal(r.code, 451);
      assert.match(r.text, /^4\.7\.1 inbox .* reached its hourly send limit of 1/);
      await client.quit();
      // The count reached, the next transaction is refused at MAIL FROM, before any data.
      await assert.rejects(transport.sendMail({ from: inbox.address, to: 'three@remote.test', subject: 'three', text: 'x' }), (err: any) => {
        assert.deepEqual([err.responseCode, err.command], [451, 'MAIL FROM']);
        assert.match(err.response, /4\.7\.1 inbox .* reached its hourly send limit of 1/);
        return true;
      });
    } finally {
      transport.close();
    }
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages`)).body.data.length, 1);
    await t.api('DELETE', `/inboxes/${inbox.id}`);
  });

  test('a scheduled send is checked at its time: released over the limit, it fails and says why', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'hourly-later' })).body;
    assert.equal((await t.api('PATCH', `/inboxes/${inbox.id}`, { sendPolicy: { hourlySendLimit: 1 } })).status, 200);
    const sendAt = new Date(clock.now().getTime() + 2 * MINUTE).toISOString();
    const later = await send(inbox.id, ['later@remote.test'], { sendAt });
    assert.equal(later.status, 202, later.text);
    assert.equal(later.body.status, 'scheduled');
    assert.equal((await send(inbox.id, ['now@remote.test'])).status, 202);
    offset += 3 * MINUTE;
    (t.server.services.find((s) => s.name === 'jobs') as unknown as JobRunner).wake();
    const failed = await until('scheduled send failed', async () => {
      const m = (await t.api('GET', `/messages/${later.body.id}`)).body;
      return m.status === 'failed' ? m : undefined;
    });
    assert.match(failed.recipients[0].response, /^not sent at the send time: inbox .* reached its hourly send limit of 1/);
    await t.api('DELETE', `/inboxes/${inbox.id}`);
  });
});

describe('account daily send limit', () => {
  test('all inboxes together: the next send is 429 DAILY_SEND_LIMIT_EXCEEDED naming the account limit, and deleting inboxes does not reset it', async () => {
    const other = await t.newAccount('senders');
    const api = (method: string, path: string, body?: unknown) => t.api(method, path, body, { key: other.key });
    const one = (await api('POST', '/inboxes', { address: 'daily-one' })).body;
    for (let i = 0; i < 10; i++) assert.equal((await api('POST', `/inboxes/${one.id}/messages`, { to: [`r${i}@remote.test`], subject: 's', bodyText: 'x' })).status, 202);
    assert.equal((await api('DELETE', `/inboxes/${one.id}`)).status, 204);
    const two = (await api('POST', '/inboxes', { address: 'daily-two' })).body;
    for (let i = 0; i < 10; i++) assert.equal((await api('POST', `/inboxes/${two.id}/messages`, { to: [`s${i}@remote.test`], subject: 's', bodyText: 'x' })).status, 202);
    const over = await api('POST', `/inboxes/${two.id}/messages`, { to: ['over@remote.test'], subject: 's', bodyText: 'x' });
    expectError(over, 429, 'DAILY_SEND_LIMIT_EXCEEDED');
    assert.match(over.body.error.message, /account reached its daily send limit of 20 \(limits\.account_daily_send_limit\)/);
    // The inbox's own counter was not advanced by the refused send.
    assert.equal((await api('GET', `/inboxes/${two.id}`)).body.sendsToday, 10);
  });
});

describe('mailroom accounts set-limits', () => {
  test("the account's own daily send budget and inbox count replace the config's, with an account.limits_set audit entry", async () => {
    const acc = await t.newAccount('small');
    const api = (method: string, path: string, body?: unknown) => t.api(method, path, body, { key: acc.key });
    const bad = await runOn('accounts', 'set-limits', acc.accountId, '--daily', 'lots');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /VALIDATION_ERROR.*--daily/);
    const printed = JSON.parse(await cli('accounts', 'set-limits', acc.accountId, '--daily', '1', '--inboxes', '1', '--json'));
    assert.deepEqual([printed.id, printed.dailySendLimit, printed.inboxLimit], [acc.accountId, 1, 1]);
    const inbox = (await api('POST', '/inboxes', { address: 'small-one' })).body;
    expectError(await api('POST', '/inboxes', { address: 'small-two' }), 403, 'INBOX_LIMIT_REACHED');
    assert.equal((await api('POST', `/inboxes/${inbox.id}/messages`, { to: ['a@remote.test'], subject: 's', bodyText: 'x' })).status, 202);
    const over = await api('POST', `/inboxes/${inbox.id}/messages`, { to: ['b@remote.test'], subject: 's', bodyText: 'x' });
    expectError(over, 429, 'DAILY_SEND_LIMIT_EXCEEDED');
    assert.match(over.body.error.message, /account reached its daily send limit of 1 \(its own, set by support\)/);
    const [entry] = (await api('GET', '/audit?action=account.limits_set')).body.data;
    assert.deepEqual([entry.actor, entry.target, entry.detail], [{ type: 'cli' }, acc.accountId, { dailySendLimit: 1, inboxLimit: 1 }]);
    const missing = await runOn('accounts', 'set-limits', 'acc_nope', '--daily', '5');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /not found/);
  });
});

describe('support actions stay with the address', () => {
  test('suspended and a lowered daily limit by the CLI; deleted and created again, the inbox is still suspended (403 INBOX_SUSPENDED) with that limit', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'Naughty' })).body;
    await cli('inboxes', 'set-limit', inbox.address, '3');
    await cli('inboxes', 'suspend', inbox.address);
    assert.equal((await t.api('DELETE', `/inboxes/${inbox.id}`)).status, 204);
    const again = await t.api('POST', '/inboxes', { address: 'NAUGHTY' });
    assert.equal(again.status, 201, again.text);
    assert.deepEqual([again.body.status, again.body.dailySendLimit], ['suspended', 3]);
    expectError(await send(again.body.id, ['x@remote.test']), 403, 'INBOX_SUSPENDED');
    // Unsuspended by support, the address is active again the next time too.
    await cli('inboxes', 'unsuspend', again.body.address);
    assert.equal((await t.api('DELETE', `/inboxes/${again.body.id}`)).status, 204);
    const third = (await t.api('POST', '/inboxes', { address: 'naughty' })).body;
    assert.deepEqual([third.status, third.dailySendLimit], ['active', 3]);
    assert.equal((await send(third.id, ['x@remote.test'])).status, 202);
  });
});
