// The suppression list end to end (PRODUCT.md "Outbound policy"): the /suppressions API (exact
// statuses and codes, lowercase, duplicates answered unchanged, pagination, the address filter,
// other accounts, read-only keys); entries added by a real hard bounce (the capturing MX answers
// 550 at RCPT), by a DSN and by an ARF complaint at the per-recipient bounce address; every
// sending path against a suppressed address (API send, reply, forward, draft send, scheduled send
// at its time, SMTP submission, MCP): refused with 422 RECIPIENTS_SUPPRESSED (550 5.7.1 in SMTP)
// and nothing stored, or, with other recipients left, the suppressed one `suppressed` and never
// attempted; and `mailroom suppressions list|add|remove`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Clock } from '../../src/context.ts';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import type { JobRunner } from '../../src/jobs/runner.ts';
import { rawRows } from '../../src/store/store.ts';
import { runCli } from '../support/cli.ts';
import { deliverMail } from '../support/mail.ts';
import { startOutboundRig, type OutboundRig } from '../support/outbound.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { expectError, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

let rig: OutboundRig;
let t: TestServer;
let inbox: { id: string; address: string };
/** The server's clock runs this far ahead of the real one (a scheduled send is made due by moving it). */
let offset = 0;
const clock: Clock = { now: () => new Date(Date.now() + offset) };

before(async () => {
  rig = await startOutboundRig();
  t = await rig.start({ clock, overrides: { submission: { listen: '127.0.0.1:0' } } });
  inbox = (await t.api('POST', '/inboxes', { address: 'sender' })).body;
});

after(async () => {
  await t?.close();
  await rig?.close();
});

const suppress = async (address: string) => assert.equal((await t.api('POST', '/suppressions', { address })).status, 201);
const entryOf = async (address: string) => (await t.api('GET', `/suppressions?address=${encodeURIComponent(address)}`)).body.data[0];
const messageCount = async (): Promise<number> => Number((await rawRows<[number]>(t.server.ctx.db, 'SELECT count(*) FROM messages'))[0]?.[0]);
const message = async (id: string) => (await t.api('GET', `/messages/${id}`)).body;
const reaches = (id: string, status: string) =>
  until(`${id} ${status}`, async () => {
    const m = await message(id);
    return m.status === status ? m : undefined;
  });
const recipient = (m: { recipients: Array<{ address: string; status: string; response: string | null }> }, address: string) => m.recipients.find((r) => r.address.toLowerCase() === address)!;

/** The 422 every path answers when no recipient is left; nothing stored. */
async function refusedEverywhere(res: { status: number; body: any; text: string }, address: string) {
  expectError(res as never, 422, 'RECIPIENTS_SUPPRESSED');
  assert.match(res.body.error.message, new RegExp(address.replace(/[.]/g, '\\.')));
}

describe('the /suppressions API', () => {
  test('add (lowercase; again: 200 unchanged), list newest first with pagination and the address filter, remove (204, then 404)', async () => {
    const first = await t.api('POST', '/suppressions', { address: '  First@Example.ORG ' });
    assert.equal(first.status, 201, first.text);
    assert.deepEqual(Object.keys(first.body).sort(), ['address', 'createdAt', 'reason']);
    assert.deepEqual([first.body.address, first.body.reason], ['first@example.org', 'manual']);
    const again = await t.api('POST', '/suppressions', { address: 'FIRST@example.org' });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body, first.body);
    offset += 1000; // a later createdAt
    await suppress('second@example.org');
    offset -= 1000;

    const all = (await t.api('GET', '/suppressions')).body;
    assert.deepEqual([all.total, all.limit, all.offset], [2, 20, 0]);
    assert.deepEqual(
      all.data.map((e: any) => e.address),
      ['second@example.org', 'first@example.org'],
    );
    const page = (await t.api('GET', '/suppressions?limit=1&offset=1')).body;
    assert.deepEqual([page.total, page.data.map((e: any) => e.address)], [2, ['first@example.org']]);
    const one = (await t.api('GET', '/suppressions?address=First%40EXAMPLE.org')).body;
    assert.deepEqual([one.total, one.data], [1, [first.body]]);
    assert.deepEqual((await t.api('GET', '/suppressions?address=nobody%40example.org')).body.data, []);

    assert.equal((await t.api('DELETE', '/suppressions/FIRST%40Example.org')).status, 204);
    expectError(await t.api('DELETE', '/suppressions/first%40example.org'), 404, 'SUPPRESSION_NOT_FOUND');
    assert.equal((await t.api('DELETE', '/suppressions/second@example.org')).status, 204);
    assert.equal((await t.api('GET', '/suppressions')).body.total, 0);
  });

  test('bad input: 400 VALIDATION_ERROR naming the field; limit past 100 refused', async () => {
    for (const body of [{}, { address: 'a@b.example', reason: 'bounce' }, { address: 42 }]) expectError(await t.api('POST', '/suppressions', body), 400, 'VALIDATION_ERROR');
    // Not an address: 400 INVALID_ADDRESS naming the field, as on a send.
    const bad = await t.api('POST', '/suppressions', { address: 'not an address' });
    expectError(bad, 400, 'INVALID_ADDRESS');
    assert.match(bad.body.error.message, /`address`/);
    expectError(await t.api('GET', '/suppressions?limit=101'), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/suppressions?address=bad'), 400, 'INVALID_ADDRESS');
    // In the path it names an entry: one that is no address is on no list.
    expectError(await t.api('DELETE', '/suppressions/bad'), 404, 'SUPPRESSION_NOT_FOUND');
    assert.equal((await t.api('GET', '/suppressions')).body.total, 0);
  });

  test('another account has its own list; a read-only key reads it and gets 403 FORBIDDEN on add and remove', async () => {
    await suppress('mine@example.org');
    const other = await t.newAccount('other-suppressions');
    assert.equal((await t.api('GET', '/suppressions', undefined, { key: other.key })).body.total, 0);
    expectError(await t.api('DELETE', '/suppressions/mine%40example.org', undefined, { key: other.key }), 404, 'SUPPRESSION_NOT_FOUND');
    const ro = (await createApiKey(t.server.ctx, t.accountId, { name: 'reader', readOnly: true })).key;
    assert.equal((await t.api('GET', '/suppressions', undefined, { key: ro })).body.total, 1);
    expectError(await t.api('POST', '/suppressions', { address: 'x@example.org' }, { key: ro }), 403, 'FORBIDDEN');
    expectError(await t.api('DELETE', '/suppressions/mine%40example.org', undefined, { key: ro }), 403, 'FORBIDDEN');
    assert.equal((await t.api('DELETE', '/suppressions/mine%40example.org')).status, 204);
  });
});

describe('filled automatically', () => {
  test('a hard bounce at RCPT (550): reason bounce with the message, in the transaction that records it; the next send is refused', async () => {
    rig.mx.script('hard@remote.test', '550');
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['Hard@Remote.test'], subject: 'first', bodyText: 'hi' });
    assert.equal(res.status, 202, res.text);
    const m = await reaches(res.body.id, 'bounced');
    assert.equal(recipient(m, 'hard@remote.test').status, 'bounced');
    const entry = await entryOf('hard@remote.test');
    assert.deepEqual({ ...entry, createdAt: undefined }, { address: 'hard@remote.test', reason: 'bounce', messageId: res.body.id, createdAt: undefined });
    await refusedEverywhere(await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['hard@remote.test'], subject: 'again', bodyText: 'hi' }), 'hard@remote.test');
    // A deferral (451) is no bounce: nothing suppressed.
    rig.mx.script('soft@remote.test', ['451', '250']);
    const soft = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['soft@remote.test'], subject: 'soft', bodyText: 'hi' });
    await reaches(soft.body.id, 'sent');
    assert.equal(await entryOf('soft@remote.test'), undefined);
  });

  /** Sends to `rcpt`, then answers with the report `file` at the recipient's bounce address. */
  async function report(rcpt: string, file: string, mailFrom: string) {
    const before = rig.mx.messages.length;
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: [rcpt], subject: 'original', bodyText: 'hi' });
    await reaches(res.body.id, 'sent');
    const bounceTo = (await rig.mx.waitFor(before + 1)).slice(before).find((c) => c.rcptTo[0] === rcpt)!.mailFrom;
    const raw = readFileSync(new URL(`../fixtures/reports/${file}`, import.meta.url), 'utf8')
      .replaceAll('{{TO}}', bounceTo)
      .replaceAll('{{RCPT_LOCAL}}', rcpt.split('@')[0])
      .replaceAll('{{RCPT}}', rcpt)
      .replaceAll('{{MSGID}}', res.body.messageIdHeader)
      .replaceAll('{{ENVID}}', res.body.id)
      .replace(/\r?\n/g, '\r\n');
    const { client } = await SmtpClient.open(t.server.smtpPort);
    try {
      assert.equal((await client.cmd('EHLO mx.remote.test')).code, 250);
      const reply = await client.send(mailFrom, [bounceTo], Buffer.from(raw));
      assert.equal(reply.code, 250, reply.text);
    } finally {
      await client.quit();
    }
    return res.body.id as string;
  }

  test('a DSN (5.1.1) at the bounce address: reason bounce', async () => {
    const id = await report('dsn-gone@remote.test', 'postfix-dsn.eml', '');
    assert.equal((await message(id)).status, 'bounced');
    assert.deepEqual([(await entryOf('dsn-gone@remote.test'))?.reason, (await entryOf('dsn-gone@remote.test'))?.messageId], ['bounce', id]);
  });

  test('an ARF complaint: reason complaint', async () => {
    const id = await report('angry@remote.test', 'arf-attached.eml', 'fbl@remote.test');
    assert.equal((await message(id)).status, 'complained');
    assert.deepEqual([(await entryOf('angry@remote.test'))?.reason, (await entryOf('angry@remote.test'))?.messageId], ['complaint', id]);
  });

  test('a manual entry stays manual when the address bounces later; deleting the message keeps the entry without messageId', async () => {
    rig.mx.script('kept@remote.test', '550');
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['kept@remote.test'], subject: 's', bodyText: 'hi' });
    await reaches(res.body.id, 'bounced');
    assert.equal((await entryOf('kept@remote.test')).messageId, res.body.id);
    assert.equal((await t.api('DELETE', `/messages/${res.body.id}`)).status, 204);
    assert.deepEqual(Object.keys(await entryOf('kept@remote.test')).sort(), ['address', 'createdAt', 'reason']);
  });
});

describe('every sending path honours the list', () => {
  const blocked = 'blocked@remote.test';
  let original: string;

  before(async () => {
    await suppress('Blocked@Remote.TEST');
    // Mail from the suppressed address still arrives (the list is about sending): something to reply to and forward.
    await deliverMail(t.server.smtpPort, { from: blocked, to: inbox.address, subject: 'question', text: 'hello?' });
    original = (await until('the inbound message', async () => (await t.api('GET', `/inboxes/${inbox.id}/messages?status=received`)).body.data.find((m: any) => m.subject === 'question'))).id;
  });

  test('API send, reply, forward, draft send and a scheduled send to the suppressed address alone: 422 RECIPIENTS_SUPPRESSED naming it, nothing stored', async () => {
    const stored = await messageCount();
    await refusedEverywhere(await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['BLOCKED@remote.test'], subject: 's', bodyText: 'x' }), blocked);
    await refusedEverywhere(await t.api('POST', `/messages/${original}/reply`, { bodyText: 'answer' }), blocked);
    await refusedEverywhere(await t.api('POST', `/messages/${original}/forward`, { to: [blocked], bodyText: 'fyi' }), blocked);
    await refusedEverywhere(
      await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: [blocked], subject: 's', bodyText: 'x', sendAt: new Date(clock.now().getTime() + 3_600_000).toISOString() }),
      blocked,
    );
    const draft = (await t.api('POST', `/inboxes/${inbox.id}/drafts`, { to: [blocked], subject: 'draft', bodyText: 'x' })).body;
    await refusedEverywhere(await t.api('POST', `/drafts/${draft.id}/send`, {}), blocked);
    // The refused draft is kept as it was.
    assert.equal((await t.api('GET', `/drafts/${draft.id}`)).status, 200);
    assert.equal(await messageCount(), stored);
    assert.equal(rig.mx.attempts(blocked), 0);
  });

  test('with another recipient left: the suppressed one is `suppressed` and never attempted, the message goes to the rest', async () => {
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['fine@remote.test'], cc: [blocked], subject: 's', bodyText: 'x' });
    assert.equal(res.status, 202, res.text);
    assert.equal(recipient(res.body, blocked).status, 'suppressed');
    const m = await reaches(res.body.id, 'sent');
    assert.equal(recipient(m, blocked).status, 'suppressed');
    assert.match(recipient(m, blocked).response!, /suppression list/);
    assert.equal(recipient(m, 'fine@remote.test').status, 'sent');
    const forward = await t.api('POST', `/messages/${original}/forward`, { to: ['fine2@remote.test', 'Blocked@remote.test'], bodyText: 'fyi' });
    assert.equal(forward.status, 202, forward.text);
    assert.equal(recipient(await reaches(forward.body.id, 'sent'), blocked).status, 'suppressed');
    assert.equal(rig.mx.attempts(blocked), 0);
  });

  test('a scheduled send whose recipient is suppressed before its time: at the time it ends failed, the recipient suppressed, nothing sent', async () => {
    const later = 'later@remote.test';
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: [later], subject: 'scheduled', bodyText: 'x', sendAt: new Date(clock.now().getTime() + 60_000).toISOString() });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.status, 'scheduled');
    await suppress(later);
    offset += 120_000;
    (t.server.services.find((s) => s.name === 'jobs') as unknown as JobRunner).wake();
    const m = await reaches(res.body.id, 'failed');
    assert.deepEqual([recipient(m, later).status, recipient(m, later).response], ['suppressed', 'not attempted: the address is on the suppression list of this account (GET /suppressions)']);
    assert.equal(rig.mx.attempts(later), 0);
  });

  test('SMTP submission: 550 5.7.1 naming the address at RCPT, or at the end of DATA when it was suppressed meanwhile', async () => {
    const { client } = await SmtpClient.open(t.server.submissionPort);
    try {
      assert.equal((await client.cmd('EHLO client.test')).code, 250);
      assert.equal((await client.cmd(`AUTH PLAIN ${Buffer.from(`\0${inbox.address}\0${t.key}`).toString('base64')}`)).code, 235);
      assert.equal((await client.cmd(`MAIL FROM:<${inbox.address}>`)).code, 250);
      const refused = await client.cmd('RCPT TO:<Blocked@Remote.test>');
      assert.equal(refused.code, 550);
      assert.match(refused.text, /^5\.7\.1 .*blocked@remote\.test/);
      assert.equal((await client.cmd('RCPT TO:<fine3@remote.test>')).code, 250);
      // Suppressed between RCPT and the end of DATA: the check when the message is stored refuses it, 550 5.7.1 naming it.
      await suppress('fine3@remote.test');
      const stored = await messageCount();
      const end = await client.data(Buffer.from(`From: ${inbox.address}\r\nTo: fine3@remote.test\r\nSubject: raced\r\n\r\nhello\r\n`));
      assert.equal(end.code, 550, end.text);
      assert.match(end.text, /^5\.7\.1 .*fine3@remote\.test/);
      assert.equal(await messageCount(), stored);
    } finally {
      await client.quit();
    }
  });

  test('MCP send_message: the same 422 as a tool error', async () => {
    const client = new Client({ name: 'suppressions-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${t.key}` } } }));
    try {
      const res = (await client.callTool({ name: 'send_message', arguments: { inboxId: inbox.id, to: [blocked], subject: 's', bodyText: 'x' } })) as CallToolResult;
      assert.equal(res.isError, true);
      const error = (res.structuredContent as { error: { code: string; status: number; message: string } }).error;
      assert.deepEqual([error.code, error.status], ['RECIPIENTS_SUPPRESSED', 422]);
      assert.match(error.message, /blocked@remote\.test/);
    } finally {
      await client.close();
    }
  });
});

test('mailroom suppressions add|list|remove', async () => {
  const config = join(t.config.data_dir, 'cli-suppressions.toml');
  writeFileSync(config, `data_dir = ${JSON.stringify(t.config.data_dir)}\nshared_domain = "agents.test"\n`);
  const add = await runCli(['suppressions', 'add', 'CLI@Example.org', '--account', t.accountId, '--json', '--config', config]);
  assert.equal(add.code, 0, add.stderr);
  assert.deepEqual([JSON.parse(add.stdout).address, JSON.parse(add.stdout).reason], ['cli@example.org', 'manual']);
  // The server sees it at once.
  assert.equal((await entryOf('cli@example.org')).reason, 'manual');
  const list = await runCli(['suppressions', 'list', '--account', t.accountId, '--address', 'cli@example.org', '--json', '--config', config]);
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(
    JSON.parse(list.stdout).data.map((e: any) => e.address),
    ['cli@example.org'],
  );
  const remove = await runCli(['suppressions', 'remove', 'cli@example.org', '--account', t.accountId, '--config', config]);
  assert.equal(remove.code, 0, remove.stderr);
  assert.equal(await entryOf('cli@example.org'), undefined);
  const again = await runCli(['suppressions', 'remove', 'cli@example.org', '--account', t.accountId, '--config', config]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /cli@example\.org is not on the suppression list/);
  const bad = await runCli(['suppressions', 'add', 'x@example.org', '--account', 'acc_nope', '--config', config]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /account acc_nope not found/);
});
