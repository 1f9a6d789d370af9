// Address rules for webhook targets: every special-purpose IPv4/IPv6 block is refused, IPv4
// embedded in IPv6 (mapped, compatible, NAT64, 6to4) is judged by the IPv4 address it reaches.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nonPublicReason, parseWebhookUrl } from '../../src/domain/webhooks/webhook-targets.ts';
import { AppError } from '../../src/domain/errors.ts';

test('non-public addresses are refused with a reason', () => {
  const refused: Record<string, RegExp> = {
    '127.0.0.1': /loopback/,
    '127.255.0.9': /loopback/,
    '10.0.0.1': /private/,
    '172.31.255.255': /private/,
    '192.168.0.1': /private/,
    '169.254.169.254': /linkLocal/,
    '100.64.0.1': /carrierGradeNat/,
    '100.127.255.254': /carrierGradeNat/,
    '224.0.0.251': /multicast/,
    '0.0.0.0': /unspecified/,
    '255.255.255.255': /broadcast/,
    '192.0.2.10': /reserved/, // TEST-NET-1
    '198.18.0.1': /reserved/, // benchmarking
    '240.0.0.1': /reserved/,
    '::1': /loopback/,
    '::': /unspecified/,
    'fe80::1': /linkLocal/,
    'fc00::1': /uniqueLocal/,
    'fdff::1': /uniqueLocal/,
    'ff02::1': /multicast/,
    '::ffff:127.0.0.1': /IPv4-mapped loopback/,
    '::ffff:10.1.1.1': /IPv4-mapped private/,
    '::127.0.0.1': /IPv4-compatible loopback/,
    '64:ff9b::169.254.169.254': /NAT64 linkLocal/,
    '64:ff9b:1::1': /not global unicast|rfc6052/,
    '2002:7f00:1::1': /6to4 loopback/,
    '2001::1': /teredo/,
    '2001:db8::1': /reserved/,
    '100::1': /discard/,
    '::7f00:1': /IPv4-compatible loopback/,
    'not-an-ip': /not an IP/,
    'fe80::1%eth0': /not a plain IP/,
  };
  for (const [address, reason] of Object.entries(refused)) {
    const got = nonPublicReason(address);
    assert.ok(got, `${address} must be refused`);
    assert.match(got, reason, `${address}: ${got}`);
  }
});

test('public unicast addresses, and embedded forms of them, are allowed', () => {
  for (const address of ['8.8.8.8', '93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:808:808::1']) {
    assert.equal(nonPublicReason(address), undefined, address);
  }
});

test('URL rules: https only unless insecure targets are allowed; no credentials; absolute URLs', () => {
  const code = (raw: string, insecure = false) => {
    try {
      parseWebhookUrl(raw, insecure);
      return 'ok';
    } catch (err) {
      return (err as AppError).code;
    }
  };
  assert.equal(code('https://example.com/hook'), 'ok');
  assert.equal(code('http://example.com/hook'), 'INVALID_WEBHOOK_URL');
  assert.equal(code('http://example.com/hook', true), 'ok');
  assert.equal(code('ftp://example.com/hook', true), 'INVALID_WEBHOOK_URL');
  assert.equal(code('/relative'), 'INVALID_WEBHOOK_URL');
  assert.equal(code('https://u:p@example.com/'), 'INVALID_WEBHOOK_URL');
  assert.equal(code(`https://example.com/${'a'.repeat(2100)}`), 'INVALID_WEBHOOK_URL');
});
