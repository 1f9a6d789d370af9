// What spam filters think of mailroom's mail, judged by Debian's own SpamAssassin: default inbox
// addresses against its random-address rules (run by Perl, the engine the rules are written
// for), and a message sent with default settings, DKIM-signed and captured at a local MX, run
// through `spamassassin -t` with its DNS pointed at the test's DNS server: no rule that the
// sender controls fires, and its DKIM rules (DKIM_VALID, DKIM_VALID_AU) do, with the key mailroom
// published. python3-dkim (dkimpy) verifies the same signature, its key looked up by name in the
// same DNS.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dkimTxtValue, publishedKeyFor } from '../../src/domain/domains/dkim-keys.ts';
import { startTestDns, type TestDns, type TestRecord } from '../support/dns.ts';
import { startTestMx, type CapturedMessage, type TestMx } from '../support/mx.ts';
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

/**
 * Runs `cmd` with `input` on stdin. Not spawnSync: the test DNS server the command asks runs in
 * this process, and a blocked event loop would leave its questions unanswered.
 */
function runWith(cmd: string, args: string[], input: Buffer): Promise<{ status: number | null; stdout: string; stderr: string; error?: Error }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdin.on('error', () => {}); // a missing command has no stdin to write to
    child.stdin.end(input);
    child.once('error', (error) => resolve({ status: null, stdout, stderr, error }));
    child.once('close', (status) => resolve({ status, stdout, stderr }));
  });
}

describe('a message sent with default settings', () => {
  let t: TestServer;
  let dns: TestDns;
  let mx: TestMx;
  let captured: CapturedMessage;
  let keyName: string;
  let keyRecord: TestRecord[];
  before(async () => {
    dns = await startTestDns();
    mx = await startTestMx();
    t = await startTestServer({ outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['200ms'], timeout: '5s' }, dns: { servers: [dns.server], timeout: '1s' } });
    const key = (await publishedKeyFor(t.server.ctx, t.config.shared_domain))!;
    keyName = `${key.selector}._domainkey.${t.config.shared_domain}`;
    keyRecord = [{ type: 'TXT', value: dkimTxtValue(key.publicKey) }];
    dns.set(keyName, keyRecord);
    dns.set('example.org', [{ type: 'MX', exchange: 'mx.example.org', priority: 10 }]);
    dns.set('mx.example.org', [{ type: 'A', address: '127.0.0.1' }]);
    const inbox = (await t.api('POST', '/inboxes', { displayName: 'Support Agent' })).body;
    const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, {
      to: ['Alice Example <alice@example.org>'],
      subject: 'Your order has shipped',
      bodyText: 'Hello Alice,\n\nyour order 1042 left our warehouse today and should arrive on Thursday.\n\nKind regards,\nthe support team',
      bodyHtml: '<p>Hello Alice,</p><p>your order 1042 left our warehouse today and should arrive on <b>Thursday</b>.</p><p>Kind regards,<br>the support team</p>',
    });
    assert.equal(res.status, 202, res.text);
    [captured] = await mx.waitFor(1);
    await until('sent', async () => ((await t.api('GET', `/messages/${res.body.id}`)).body.status === 'sent' ? true : undefined));
  });
  after(async () => {
    await t?.close();
    await mx?.close();
    await dns?.close();
  });

  /**
   * `spamassassin -t` on the message as a receiving MTA would hand it over (Return-Path from the
   * envelope, its Received line). DNS is on but answered only by the test's server (`dns_server`),
   * so the DKIM plugin looks the key up where mailroom published it; the blocklists and the
   * collaborative checks (Razor, Pyzor, DCC), which would ask the internet, are off.
   */
  async function spamassassin(): Promise<Array<{ score: number; rule: string }> & { report: string }> {
    const delivered = Buffer.concat([
      Buffer.from(
        `Return-Path: <${captured.mailFrom}>\r\nReceived: from ${t.config.hostname} (${t.config.hostname} [127.0.0.1])\r\n\tby mx.example.org with ESMTPS; ${new Date().toUTCString().replace('GMT', '+0000')}\r\n`,
      ),
      captured.raw,
    ]);
    const cf = ['dns_available yes', `dns_server ${dns.server}`, 'skip_rbl_checks 1', 'use_razor2 0', 'use_pyzor 0', 'use_dcc 0'];
    const sa = await runWith('spamassassin', ['-t', ...cf.map((c) => `--cf=${c}`)], delivered);
    assert.ok(sa.status === 0 || sa.status === 1, sa.stderr);
    assert.ok(/Content analysis details/.test(sa.stdout), sa.stdout.slice(-2000));
    const fired = [...sa.stdout.matchAll(/^\s*(-?\d+\.\d+)\s+([A-Z0-9_]+)\s/gm)].map((m) => ({ score: Number(m[1]), rule: m[2] }));
    return Object.assign(fired, { report: sa.stdout.slice(sa.stdout.indexOf('Content analysis details')) });
  }

  test('spamassassin -t: no sender-controlled rule fires; DKIM_VALID and DKIM_VALID_AU do, with the key from DNS', { skip }, async () => {
    const fired = await spamassassin();
    const senderRules = fired.filter((f) => SENDER_CONTROLLED.some((re) => re.test(f.rule)) && f.score !== 0);
    assert.deepEqual(senderRules, [], `sender-controlled rules fired:\n${fired.report}`);
    const rules = fired.map((f) => f.rule);
    for (const rule of ['DKIM_SIGNED', 'DKIM_VALID', 'DKIM_VALID_AU']) assert.ok(rules.includes(rule), `${rule} did not fire:\n${fired.report}`);
    assert.ok(dns.queries.includes(`TXT ${keyName}`), `SpamAssassin asked the test DNS for ${keyName}: ${dns.queries.join(', ')}`);
    // The control: with the key gone from DNS the same message is signed but not valid.
    dns.clear(keyName);
    try {
      const without = (await spamassassin()).map((f) => f.rule);
      assert.ok(without.includes('DKIM_SIGNED'), without.join(' '));
      assert.ok(!without.includes('DKIM_VALID') && !without.includes('DKIM_VALID_AU'), without.join(' '));
    } finally {
      dns.set(keyName, keyRecord);
    }
  });

  /**
   * dkimpy's own verdict, its key looked up by name in the test DNS (dnspython against the test
   * server: the `dnsfunc` answers only what DNS holds for the name dkimpy asks for). Prints
   * "pass", "fail", or exits 3 when the module is missing.
   */
  async function dkimpy(): Promise<string | undefined> {
    const [host, port] = dns.server.split(':');
    const script = [
      'import sys',
      'try:',
      '    import dkim, dns.resolver',
      'except ImportError:',
      '    sys.exit(3)',
      'r = dns.resolver.Resolver(configure=False)',
      `r.nameservers = ['${host}']`,
      `r.port = ${port}`,
      'def txt(name, timeout=5):',
      '    try:',
      "        answer = r.resolve(name.decode().rstrip('.'), 'TXT', lifetime=timeout)",
      '    except Exception:',
      '        return None',
      "    return b''.join(answer[0].strings)",
      'print("pass" if dkim.verify(sys.stdin.buffer.read(), dnsfunc=txt) else "fail")',
    ].join('\n');
    // The system interpreter has python3-dkim on Debian (a virtualenv's first may not).
    for (const bin of ['/usr/bin/python3', 'python3']) {
      const r = await runWith(bin, ['-c', script], captured.raw);
      if (r.status === 0) return r.stdout.trim();
      assert.ok(r.status === 3 || r.error, r.stderr);
    }
    return undefined;
  }

  test('python3-dkim (dkimpy) verifies the signature with the key it looks up at selector._domainkey.domain, and fails when the key is published under another selector', async (ctx) => {
    const before = dns.queries.length;
    const verdict = await dkimpy();
    if (verdict === undefined) return ctx.skip('python3-dkim is not installed (apt-get install python3-dkim)');
    assert.equal(verdict, 'pass');
    assert.deepEqual(dns.queries.slice(before), [`TXT ${keyName}`]);
    // The same key under another selector: dkimpy asks for the message's selector and finds none.
    dns.clear(keyName);
    dns.set(keyName.replace(/^[^.]+/, 'other'), keyRecord);
    try {
      assert.equal(await dkimpy(), 'fail');
    } finally {
      dns.clear(keyName.replace(/^[^.]+/, 'other'));
      dns.set(keyName, keyRecord);
    }
  });
});
