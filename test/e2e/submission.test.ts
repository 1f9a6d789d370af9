// SMTP submission end to end (PRODUCT.md "SMTP submission"): nodemailer (STARTTLS with the
// test's self-signed certificate from a non-loopback address, and plain AUTH on loopback) and
// swaks (`--auth --tls`) log in with an inbox address and an API key; each message goes through
// the send pipeline and arrives DKIM-signed at a capturing MX, and shows through the API as an
// outbound Message of that inbox. Every refusal is checked with its exact reply: AUTH before
// STARTTLS, bad keys of every kind, the per-address cool-down after failed logins, MAIL FROM
// of another address, no AUTH at all, a suspended inbox and the daily limit.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { simpleParser, type AddressObject } from 'mailparser';
import nodemailer from 'nodemailer';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { createResolver } from '../../src/dns.ts';
import { createApiKey, revokeApiKey } from '../../src/domain/accounts/apikeys.ts';
import { dkimTxtValue, publishedKeyFor } from '../../src/domain/domains/dkim-keys.ts';
import { setDailyLimit, suspendInbox, unsuspendInbox } from '../../src/domain/inboxes/inboxes.ts';
import { renderMetrics } from '../../src/metrics.ts';
import { describeStartup, renderStartup } from '../../src/startup.ts';
import { AUTH_COOL_DOWN_MS, MAX_AUTH_FAILURES } from '../../src/smtp/auth-failures.ts';
import { startTestDns, type TestDns, type TestRecord } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { runCli } from '../support/cli.ts';
import { rawRun } from '../../src/store/store.ts';
import { peerSkip, toolMissing } from '../support/peers.ts';

const NO_OPENSSL = peerSkip(toolMissing('openssl', ['version'], 'openssl'));
const NO_SWAKS = peerSkip(toolMissing('swaks', ['--version'], 'swaks'));
const HAVE_OPENSSL = !NO_OPENSSL;
/** This machine's non-loopback address (192.0.2.2 in the test VM), or undefined. */
const EXTERNAL = Object.values(networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

let t: TestServer;
let dns: TestDns;
let mx: TestMx;
let dir: string;
let cert: string;
let inbox: { id: string; address: string };
/** Added to the server's clock (the cool-down after failed logins is passed by moving it). */
let skew = 0;

const plain = (s: string) => Buffer.from(s).toString('base64');
const authPlain = (user: string, pass: string) => `AUTH PLAIN ${plain(`\0${user}\0${pass}`)}`;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mailroom-submission-'));
  cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  if (HAVE_OPENSSL) {
    const san = ['DNS:localhost', 'IP:127.0.0.1', ...(EXTERNAL ? [`IP:${EXTERNAL}`] : [])].join(',');
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost', '-addext', `subjectAltName=${san}`],
      { stdio: 'ignore' },
    );
  }
  dns = await startTestDns();
  mx = await startTestMx();
  t = await startTestServer(
    {
      smtp: HAVE_OPENSSL ? { tls_cert: cert, tls_key: key } : {},
      submission: { listen: '0.0.0.0:0' },
      outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['200ms'], timeout: '5s' },
      dns: { servers: [dns.server], timeout: '1s' },
    },
    { clock: { now: () => new Date(Date.now() + skew) } },
  );
  const res = await t.api('POST', '/inboxes', { address: 'agent', displayName: 'Agent Smith' });
  assert.equal(res.status, 201, res.text);
  inbox = res.body;
  // remote.test's MX is the capturing server; the shared domain's DKIM key is published.
  const dkim = (await publishedKeyFor(t.server.ctx, t.config.shared_domain))!;
  const zone: Record<string, TestRecord[]> = {
    'remote.test': [{ type: 'MX', exchange: 'mx.remote.test', priority: 10 }],
    'mx.remote.test': [{ type: 'A', address: '127.0.0.1' }],
    [`${dkim.selector}._domainkey.${t.config.shared_domain}`]: [{ type: 'TXT', value: dkimTxtValue(dkim.publicKey) }],
  };
  for (const [name, records] of Object.entries(zone)) dns.set(name, records);
});

after(async () => {
  for (const running of [t, mx, dns]) await running?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function waitForStatus(id: string, statuses: string[]) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const res = await t.api('GET', `/messages/${id}`);
    assert.equal(res.status, 200, res.text);
    if (statuses.includes(res.body.status)) return res.body;
    if (Date.now() > deadline) throw new Error(`message ${id} stayed ${res.body.status}: ${JSON.stringify(res.body.recipients)}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

/** The message id in a submission's 250 ("2.0.0 OK: queued as msg_…"). */
const queuedId = (response: string | undefined) => {
  const id = /queued as (msg_\S+)/.exec(response ?? '')?.[1];
  assert.ok(id, `no message id in ${response}`);
  return id;
};

/** Checks a captured message's DKIM signature against the key published in the test DNS. */
async function assertDkimPass(raw: Buffer) {
  const verdict = await dkimVerify(raw, { resolver: createResolver([dns.server], 1000).raw as never });
  assert.equal(verdict.results[0]?.status.result, 'pass', JSON.stringify(verdict.results));
  assert.equal(verdict.results[0].signingDomain, t.config.shared_domain);
}

const addressesOf = (field: AddressObject | AddressObject[] | undefined) => [field ?? []].flat().flatMap((a) => a.value.map((v) => v.address));

/** A line-level session on loopback (no TLS needed there), EHLO done. */
async function session(host = '127.0.0.1') {
  const { client, greeting } = await SmtpClient.open(t.server.submissionPort, host);
  assert.equal(greeting.code, 220);
  const ehlo = await client.cmd('EHLO client.test');
  assert.equal(ehlo.code, 250);
  return { client, ehlo };
}

async function loggedIn(key = t.key) {
  const s = await session();
  assert.deepEqual(await s.client.cmd(authPlain(inbox.address, key)), { code: 235, text: 'Authentication successful' });
  return s.client;
}

describe('sending through submission', () => {
  test(
    'nodemailer with STARTTLS from a non-loopback address: cc, bcc, an attachment and the Message-ID arrive DKIM-signed',
    { skip: NO_OPENSSL || (!EXTERNAL && 'needs a non-loopback address') },
    async () => {
      const transport = nodemailer.createTransport({
        host: EXTERNAL,
        port: t.server.submissionPort,
        secure: false,
        requireTLS: true,
        tls: { ca: readFileSync(cert) },
        auth: { user: inbox.address, pass: t.key },
      });
      const before = mx.messages.length;
      const info = await transport.sendMail({
        from: { name: 'Agent Smith', address: inbox.address },
        to: 'Alice Remote <alice@remote.test>',
        cc: 'carol@remote.test',
        bcc: 'hidden@remote.test',
        subject: 'Through port 587 ✓',
        text: 'Hello Alice,\nsent by a mail client.',
        html: '<p>Hello Alice, sent by a <b>mail client</b>.</p>',
        messageId: '<client-chosen.1@agents.test>',
        inReplyTo: '<earlier@remote.test>',
        attachments: [{ filename: 'notes.txt', content: 'attached notes\n', contentType: 'text/plain' }],
      });
      transport.close();
      assert.match(info.response, /^250 2\.0\.0 OK: queued as msg_/);
      const id = queuedId(info.response);

      const m = await waitForStatus(id, ['sent']);
      assert.equal(m.direction, 'outbound');
      assert.equal(m.inboxId, inbox.id);
      assert.equal(m.fromAddress, inbox.address);
      assert.equal(m.subject, 'Through port 587 ✓');
      assert.equal(m.messageIdHeader, '<client-chosen.1@agents.test>');
      assert.deepEqual(m.toAddresses, ['alice@remote.test']);
      assert.deepEqual(m.ccAddresses, ['carol@remote.test']);
      assert.deepEqual(m.bccAddresses, ['hidden@remote.test']);
      assert.equal(m.bodyText, 'Hello Alice,\nsent by a mail client.');
      assert.match(m.bodyHtml, /<b>mail client<\/b>/);
      assert.deepEqual(
        m.attachments.map((a: { filename: string; contentType: string; size: number }) => [a.filename, a.contentType, a.size]),
        [['notes.txt', 'text/plain', 15]],
      );
      assert.deepEqual(m.recipients.map((r: { address: string; status: string }) => [r.address, r.status]).sort(), [
        ['alice@remote.test', 'sent'],
        ['carol@remote.test', 'sent'],
        ['hidden@remote.test', 'sent'],
      ]);

      const captured = (await mx.waitFor(before + 3)).slice(before);
      assert.deepEqual(captured.flatMap((c) => c.rcptTo).sort(), ['alice@remote.test', 'carol@remote.test', 'hidden@remote.test']);
      const raw = captured[0].raw;
      assert.doesNotMatch(raw.toString(), /hidden@remote\.test|^bcc:/im);
      await assertDkimPass(raw);
      const parsed = await simpleParser(raw);
      assert.equal(parsed.messageId, '<client-chosen.1@agents.test>');
      assert.equal(parsed.inReplyTo, '<earlier@remote.test>');
      assert.deepEqual(addressesOf(parsed.from), [inbox.address]);
      assert.deepEqual(addressesOf(parsed.to), ['alice@remote.test']);
      assert.equal(parsed.attachments[0].content.toString(), 'attached notes\n');

      // The attachment downloads through the API like any other.
      const att = await t.api('GET', `/attachments/${m.attachments[0].id}`);
      assert.equal(att.status, 200, att.text);
      assert.equal(await (await fetch(att.body.url)).text(), 'attached notes\n');
      // The inbox counted the send, and the event of the send was recorded.
      assert.equal((await t.api('GET', `/inboxes/${inbox.id}`)).body.sendsToday >= 1, true);
      const events = await t.api('GET', `/events?types=message.sent`);
      assert.ok(
        events.body.data.some((e: { data: { id: string } }) => e.data.id === id),
        events.text,
      );
    },
  );

  test('nodemailer on loopback logs in without TLS; a message without a Message-ID gets one on the inbox domain', async () => {
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: t.server.submissionPort, secure: false, ignoreTLS: true, auth: { user: inbox.address.toUpperCase(), pass: t.key } });
    const raw = `From: ${inbox.address}\r\nTo: bob@remote.test\r\nSubject: no id\r\n\r\nplain body\r\n`;
    const before = mx.messages.length;
    const info = await transport.sendMail({ envelope: { from: inbox.address, to: ['bob@remote.test'] }, raw });
    transport.close();
    const id = queuedId(info.response);
    const m = await waitForStatus(id, ['sent']);
    assert.equal(m.messageIdHeader, `<${id}@${t.config.shared_domain}>`);
    assert.deepEqual(m.bccAddresses, []);
    const [captured] = (await mx.waitFor(before + 1)).slice(before);
    assert.equal((await simpleParser(captured.raw)).messageId, m.messageIdHeader);
    await assertDkimPass(captured.raw);
  });

  test('a 3 MB attachment: the source is composed past memory (STREAMED_SOURCE_BYTES), DKIM-signed over the whole body, the attachment byte-identical at the MX, no staged file left', async () => {
    const file = randomBytes(3 * 1024 * 1024 + 17);
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: t.server.submissionPort, secure: false, ignoreTLS: true, auth: { user: inbox.address, pass: t.key } });
    const before = mx.messages.length;
    const info = await transport.sendMail({
      from: inbox.address,
      to: 'bob@remote.test',
      subject: 'large',
      text: 'see the file',
      attachments: [{ filename: 'large.bin', content: file }],
    });
    transport.close();
    const m = await waitForStatus(queuedId(info.response), ['sent']);
    const [captured] = (await mx.waitFor(before + 1)).slice(before);
    await assertDkimPass(captured.raw);
    const parsed = await simpleParser(captured.raw);
    assert.equal(parsed.attachments[0].filename, 'large.bin');
    assert.ok(parsed.attachments[0].content.equals(file));
    // What went out is the stored source, signature included.
    const stored = await t.api('GET', `/messages/${m.id}/raw`);
    assert.equal(stored.status, 200);
    assert.ok(stored.text === captured.raw.toString('utf8'), 'the MX got the stored source');
    assert.deepEqual(readdirSync(join(t.dataDir, 'tmp')), []);
  });

  test('swaks --auth --tls sends a message that arrives DKIM-signed and shows as sent', { skip: NO_SWAKS || NO_OPENSSL || (!EXTERNAL && 'needs a non-loopback address') }, async () => {
    const before = mx.messages.length;
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        'swaks',
        [
          '--server',
          `${EXTERNAL}:${t.server.submissionPort}`,
          '--tls',
          '--auth',
          'LOGIN',
          '--auth-user',
          inbox.address,
          '--auth-password',
          t.key,
          '--from',
          inbox.address,
          '--to',
          'swaks@remote.test',
          '--header',
          'Subject: from swaks',
          '--body',
          'swaks body',
        ],
        (err, stdout) => (err ? reject(new Error(`${err.message}\n${stdout}`)) : resolve(stdout)),
      ),
    );
    // AUTH went over TLS (swaks marks the traffic inside TLS with ~).
    assert.match(out, /=== TLS started with cipher/);
    assert.match(out, /^ ~> AUTH LOGIN$/m);
    assert.match(out, /^<~  235 /m);
    const id = queuedId(/<~ +250 2\.0\.0 OK: queued as \S+/.exec(out)?.[0]);
    const m = await waitForStatus(id, ['sent']);
    assert.equal(m.subject, 'from swaks');
    assert.deepEqual(m.toAddresses, ['swaks@remote.test']);
    const [captured] = (await mx.waitFor(before + 1)).slice(before);
    await assertDkimPass(captured.raw);
    assert.equal((await simpleParser(captured.raw)).text?.trim(), 'swaks body');
  });
});

test('the start-up block shows the submission address (and no such line when it is off)', async () => {
  const bound = { httpUrl: t.url, smtpPort: t.server.smtpPort, submissionPort: t.server.submissionPort, metricsPort: 0, services: [] };
  const info = await describeStartup(t.server.ctx, bound, undefined);
  assert.equal(info.submission, `0.0.0.0:${t.server.submissionPort}`);
  assert.match(renderStartup(info), new RegExp(`^  submission  0\\.0\\.0\\.0:${t.server.submissionPort}$`, 'm'));
  const off = await describeStartup({ ...t.server.ctx, config: { ...t.server.ctx.config, submission: { listen: null } } }, bound, undefined);
  assert.equal(off.submission, 'off');
  assert.doesNotMatch(renderStartup(off), /submission/);
});

describe('refusals', () => {
  test('from a non-loopback address without TLS: EHLO offers STARTTLS but not AUTH, and AUTH is 538 5.7.11', { skip: !EXTERNAL && 'no non-loopback address' }, async () => {
    const { client, ehlo } = await session(EXTERNAL);
    assert.doesNotMatch(ehlo.text, /AUTH/);
    if (HAVE_OPENSSL) assert.match(ehlo.text, /STARTTLS/);
    const auth = await client.cmd(authPlain(inbox.address, t.key));
    assert.equal(auth.code, 538);
    assert.match(auth.text, /^5\.7\.11 /);
    assert.equal((await client.cmd('AUTH LOGIN')).code, 538);
    await client.quit();
  });

  test('on loopback EHLO offers AUTH PLAIN LOGIN', async () => {
    const { client, ehlo } = await session();
    assert.match(ehlo.text, /AUTH PLAIN LOGIN/);
    await client.quit();
  });

  test('MAIL, RCPT and DATA without AUTH: 530 5.7.0', async () => {
    const { client } = await session();
    assert.deepEqual(await client.cmd(`MAIL FROM:<${inbox.address}>`), { code: 530, text: '5.7.0 authentication required' });
    assert.deepEqual(await client.cmd('RCPT TO:<bob@remote.test>'), { code: 530, text: '5.7.0 authentication required' });
    assert.deepEqual(await client.cmd('DATA'), { code: 530, text: '5.7.0 authentication required' });
    await client.quit();
  });

  test('a wrong, read-only, revoked or other-account key, or an unknown inbox: 535 5.7.8', async () => {
    const readOnly = await createApiKey(t.server.ctx, t.accountId, { readOnly: true });
    const revoked = await createApiKey(t.server.ctx, t.accountId);
    await revokeApiKey(t.server.ctx, t.accountId, revoked.id);
    const other = await t.newAccount('other');
    const cases: Array<[string, string]> = [
      [inbox.address, `${t.key.slice(0, -4)}xxxx`],
      [inbox.address, readOnly.key],
      [inbox.address, revoked.key],
      [inbox.address, other.key],
      [`nobody@${t.config.shared_domain}`, t.key],
    ];
    for (const [i, [user, pass]] of cases.entries()) {
      // A fresh session for each, and a good login in between, so the cool-down never starts.
      const { client } = await session();
      assert.deepEqual(await client.cmd(authPlain(user, pass)), { code: 535, text: '5.7.8 authentication credentials invalid' }, `case ${i}`);
      await client.quit();
      await (await loggedIn()).quit();
    }
    // AUTH LOGIN (username and password as two base64 answers) is checked the same way.
    const { client } = await session();
    assert.equal((await client.cmd('AUTH LOGIN')).code, 334);
    assert.equal((await client.cmd(plain(inbox.address))).code, 334);
    assert.deepEqual(await client.cmd(plain(readOnly.key)), { code: 535, text: '5.7.8 authentication credentials invalid' });
    assert.equal((await client.cmd('AUTH LOGIN')).code, 334);
    assert.equal((await client.cmd(plain(inbox.address))).code, 334);
    assert.equal((await client.cmd(plain(t.key))).code, 235);
    await client.quit();
  });

  test(`${MAX_AUTH_FAILURES} failed logins for one username from one address: AUTH as that username is 454 4.7.0 there (good key or not) until the cool-down has passed; another username logs in, and its success does not clear the count; counted in /metrics`, async () => {
    const second = (await t.api('POST', '/inboxes', { address: 'second-login' })).body;
    const { client } = await session();
    for (let i = 0; i < MAX_AUTH_FAILURES; i++) assert.equal((await client.cmd(authPlain(inbox.address, 'mr_live_wrongwrongwrong'))).code, 535);
    const refused = { code: 454, text: '4.7.0 too many failed logins for this user from your address, try again later' };
    assert.deepEqual(await client.cmd(authPlain(inbox.address, t.key)), refused);
    // Usernames compare case-insensitively: typing it in capitals is the same pair.
    assert.deepEqual(await client.cmd(authPlain(inbox.address.toUpperCase(), t.key)), refused);
    await client.quit();
    // Another identity from the same address logs in, and that success leaves the count alone.
    const other = await session();
    assert.equal((await other.client.cmd(authPlain(second.address, t.key))).code, 235);
    await other.client.quit();
    // A new connection from the same address is refused for the first username still.
    const again = await session();
    assert.deepEqual(await again.client.cmd(authPlain(inbox.address, t.key)), refused);
    await again.client.quit();
    // Another address is not affected.
    if (HAVE_OPENSSL && EXTERNAL) {
      const transport = nodemailer.createTransport({ host: EXTERNAL, port: t.server.submissionPort, requireTLS: true, tls: { ca: readFileSync(cert) }, auth: { user: inbox.address, pass: t.key } });
      assert.equal(await transport.verify(), true);
      transport.close();
    }
    const metrics = await renderMetrics(t.server.ctx);
    assert.match(metrics, /^mailroom_submission_auth_total\{result="rate_limited"\} [1-9]/m);
    assert.match(metrics, /^mailroom_submission_auth_total\{result="rejected"\} [1-9]/m);
    assert.match(metrics, /^mailroom_submission_auth_total\{result="accepted"\} [1-9]/m);

    skew += AUTH_COOL_DOWN_MS;
    await (await loggedIn()).quit();
  });

  test('a database failing during AUTH: 454 4.7.0 every time and no failure counted, so correct credentials work as soon as it is back', async () => {
    // A key never used: the server has not remembered it (auth-cache.ts) and must read it.
    const fresh = await createApiKey(t.server.ctx, t.accountId, { name: 'outage' });
    const { client } = await session();
    // The keys table moves away: the server's own read of the key fails (a real fault of the store).
    await rawRun(t.server.ctx.db, 'ALTER TABLE api_keys RENAME TO api_keys_away');
    try {
      for (let i = 0; i <= MAX_AUTH_FAILURES; i++) {
        assert.deepEqual(await client.cmd(authPlain(inbox.address, fresh.key)), { code: 454, text: '4.7.0 authentication temporarily unavailable, try again later' }, `attempt ${i}`);
      }
    } finally {
      await rawRun(t.server.ctx.db, 'ALTER TABLE api_keys_away RENAME TO api_keys');
    }
    assert.deepEqual(await client.cmd(authPlain(inbox.address, fresh.key)), { code: 235, text: 'Authentication successful' });
    await client.quit();
    assert.match(await renderMetrics(t.server.ctx), /^mailroom_submission_auth_total\{result="unavailable"\} [1-9]/m);
  });

  test('a key revoked through the API: the next MAIL FROM is 421 4.7.0 and the session ends', async () => {
    const made = (await t.api('POST', '/account/api-keys', { name: 'revoked mid-session' })).body;
    const client = await loggedIn(made.key);
    assert.equal((await client.cmd(`MAIL FROM:<${inbox.address}>`)).code, 250);
    assert.equal((await client.cmd('RSET')).code, 250);
    assert.equal((await t.api('DELETE', `/account/api-keys/${made.id}`)).status, 204);
    const r = await client.cmd(`MAIL FROM:<${inbox.address}>`);
    assert.equal(r.code, 421);
    assert.match(r.text, /^4\.7\.0 the API key of this session was revoked/);
    await client.closed;
  });

  test('a key revoked during DATA: the end of DATA is 421 4.7.0 and nothing is queued', async () => {
    const made = (await t.api('POST', '/account/api-keys', { name: 'revoked during data' })).body;
    const listed = (await t.api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).body.data.length;
    const client = await loggedIn(made.key);
    assert.equal((await client.cmd(`MAIL FROM:<${inbox.address}>`)).code, 250);
    assert.equal((await client.cmd('RCPT TO:<late@remote.test>')).code, 250);
    assert.equal((await client.cmd('DATA')).code, 354);
    client.socket.write(`From: ${inbox.address}\r\nTo: late@remote.test\r\nSubject: late\r\n\r\n`);
    assert.equal((await t.api('DELETE', `/account/api-keys/${made.id}`)).status, 204);
    client.socket.write('after the revocation\r\n.\r\n');
    // Whether the timer closed the session first or the end of DATA answered, the reply is 421.
    const r = await client.read();
    assert.equal(r.code, 421);
    assert.match(r.text, /^4\.7\.0 the API key of this session was revoked/);
    await client.closed;
    assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).body.data.length, listed);
  });

  test('a key revoked by the CLI (another process) while its session is idle: the session gets 421 4.7.0 and is closed within seconds', async () => {
    const made = await createApiKey(t.server.ctx, t.accountId, { name: 'cli revoked' });
    const client = await loggedIn(made.key);
    assert.equal((await client.cmd(`MAIL FROM:<${inbox.address}>`)).code, 250);
    const config = join(dir, 'cli.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(t.config.data_dir)}\nshared_domain = ${JSON.stringify(t.config.shared_domain)}\n`);
    const r = await runCli(['keys', 'revoke', made.id, '--config', config]);
    assert.equal(r.code, 0, r.stderr);
    // No command is sent: the server speaks first (the re-check timer), then hangs up.
    const said = await client.read();
    assert.equal(said.code, 421);
    assert.match(said.text, /^4\.7\.0 the API key of this session was revoked/);
    await client.closed;
  });

  test('MAIL FROM another address than the inbox: 553 5.7.1; RCPT of an invalid address: 553 5.1.3', async () => {
    const client = await loggedIn();
    const other = await client.cmd(`MAIL FROM:<someone-else@${t.config.shared_domain}>`);
    assert.equal(other.code, 553);
    assert.match(other.text, /^5\.7\.1 sender address rejected/);
    assert.equal((await client.cmd('MAIL FROM:<>')).code, 553);
    assert.equal((await client.cmd(`MAIL FROM:<${inbox.address}>`)).code, 250);
    const bad = await client.cmd('RCPT TO:<"quoted"@remote.test>');
    assert.equal(bad.code, 553);
    assert.match(bad.text, /^5\.1\.3 /);
    await client.quit();
  });

  test('a recipient on a send-block list: the end of DATA is 550 5.7.1 naming it, and nothing is queued', async () => {
    const entry = await t.api('POST', '/lists', { direction: 'send', kind: 'block', entry: 'blocked.test' });
    assert.equal(entry.status, 201);
    const listed = (await t.api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).body.data.length;
    try {
      const client = await loggedIn();
      assert.equal((await client.cmd(`MAIL FROM:<${inbox.address}>`)).code, 250);
      assert.equal((await client.cmd('RCPT TO:<someone@blocked.test>')).code, 250);
      const r = await client.data(Buffer.from(`From: ${inbox.address}\r\nTo: someone@blocked.test\r\nSubject: blocked\r\n\r\nnot for them\r\n`));
      assert.equal(r.code, 550);
      assert.match(r.text, /^5\.7\.1 .*someone@blocked\.test/);
      await client.quit();
      assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).body.data.length, listed);
    } finally {
      await t.api('DELETE', `/lists/${entry.body.id}`);
    }
  });

  test('a suspended inbox: MAIL FROM is 550 5.2.1', async () => {
    await suspendInbox(t.server.ctx, inbox.id);
    try {
      const client = await loggedIn();
      const r = await client.cmd(`MAIL FROM:<${inbox.address}>`);
      assert.equal(r.code, 550);
      assert.match(r.text, /^5\.2\.1 /);
      await client.quit();
    } finally {
      await unsuspendInbox(t.server.ctx, inbox.id);
    }
  });

  test('the daily limit: reached during the transaction, the end of DATA is 451 4.7.1 and nothing is queued; reached before, MAIL FROM is', async () => {
    const sentBefore = (await t.api('GET', `/inboxes/${inbox.id}`)).body.sendsToday;
    const listed = (await t.api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).body.data.length;
    try {
      const client = await loggedIn();
      assert.equal((await client.cmd(`MAIL FROM:<${inbox.address}>`)).code, 250);
      assert.equal((await client.cmd('RCPT TO:<limit@remote.test>')).code, 250);
      await setDailyLimit(t.server.ctx, inbox.id, sentBefore);
      const r = await client.data(Buffer.from(`From: ${inbox.address}\r\nTo: limit@remote.test\r\nSubject: over\r\n\r\nover the limit\r\n`));
      assert.equal(r.code, 451);
      assert.match(r.text, /^4\.7\.1 inbox .* reached its daily send limit/);
      const mail = await client.cmd(`MAIL FROM:<${inbox.address}>`);
      assert.equal(mail.code, 451);
      assert.match(mail.text, /^4\.7\.1 /);
      await client.quit();
      assert.equal((await t.api('GET', `/inboxes/${inbox.id}/messages?limit=100`)).body.data.length, listed);
    } finally {
      await setDailyLimit(t.server.ctx, inbox.id, 100);
    }
  });
});

describe('submission and the memory budget', () => {
  let m: TestServer;
  let box: { address: string };
  before(async () => {
    // 1 MiB, shared with the MX listener: one 60 KB message in progress holds 720 KB of it.
    m = await startTestServer({ submission: { listen: '127.0.0.1:0' }, smtp: { memory_budget: 1_048_576 } });
    box = (await m.api('POST', '/inboxes', { address: 'budget' })).body;
  });
  after(async () => {
    await m?.close();
  });

  const body = (kb: number) => `From: ${box.address}\r\nTo: x@remote.test\r\nSubject: big\r\n\r\n${('x'.repeat(76) + '\r\n').repeat(Math.ceil((kb * 1024) / 78))}`;

  test('while a large inbound message is in progress on the MX port, a submission over the budget gets 452 4.3.1 and is not queued; it goes through afterwards', async () => {
    const mxClient = (await SmtpClient.open(m.server.smtpPort)).client;
    assert.equal((await mxClient.cmd('EHLO client.example.org')).code, 250);
    assert.equal((await mxClient.cmd('MAIL FROM:<a@example.org>')).code, 250);
    assert.equal((await mxClient.cmd(`RCPT TO:<${box.address}>`)).code, 250);
    assert.equal((await mxClient.cmd('DATA')).code, 354);
    mxClient.socket.write(`Subject: inbound\r\n\r\n${('y'.repeat(76) + '\r\n').repeat(800)}`);
    await new Promise((r) => setTimeout(r, 300));

    const { client } = await SmtpClient.open(m.server.submissionPort);
    assert.equal((await client.cmd('EHLO client.test')).code, 250);
    assert.equal((await client.cmd(authPlain(box.address, m.key))).code, 235);
    const refused = await client.send(box.address, ['x@remote.test'], Buffer.from(body(60)));
    assert.equal(refused.code, 452);
    assert.match(refused.text, /^4\.3\.1 too much mail in progress/);
    const outbound = async () => (await m.api('GET', `/inboxes/${(await m.api('GET', '/inboxes')).body.data[0].id}/messages?direction=outbound`)).body.total;
    assert.equal(await outbound(), 0, 'nothing queued');

    mxClient.socket.write('.\r\n');
    assert.equal((await mxClient.read()).code, 250);
    const accepted = await client.send(box.address, ['x@remote.test'], Buffer.from(body(60)));
    assert.equal(accepted.code, 250, accepted.text);
    assert.equal(await outbound(), 1);
    await Promise.all([client.quit(), mxClient.quit()]);
  });
});
