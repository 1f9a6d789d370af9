// What spam filters think of mailroom's mail, judged by Debian's own SpamAssassin: default inbox
// addresses against its random-address rules (run by Perl, the engine the rules are written
// for), and a message sent with default settings, DKIM-signed and captured at a local MX, run
// through `spamassassin -t -L` (local tests only) with no rule that the sender controls firing.
// (dkimpy's verdict on the same signature: outbound.test.ts.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dkimTxtValue, publishedKeyFor } from '../../src/domain/domains/dkim-keys.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { peerSkip } from '../support/peers.ts';

const RULES = '/usr/share/spamassassin/72_active.cf';
const haveSpamAssassin = existsSync(RULES) && spawnSync('spamassassin', ['--version']).status === 0;
const skip = peerSkip(haveSpamAssassin ? false : 'Debian spamassassin is not installed (apt-get install spamassassin; .ci/install-system installs it)');

/**
 * Rules whose outcome the sending side decides (headers, addresses, body shape, signature).
 * Rules about the network path (RCVD_*, RDNS_*, SPF/DMARC lookups of a test domain) and about
 * the recipient are not the sender's doing and are left out.
 */
const SENDER_CONTROLLED = [
  /^HK_RANDOM/,
  /^FROM_LOCAL_/,
  /^MISSING_/, // MISSING_DATE, MISSING_MID, MISSING_MIME_HB_SEP, MISSING_HEADERS, MISSING_FROM, MISSING_SUBJECT
  /^INVALID_DATE/,
  /^INVALID_MSGID/,
  /^MSGID_/,
  /^DATE_IN_(PAST|FUTURE)/,
  /^MIME_/, // MIME_HTML_ONLY, MIME_QP_LONG_LINE, MIME_BASE64_TEXT, MIME_HEADER_CTYPE_ONLY, …
  /^HTML_/,
  /^TVD_/,
  /^__?LONGLINE/,
  /^BODY_8BITS/,
  /^SUBJ_/,
  /^FROM_EXCESS_BASE64/,
  /^FROM_ADDR_WS/,
  /^TO_NO_BRKTS/,
  /^EMPTY_MESSAGE/,
  /^NO_RELAYS/,
  /^DKIM_INVALID/,
  /^T_DKIM_INVALID/,
  /^HEADER_FROM_DIFFERENT_DOMAINS/,
  /^FORGED_/,
  /^PYZOR|^RAZOR/,
];

/** The regular expression of a `header NAME … =~ /…/flags` rule, from the installed rule set. */
function ruleRegex(name: string): string {
  const line = readFileSync(RULES, 'utf8')
    .split('\n')
    .find((l) => new RegExp(`^header\\s+${name}\\s`).test(l));
  assert.ok(line, `${name} not found in ${RULES}`);
  return line.replace(/^header\s+\S+\s+\S+\s+=~\s+/, '').trim();
}

describe('default inbox addresses', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ limits: { requests_per_minute: 100_000 } });
  });
  after(async () => {
    await t?.close();
  });

  test('1,000 of them: none looks random to SpamAssassin (HK_RANDOM_FROM, HK_RANDOM_ENVFROM); all distinct, word-word-word-number', { skip }, async () => {
    const addresses: string[] = [];
    for (let i = 0; i < 1000; i++) {
      const res = await t.api('POST', '/inboxes', {});
      assert.equal(res.status, 201, res.text);
      addresses.push(res.body.address);
    }
    assert.equal(new Set(addresses).size, 1000);
    for (const a of addresses) assert.match(a, /^[a-z]{3,8}-[a-z]{3,8}-[a-z]{3,8}-\d{1,3}@agents\.test$/);
    for (const rule of ['HK_RANDOM_FROM', 'HK_RANDOM_ENVFROM']) {
      // Perl runs the rule's own pattern (with its flags) over each address, one per line.
      const perl = spawnSync('perl', ['-ne', `chomp; print "$_\\n" if $_ =~ ${ruleRegex(rule)};`], { input: addresses.join('\n') + '\n', encoding: 'utf8' });
      assert.equal(perl.status, 0, perl.stderr);
      assert.equal(perl.stdout, '', `${rule} matches: ${perl.stdout.split('\n').slice(0, 5).join(', ')}`);
      // The check can fail: the old style of address (12 random characters) trips the rule.
      const control = spawnSync('perl', ['-ne', `chomp; print "$_\\n" if $_ =~ ${ruleRegex(rule)};`], { input: 'xkqzvbtrwplm@agents.test\n', encoding: 'utf8' });
      assert.equal(control.stdout.trim(), 'xkqzvbtrwplm@agents.test');
    }
  });
});

describe('a message sent with default settings', () => {
  let t: TestServer;
  let dns: TestDns;
  let mx: TestMx;
  before(async () => {
    dns = await startTestDns();
    mx = await startTestMx();
    t = await startTestServer({ outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['200ms'], timeout: '5s' }, dns: { servers: [dns.server], timeout: '1s' } });
    const key = (await publishedKeyFor(t.server.ctx, t.config.shared_domain))!;
    dns.set(`${key.selector}._domainkey.${t.config.shared_domain}`, [{ type: 'TXT', value: dkimTxtValue(key.publicKey) }]);
    dns.set('example.org', [{ type: 'MX', exchange: 'mx.example.org', priority: 10 }]);
    dns.set('mx.example.org', [{ type: 'A', address: '127.0.0.1' }]);
  });
  after(async () => {
    await t?.close();
    await mx?.close();
    await dns?.close();
  });

  test('spamassassin -t: no sender-controlled rule fires', { skip }, async () => {
    const inbox = (await t.api('POST', '/inboxes', { displayName: 'Support Agent' })).body;
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, {
      to: ['Alice Example <alice@example.org>'],
      subject: 'Your order has shipped',
      bodyText: 'Hello Alice,\n\nyour order 1042 left our warehouse today and should arrive on Thursday.\n\nKind regards,\nthe support team',
      bodyHtml: '<p>Hello Alice,</p><p>your order 1042 left our warehouse today and should arrive on <b>Thursday</b>.</p><p>Kind regards,<br>the support team</p>',
    });
    assert.equal(res.status, 202, res.text);
    const [captured] = await mx.waitFor(1);
    await until('sent', async () => ((await t.api('GET', `/messages/${res.body.id}`)).body.status === 'sent' ? true : undefined));
    // What the receiving MTA prepends (Return-Path from the envelope, its Received line).
    const delivered = Buffer.concat([
      Buffer.from(`Return-Path: <${captured.mailFrom}>\r\nReceived: from ${t.config.hostname} (${t.config.hostname} [127.0.0.1])\r\n\tby mx.example.org with ESMTPS; ${new Date().toUTCString().replace('GMT', '+0000')}\r\n`),
      captured.raw,
    ]);
    const sa = spawnSync('spamassassin', ['-t', '-L', '--cf=dns_available no'], { input: delivered, encoding: 'utf8', timeout: 60_000 });
    assert.ok(sa.status === 0 || sa.status === 1, sa.stderr);
    const fired = [...sa.stdout.matchAll(/^\s*(-?\d+\.\d+)\s+([A-Z0-9_]+)\s/gm)].map((m) => ({ score: Number(m[1]), rule: m[2] }));
    assert.ok(/Content analysis details/.test(sa.stdout), sa.stdout.slice(-2000));
    const senderRules = fired.filter((f) => SENDER_CONTROLLED.some((re) => re.test(f.rule)) && f.score !== 0);
    assert.deepEqual(senderRules, [], `sender-controlled rules fired:\n${sa.stdout.slice(sa.stdout.indexOf('Content analysis details'))}`);

  });
});
