// The DNS rules of domain-check.ts as pure functions: what each answer means for a record and
// for the sending and receiving statuses, and the zone-file presentation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkDkim, checkDmarc, checkMx, checkOwnership, checkSpf, quoteTxt, receivingStatusFrom, sendingStatusFrom, zoneLine } from '../../src/domain/domains/domain-check.ts';

const KEY = 'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAtest';

test('sending status: ownership and DKIM states combined', () => {
  const table: Array<[string, string, string | undefined]> = [
    ['missing', 'missing', 'pending'],
    ['missing', 'found', 'pending'],
    ['found', 'missing', 'pending_dkim'],
    ['found', 'found', 'verified'],
    ['found', 'wrong', 'failed'],
    ['wrong', 'found', 'failed'],
    ['missing', 'wrong', 'failed'],
    ['unknown', 'found', undefined],
    ['found', 'unknown', undefined],
  ];
  for (const [own, dkim, want] of table) assert.equal(sendingStatusFrom(own as never, dkim as never), want, `${own}+${dkim}`);
  assert.equal(receivingStatusFrom('found'), 'verified');
  assert.equal(receivingStatusFrom('wrong'), 'failed');
  assert.equal(receivingStatusFrom('missing'), 'pending');
  assert.equal(receivingStatusFrom('unknown'), undefined);
});

test('ownership: our token among others is found; only foreign values are wrong', () => {
  assert.equal(checkOwnership('mailroom-verification=abc', []).state, 'missing');
  assert.equal(checkOwnership('mailroom-verification=abc', ['google-site-verification=x', ' mailroom-verification=abc ']).state, 'found');
  assert.equal(checkOwnership('mailroom-verification=abc', ['mailroom-verification=old']).state, 'wrong');
});

test('DKIM: tag-list parsing (RFC 6376 §3.2), key comparison, revoked and competing records', () => {
  assert.equal(checkDkim(KEY, []).state, 'missing');
  assert.equal(checkDkim(KEY, [`v=DKIM1; k=rsa; p=${KEY}`]).state, 'found');
  assert.equal(checkDkim(KEY, [`p=${KEY.slice(0, 10)} ${KEY.slice(10)}`]).state, 'found');
  assert.equal(checkDkim(KEY, [` v = DKIM1 ;k=RSA;p=${KEY};`]).state, 'found');
  assert.equal(checkDkim(KEY, ['v=DKIM1; k=rsa; p=']).state, 'wrong');
  assert.equal(checkDkim(KEY, ['v=DKIM1; k=rsa; p=AAAA']).state, 'wrong');
  assert.equal(checkDkim(KEY, [`v=DKIM1; k=ed25519; p=${KEY}`]).state, 'wrong');
  assert.equal(checkDkim(KEY, [`v=DKIM2; p=${KEY}`]).state, 'wrong');
  assert.equal(checkDkim(KEY, ['v=DKIM1; k=rsa']).state, 'wrong');
  assert.equal(checkDkim(KEY, [`v=DKIM1; p=${KEY}`, `v=DKIM1; p=${KEY}`]).state, 'wrong');
});

test('SPF and DMARC are advisory: found, missing, differs, and duplicates as wrong', () => {
  const host = 'mx.example.net';
  assert.equal(checkSpf(host, ['some other txt']).state, 'missing');
  assert.equal(checkSpf(host, ['v=spf1 a:mx.example.net mx ~all']).state, 'found');
  assert.equal(checkSpf(host, ['v=spf1 mx -all']).state, 'found');
  assert.equal(checkSpf(host, ['v=spf1 include:MX.example.net. -all']).state, 'found');
  assert.equal(checkSpf(host, ['v=spf1 -mx ip4:192.0.2.1 -all']).state, 'differs');
  assert.equal(checkSpf(host, ['v=spf1 mx:other.example -all']).state, 'differs');
  assert.equal(checkSpf(host, ['v=spf1 mx ~all', 'v=spf1 -all']).state, 'wrong');
  assert.equal(checkDmarc([]).state, 'missing');
  assert.equal(checkDmarc(['v=DMARC1; p=none']).state, 'found');
  assert.equal(checkDmarc(['v=DMARC1; p=none', 'v=DMARC1; p=reject']).state, 'wrong');
});

test('MX: hostname compared case-insensitively without the trailing dot; null MX is elsewhere', () => {
  assert.equal(checkMx('mx.example.net', []).state, 'missing');
  assert.equal(checkMx('mx.example.net', [{ exchange: 'MX.Example.NET.', priority: 5 }]).state, 'found');
  assert.equal(
    checkMx('mx.example.net.', [
      { exchange: 'other.example', priority: 1 },
      { exchange: 'mx.example.net', priority: 10 },
    ]).state,
    'found',
  );
  assert.equal(checkMx('mx.example.net', [{ exchange: 'other.example', priority: 1 }]).state, 'wrong');
  assert.equal(checkMx('mx.example.net', [{ exchange: '', priority: 0 }]).state, 'wrong');
});

test('zone lines: absolute names, MX with priority, TXT split into ≤255-octet quoted strings', () => {
  assert.equal(zoneLine({ type: 'MX', name: 'example.com', value: 'mx.example.net', priority: 10 }), 'example.com. 3600 IN MX 10 mx.example.net.');
  const long = 'v=DKIM1; k=rsa; p=' + 'A'.repeat(400);
  const line = zoneLine({ type: 'TXT', name: 's._domainkey.example.com', value: long });
  const strings = [...line.matchAll(/"([^"]*)"/g)].map((m) => m[1]);
  assert.equal(strings.length, 2);
  assert.equal(strings[0].length, 255);
  assert.equal(strings.join(''), long);
  assert.equal(quoteTxt('say "hi" \\o/'), '"say \\"hi\\" \\\\o/"');
});
