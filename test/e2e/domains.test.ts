// Custom domains end to end, with a dns2 server on loopback as the authoritative source: the
// API (add, list, get, verify, delete, every error), the status rules, DNS outages, the
// domain.verified event, custom-domain inboxes receiving mail over SMTP, moving inboxes on
// delete, the background re-check, DKIM keys, and the CLI printing paste-able zone lines.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, sign, verify as verifySignature } from 'node:crypto';
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { domains, events } from '../../src/store/schema.ts';
import { dkimTxtValue, publishedKeyFor, signingKeyFor } from '../../src/domain/domains/dkim-keys.ts';
import { runCli } from '../support/cli.ts';
import { startTestDns, type TestDns, type TestRecord } from '../support/dns.ts';
import { rawRows } from '../../src/store/store.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { sqlDb } from '../support/db.ts';
import { until as untilDefined } from '../support/wait.ts';

const HOST = 'mx.test.localhost';
/** The policy host is a CNAME to HOST, which has no address in the test zone: nothing to compare. */
const MTA_STS_HOST_STATE = 'missing';
const SHARED = 'agents.test';

let dns: TestDns;
let s: TestServer;
before(async () => {
  dns = await startTestDns();
  s = await startTestServer({ dns: { servers: [dns.server], timeout: '300ms' } });
});
after(async () => {
  await s.close();
  await dns.close();
});

interface Rec {
  type: string;
  name: string;
  value: string;
  priority?: number;
}

/** Publishes records into the test zone exactly as given (grouped by owner name). */
function publish(records: Rec[]): void {
  const byName = new Map<string, TestRecord[]>();
  for (const r of records) {
    const rec: TestRecord = r.type === 'MX' ? { type: 'MX', exchange: r.value, priority: r.priority! } : r.type === 'CNAME' ? { type: 'CNAME', domain: r.value } : { type: 'TXT', value: r.value };
    byName.set(r.name, [...(byName.get(r.name) ?? []), rec]);
  }
  for (const [name, recs] of byName) dns.set(name, recs);
}

const unpublish = (d: { dnsRecords: Rec[] }) => {
  for (const r of d.dnsRecords) dns.clear(r.name);
};

const find = (d: { dnsRecords: Rec[] }, pred: (r: Rec) => boolean) => d.dnsRecords.find(pred)!;
const ownershipOf = (d: { dnsRecords: Rec[] }) => find(d, (r) => r.name.startsWith('_mailroom.'));
const dkimOf = (d: { dnsRecords: Rec[] }) => find(d, (r) => r.name.includes('._domainkey.'));

async function add(name: string, t: TestServer = s, key?: string) {
  const res = await t.api('POST', '/domains', { domain: name }, key ? { key } : {});
  assert.equal(res.status, 201, res.text);
  return res.body;
}

async function verify(id: string, t: TestServer = s) {
  const res = await t.api('POST', `/domains/${id}/verify`);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

const verifiedEvents = async (t: TestServer, domainId: string) =>
  (await sqlDb(t.server.ctx).select().from(events).where(eq(events.type, 'domain.verified')).all()).filter((e) => JSON.parse(e.data).id === domainId);

/** Polls until `fn` returns a value (waiting for background work, not timing it). */
const until = <T>(fn: () => Promise<T | undefined | false>, what: string, timeoutMs?: number): Promise<T> => untilDefined(what, async () => (await fn()) || undefined, timeoutMs);

const DOMAIN_FIELDS = [
  'createdAt',
  'dnsRecords',
  'domain',
  'id',
  'lastCheckError',
  'lastCheckedAt',
  'receivingDnsRecords',
  'receivingStatus',
  'receivingVerifiedAt',
  'sendingDnsRecords',
  'sendingStatus',
  'sendingVerifiedAt',
  'verificationStatus',
];

describe('adding a domain', () => {
  test('201 with the full Domain object, a 2048-bit DKIM key and the records of PRODUCT.md; the private key never leaves', async () => {
    const res = await s.api('POST', '/domains', { domain: 'Shop.Example.COM.' });
    assert.equal(res.status, 201, res.text);
    const d = res.body;
    assert.deepEqual(Object.keys(d).sort(), DOMAIN_FIELDS);
    assert.match(d.id, /^dom_/);
    assert.equal(d.domain, 'shop.example.com');
    assert.equal(d.sendingStatus, 'pending');
    assert.equal(d.verificationStatus, 'pending');
    assert.equal(d.receivingStatus, 'pending');
    assert.equal(d.sendingVerifiedAt, null);
    assert.equal(d.receivingVerifiedAt, null);
    assert.equal(d.lastCheckedAt, null);
    assert.ok(!Number.isNaN(Date.parse(d.createdAt)));
    assert.deepEqual(d.dnsRecords, [...d.sendingDnsRecords, ...d.receivingDnsRecords]);

    const [own, dkim, spf, dmarc] = d.sendingDnsRecords;
    assert.equal(own.type, 'TXT');
    assert.equal(own.name, '_mailroom.shop.example.com');
    assert.match(own.value, /^mailroom-verification=[0-9a-z]{32}$/);
    assert.equal(dkim.type, 'TXT');
    assert.match(dkim.name, /^mr\d{6}\._domainkey\.shop\.example\.com$/);
    const m = /^v=DKIM1; k=rsa; p=([A-Za-z0-9+/]+=*)$/.exec(dkim.value);
    assert.ok(m, dkim.value);
    const pub = createPublicKey({ key: Buffer.from(m[1], 'base64'), format: 'der', type: 'spki' });
    assert.equal(pub.asymmetricKeyType, 'rsa');
    assert.equal(pub.asymmetricKeyDetails?.modulusLength, 2048);
    assert.deepEqual(spf, { type: 'TXT', name: 'shop.example.com', value: `v=spf1 a:${HOST} mx ~all` });
    // Aggregate reports, MTA-STS and TLS reports come to the appliance (issue 30).
    assert.deepEqual(dmarc, { type: 'TXT', name: '_dmarc.shop.example.com', value: 'v=DMARC1; p=none; adkim=r; aspf=r; rua=mailto:dmarc-reports@shop.example.com' });
    const [mx, sts, stsHost, tlsRpt] = d.receivingDnsRecords;
    assert.deepEqual(mx, { type: 'MX', name: 'shop.example.com', value: HOST, priority: 10 });
    assert.equal(sts.name, '_mta-sts.shop.example.com');
    assert.match(sts.value, /^v=STSv1; id=[0-9a-f]{20}$/);
    assert.deepEqual(stsHost, { type: 'CNAME', name: 'mta-sts.shop.example.com', value: HOST });
    assert.deepEqual(tlsRpt, { type: 'TXT', name: '_smtp._tls.shop.example.com', value: 'v=TLSRPTv1; rua=mailto:tls-reports@shop.example.com' });
    assert.equal(d.receivingDnsRecords.length, 4);
    for (const r of d.sendingDnsRecords) assert.equal('priority' in r, false);

    // The private key is stored (PEM), matches the published key, and is in no response.
    const row = (await sqlDb(s.server.ctx).select().from(domains).where(eq(domains.id, d.id)).get())!;
    assert.match(row.dkimPrivateKey, /^-----BEGIN PRIVATE KEY-----/);
    const derived = createPublicKey(createPrivateKey(row.dkimPrivateKey)).export({ type: 'spki', format: 'der' }).toString('base64');
    assert.equal(derived, m[1]);
    for (const text of [res.text, (await s.api('GET', `/domains/${d.id}`)).text, (await s.api('GET', '/domains')).text]) {
      assert.doesNotMatch(text, /PRIVATE KEY/);
      assert.ok(!text.includes(row.dkimPrivateKey.split('\n')[1]));
    }
  });

  test('invalid names are 400 VALIDATION_ERROR naming the field', async () => {
    const bad: unknown[] = [
      '',
      'localhost',
      'not a domain',
      '-bad.example.com',
      'bad-.example.com',
      'a..b.com',
      '1.2.3.4',
      'x_y.example.com',
      `${'a'.repeat(64)}.com`,
      `${'abcdefghi.'.repeat(24)}com`,
      'user@example.com',
      5,
      null,
    ];
    for (const domain of bad) {
      const res = await s.api('POST', '/domains', { domain });
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, /`domain`/, `${JSON.stringify(domain)}: ${res.body.error.message}`);
    }
    expectError(await s.api('POST', '/domains', {}), 400, 'VALIDATION_ERROR');
    const unknown = await s.api('POST', '/domains', { domain: 'ok.example.com', dkim: 'x' });
    expectError(unknown, 400, 'VALIDATION_ERROR');
    assert.match(unknown.body.error.message, /`dkim`/);
    expectError(await s.api('POST', '/domains', '{"domain":'), 400, 'INVALID_JSON');
    assert.equal(await sqlDb(s.server.ctx).select().from(domains).where(eq(domains.domain, 'ok.example.com')).get(), undefined);
  });

  test('internationalized names are stored in their A-label (punycode) form', async () => {
    const d = await add('bücher.example');
    assert.equal(d.domain, 'xn--bcher-kva.example');
  });

  test('the shared domain, or a domain this account added already, is 409 DOMAIN_EXISTS; an unverified claim of another account blocks nobody', async () => {
    expectError(await s.api('POST', '/domains', { domain: SHARED }), 409, 'DOMAIN_EXISTS');
    expectError(await s.api('POST', '/domains', { domain: 'AGENTS.test.' }), 409, 'DOMAIN_EXISTS');
    const mine = await add('taken.example.com');
    expectError(await s.api('POST', '/domains', { domain: 'Taken.Example.com.' }), 409, 'DOMAIN_EXISTS');
    const other = await s.newAccount('other');
    const theirs = await add('taken.example.com', s, other.key);
    assert.notEqual(theirs.id, mine.id);
    assert.equal(theirs.domain, 'taken.example.com');
  });

  test("list, get and delete are scoped to the account; another account's domain is 404 DOMAIN_NOT_FOUND", async () => {
    const other = await s.newAccount('scoped');
    const mine = await add('scoped.example.com');
    const theirs = await add('theirs.example.com', s, other.key);

    const list = await s.api('GET', '/domains');
    assert.equal(list.status, 200);
    assert.ok(list.body.data.some((d: any) => d.id === mine.id));
    assert.ok(!list.body.data.some((d: any) => d.id === theirs.id));
    assert.equal(list.body.total, list.body.data.length);
    for (const d of list.body.data) assert.deepEqual(Object.keys(d).sort(), DOMAIN_FIELDS);

    const got = await s.api('GET', `/domains/${mine.id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, mine);

    for (const [method, path] of [
      ['GET', `/domains/${theirs.id}`],
      ['POST', `/domains/${theirs.id}/verify`],
      ['DELETE', `/domains/${theirs.id}`],
      ['GET', '/domains/dom_doesnotexist'],
      ['POST', '/domains/dom_doesnotexist/verify'],
      ['DELETE', '/domains/dom_doesnotexist'],
    ]) {
      expectError(await s.api(method, path), 404, 'DOMAIN_NOT_FOUND');
    }
    // Still there for its owner.
    assert.equal((await s.api('GET', `/domains/${theirs.id}`, undefined, { key: other.key })).status, 200);
  });

  test('a read-only key may list but not add, verify or delete; no key is 401', async () => {
    const d = await add('readonly.example.com');
    const { createApiKey } = await import('../../src/domain/accounts/apikeys.ts');
    const roKey = (await createApiKey(s.server.ctx, s.accountId, { name: 'ro', readOnly: true })).key;
    assert.equal((await s.api('GET', '/domains', undefined, { key: roKey })).status, 200);
    expectError(await s.api('POST', '/domains', { domain: 'ro2.example.com' }, { key: roKey }), 403, 'FORBIDDEN');
    expectError(await s.api('POST', `/domains/${d.id}/verify`, undefined, { key: roKey }), 403, 'FORBIDDEN');
    expectError(await s.api('DELETE', `/domains/${d.id}`, undefined, { key: roKey }), 403, 'FORBIDDEN');
    expectError(await s.api('GET', '/domains', undefined, { key: null }), 401, 'UNAUTHORIZED');
  });
});

describe('verification against DNS', () => {
  test('no records: stays pending/pending, and the check time is recorded', async () => {
    const d = await add('nothing.example.com');
    const v = await verify(d.id);
    assert.equal(v.sendingStatus, 'pending');
    assert.equal(v.verificationStatus, 'pending');
    assert.equal(v.receivingStatus, 'pending');
    assert.equal(v.lastCheckError, null);
    assert.ok(v.lastCheckedAt);
    assert.deepEqual(
      v.dnsCheck.map((c: any) => [c.role, c.state]),
      [
        ['ownership', 'missing'],
        ['dkim', 'missing'],
        ['spf', 'missing'],
        ['dmarc', 'missing'],
        ['mx', 'missing'],
        ['mta_sts', 'missing'],
        ['mta_sts_host', 'missing'],
        ['tls_rpt', 'missing'],
      ],
    );
    assert.deepEqual(await verifiedEvents(s, d.id), []);
  });

  test('only the ownership TXT: pending_dkim; then every record as returned: verified/verified, event recorded once', async () => {
    const d = await add('flow.example.com');
    publish([ownershipOf(d)]);
    let v = await verify(d.id);
    assert.equal(v.sendingStatus, 'pending_dkim');
    assert.equal(v.verificationStatus, 'pending_dkim');
    assert.equal(v.receivingStatus, 'pending');
    assert.equal(v.sendingVerifiedAt, null);

    publish(d.dnsRecords);
    v = await verify(d.id);
    assert.equal(v.sendingStatus, 'verified');
    assert.equal(v.verificationStatus, 'verified');
    assert.equal(v.receivingStatus, 'verified');
    assert.ok(v.sendingVerifiedAt && v.receivingVerifiedAt);
    assert.deepEqual(
      v.dnsCheck.map((c: any) => c.state),
      ['found', 'found', 'found', 'found', 'found', 'found', MTA_STS_HOST_STATE, 'found'],
    );
    // GET shows the same state (without the transient dnsCheck).
    const { dnsCheck: _, ...view } = v;
    assert.deepEqual((await s.api('GET', `/domains/${d.id}`)).body, view);

    // The event carries the Domain object and is recorded once, however often one verifies.
    const again = await verify(d.id);
    assert.equal(again.sendingVerifiedAt, v.sendingVerifiedAt, 'a repeat check keeps the verified time');
    const evs = await verifiedEvents(s, d.id);
    assert.equal(evs.length, 1);
    assert.equal(evs[0].accountId, s.accountId);
    const payload = JSON.parse(evs[0].data);
    assert.deepEqual(Object.keys(payload).sort(), DOMAIN_FIELDS);
    assert.equal(payload.sendingStatus, 'verified');
    assert.equal(payload.sendingVerifiedAt, v.sendingVerifiedAt);
  });

  test('a DKIM record with another key is failed; a wrong ownership token is failed; fixing them verifies', async () => {
    const d = await add('wrongdkim.example.com');
    const other = await add('otherkey.example.com');
    publish([ownershipOf(d), { ...dkimOf(d), value: dkimOf(other).value }]);
    let v = await verify(d.id);
    assert.equal(v.sendingStatus, 'failed');
    assert.equal(v.verificationStatus, 'failed');
    assert.equal(v.dnsCheck.find((c: any) => c.role === 'dkim').state, 'wrong');

    // An empty (revoked) key, or two records at the selector, are wrong too.
    publish([ownershipOf(d), { ...dkimOf(d), value: 'v=DKIM1; k=rsa; p=' }]);
    assert.equal((await verify(d.id)).sendingStatus, 'failed');

    // The token of an earlier add of the domain: present but wrong.
    publish([{ ...ownershipOf(d), value: ownershipOf(other).value }, dkimOf(d)]);
    v = await verify(d.id);
    assert.equal(v.sendingStatus, 'failed');
    assert.equal(v.dnsCheck.find((c: any) => c.role === 'ownership').state, 'wrong');

    // failed is not final: the next check after the fix verifies.
    publish([ownershipOf(d), dkimOf(d)]);
    v = await verify(d.id);
    assert.equal(v.sendingStatus, 'verified');
    assert.equal((await verifiedEvents(s, d.id)).length, 1);
  });

  test('the DKIM key published split into several strings and with spaces inside p= is recognised', async () => {
    const d = await add('split.example.com');
    const value = dkimOf(d)
      .value.replace(/p=(.{40})/, 'p=$1 ')
      .replace('; ', ';  ');
    publish([ownershipOf(d), { ...dkimOf(d), value }]);
    assert.equal((await verify(d.id)).sendingStatus, 'verified');
  });

  test('MX elsewhere: receiving failed (sending unaffected); no MX: receiving pending; MX with trailing dot and other case: verified', async () => {
    const d = await add('mx.example.com');
    publish([...d.sendingDnsRecords]);
    dns.add('mx.example.com', { type: 'MX', exchange: 'mail.elsewhere.example', priority: 10 });
    let v = await verify(d.id);
    assert.equal(v.sendingStatus, 'verified');
    assert.equal(v.receivingStatus, 'failed');
    assert.equal(v.receivingVerifiedAt, null);
    assert.match(v.dnsCheck.find((c: any) => c.role === 'mx').detail, /mail\.elsewhere\.example/);

    publish([...d.sendingDnsRecords]);
    v = await verify(d.id);
    assert.equal(v.receivingStatus, 'pending');

    dns.add('mx.example.com', { type: 'MX', exchange: 'backup.elsewhere.example', priority: 20 });
    dns.add('mx.example.com', { type: 'MX', exchange: `${HOST.toUpperCase()}.`, priority: 10 });
    v = await verify(d.id);
    assert.equal(v.receivingStatus, 'verified');
    assert.ok(v.receivingVerifiedAt);

    // Verification is refreshed both ways: records removed later bring the status back.
    unpublish(d);
    v = await verify(d.id);
    assert.equal(v.sendingStatus, 'pending');
    assert.equal(v.receivingStatus, 'pending');
    assert.ok(v.sendingVerifiedAt, 'the last time it was verified is kept');
  });

  test('SERVFAIL or a timeout leaves the statuses unchanged and says so; never failed', async () => {
    const d = await add('outage.example.com');
    publish(d.dnsRecords);
    const good = await verify(d.id);
    assert.equal(good.sendingStatus, 'verified');
    assert.equal(good.receivingStatus, 'verified');

    dns.servfail(dkimOf(d).name);
    let v = await verify(d.id);
    assert.equal(v.sendingStatus, 'verified');
    assert.equal(v.receivingStatus, 'verified');
    assert.match(v.lastCheckError, /sending status left unchanged/);
    assert.match(v.lastCheckError, /SERVFAIL|ESERVFAIL/);
    assert.equal(v.dnsCheck.find((c: any) => c.role === 'dkim').state, 'unknown');
    assert.equal((await s.api('GET', `/domains/${d.id}`)).body.lastCheckError, v.lastCheckError);

    // Timeout on the MX lookup, from a pending domain: receiving stays pending, sending moves on.
    const p = await add('timeout.example.com');
    publish(p.sendingDnsRecords);
    dns.blackhole('timeout.example.com');
    v = await verify(p.id);
    assert.equal(v.receivingStatus, 'pending');
    assert.match(v.lastCheckError, /receiving status left unchanged/);
    assert.match(v.lastCheckError, /TIMEOUT/i);
    // SPF lives at the blackholed name too: its state is unknown, but it gates nothing.
    assert.equal(v.sendingStatus, 'verified');

    // When DNS answers again the note goes away.
    dns.clear(dkimOf(d).name);
    publish(d.dnsRecords);
    v = await verify(d.id);
    assert.equal(v.lastCheckError, null);
    assert.equal((await verifiedEvents(s, d.id)).length, 1);
  });

  test('two accounts claim one name: the first to verify with its own records wins; the other claim is 409 DOMAIN_EXISTS on verify and nobody can add the name any more', async () => {
    const squatter = await s.newAccount('squatter');
    const squat = await add('claimed.example.com', s, squatter.key);
    // The real owner is not shut out by the older, unverified claim.
    const owner = await add('claimed.example.com');
    assert.notEqual(owner.id, squat.id);
    // Only the owner can publish: its own token and DKIM key verify its own claim.
    publish(owner.dnsRecords);
    const won = await verify(owner.id);
    assert.equal(won.sendingStatus, 'verified');
    // Even with its own records published later, the other claim cannot be verified too.
    publish(squat.dnsRecords);
    expectError(await s.api('POST', `/domains/${squat.id}/verify`, undefined, { key: squatter.key }), 409, 'DOMAIN_EXISTS');
    assert.equal((await s.api('GET', `/domains/${squat.id}`, undefined, { key: squatter.key })).body.sendingStatus, 'pending');
    assert.equal((await verifiedEvents(s, squat.id)).length, 0);
    // A third account cannot claim a verified name.
    const late = await s.newAccount('late');
    expectError(await s.api('POST', '/domains', { domain: 'claimed.example.com' }, { key: late.key }), 409, 'DOMAIN_EXISTS');
    // The owner's claim (the younger one) is the name's key: what its mail is signed with.
    assert.equal((await s.api('GET', `/domains/${owner.id}`)).body.sendingStatus, 'verified');
    assert.equal(dkimOf(owner).value, dkimTxtValue((await publishedKeyFor(s.server.ctx, 'claimed.example.com'))!.publicKey));
    unpublish(owner);
  });

  test('a domain verified, downgraded and verified again records a second event (each transition to verified)', async () => {
    const d = await add('again.example.com');
    publish(d.dnsRecords);
    const first = await verify(d.id);
    unpublish(d);
    assert.equal((await verify(d.id)).sendingStatus, 'pending');
    publish(d.dnsRecords);
    const second = await verify(d.id);
    assert.equal(second.sendingStatus, 'verified');
    assert.ok(second.sendingVerifiedAt >= first.sendingVerifiedAt);
    assert.equal((await verifiedEvents(s, d.id)).length, 2);
  });
});

describe('inboxes on a custom domain', () => {
  test('unverified: 409 DOMAIN_NOT_VERIFIED; verified: domainId + local part or full address; mail arrives; delete moves inboxes and keeps messages', async () => {
    const d = await add('inboxes.example.com');
    expectError(await s.api('POST', '/inboxes', { domainId: d.id, address: 'support' }), 409, 'DOMAIN_NOT_VERIFIED');
    expectError(await s.api('POST', '/inboxes', { address: 'support@inboxes.example.com' }), 409, 'DOMAIN_NOT_VERIFIED');
    publish([ownershipOf(d)]);
    assert.equal((await verify(d.id)).sendingStatus, 'pending_dkim');
    expectError(await s.api('POST', '/inboxes', { domainId: d.id }), 409, 'DOMAIN_NOT_VERIFIED');

    publish(d.dnsRecords);
    await verify(d.id);
    const a = await s.api('POST', '/inboxes', { domainId: d.id, address: 'Support' });
    assert.equal(a.status, 201, a.text);
    assert.equal(a.body.address, 'support@inboxes.example.com');
    assert.equal(a.body.domainId, d.id);
    const b = await s.api('POST', '/inboxes', { address: 'Sales@Inboxes.Example.com' });
    assert.equal(b.status, 201, b.text);
    assert.equal(b.body.address, 'sales@inboxes.example.com');
    assert.equal(b.body.domainId, d.id);
    const c = await s.api('POST', '/inboxes', { domainId: d.id });
    assert.equal(c.status, 201, c.text);
    assert.match(c.body.address, /^[a-z]+-[a-z]+-[a-z]+-\d{1,3}@inboxes\.example\.com$/);
    expectError(await s.api('POST', '/inboxes', { domainId: d.id, address: 'support' }), 409, 'ADDRESS_TAKEN');
    expectError(await s.api('POST', '/inboxes', { domainId: d.id, address: 'x@other.example.com' }), 400, 'INVALID_ADDRESS');

    // Another account can neither use the domainId nor an address on the domain.
    const other = await s.newAccount('intruder');
    expectError(await s.api('POST', '/inboxes', { domainId: d.id }, { key: other.key }), 404, 'DOMAIN_NOT_FOUND');
    expectError(await s.api('POST', '/inboxes', { address: 'evil@inboxes.example.com' }, { key: other.key }), 400, 'INVALID_ADDRESS');

    // Mail to the custom-domain address is received over SMTP.
    const { client } = await SmtpClient.open(s.server.smtpPort);
    await client.cmd('EHLO sender.example.net');
    const body = Buffer.from('From: Alice <alice@sender.example.net>\r\nTo: support@inboxes.example.com\r\nSubject: hello custom\r\nMessage-ID: <custom-1@sender.example.net>\r\n\r\nHi there\r\n');
    const reply = await client.send('alice@sender.example.net', ['support@inboxes.example.com'], body);
    assert.equal(reply.code, 250, reply.text);
    await client.quit();
    const before = await s.api('GET', `/inboxes/${a.body.id}/messages`);
    assert.equal(before.body.total, 1);
    assert.equal(before.body.data[0].subject, 'hello custom');

    // support@agents.test is already taken: the moved inbox gets a suffix.
    const squatter = await s.api('POST', '/inboxes', { address: `support@${SHARED}` });
    assert.equal(squatter.status, 201, squatter.text);

    const del = await s.api('DELETE', `/domains/${d.id}`);
    assert.equal(del.status, 204);
    assert.equal(del.text, '');
    expectError(await s.api('GET', `/domains/${d.id}`), 404, 'DOMAIN_NOT_FOUND');
    expectError(await s.api('DELETE', `/domains/${d.id}`), 404, 'DOMAIN_NOT_FOUND');

    const movedA = (await s.api('GET', `/inboxes/${a.body.id}`)).body;
    assert.equal(movedA.address, `support-2@${SHARED}`);
    assert.equal(movedA.domainId, null);
    const movedB = (await s.api('GET', `/inboxes/${b.body.id}`)).body;
    assert.equal(movedB.address, `sales@${SHARED}`);
    assert.equal(movedB.domainId, null);
    assert.equal((await s.api('GET', `/inboxes/${c.body.id}`)).body.address, c.body.address.replace('inboxes.example.com', SHARED));
    const after = await s.api('GET', `/inboxes/${a.body.id}/messages`);
    assert.equal(after.body.total, 1);
    assert.equal(after.body.data[0].id, before.body.data[0].id);

    // The name can be added again (with a new key and token).
    const again = await add('inboxes.example.com');
    assert.notEqual(again.id, d.id);
    assert.notEqual(ownershipOf(again).value, ownershipOf(d).value);
    assert.notEqual(dkimOf(again).value, dkimOf(d).value);
  });
});

describe('DKIM signing keys', () => {
  test('signingKeyFor: the custom domain key signs what its published record verifies; the shared key is made once, mode 0600', async () => {
    const d = await add('signing.example.com');
    const k = await signingKeyFor(s.server.ctx, 'Signing.Example.com.');
    assert.ok(k);
    assert.equal(k.domainName, 'signing.example.com');
    assert.equal(k.selector, dkimOf(d).name.split('.')[0]);
    const p = /p=(.+)$/.exec(dkimOf(d).value)![1];
    const pub = createPublicKey({ key: Buffer.from(p, 'base64'), format: 'der', type: 'spki' });
    const sig = sign('sha256', Buffer.from('message'), k.privateKey);
    assert.ok(verifySignature('sha256', Buffer.from('message'), pub, sig));

    assert.equal(await signingKeyFor(s.server.ctx, 'unknown.example.org'), undefined);

    const shared = await signingKeyFor(s.server.ctx, SHARED);
    assert.ok(shared);
    assert.equal(shared.domainName, SHARED);
    assert.deepEqual(await signingKeyFor(s.server.ctx, SHARED.toUpperCase()), shared);
    // Kept as a private file on SQLite; on PostgreSQL as the one row every node signs with.
    if (s.server.ctx.store.dialect === 'sqlite') {
      const file = join(s.dataDir, 'dkim', `${SHARED}.json`);
      assert.equal(statSync(file).mode & 0o777, 0o600);
    } else {
      const rows = await rawRows<[string]>(s.server.ctx.db, 'SELECT value FROM secrets WHERE name = ?', [`dkim/${SHARED}.json`]);
      assert.equal(rows.length, 1);
      assert.equal(JSON.parse(rows[0]![0]).privateKey, shared.privateKey);
    }
  });
});

describe('background re-check', () => {
  test('unverified domains turn verified without a verify call; verified ones are left alone', async () => {
    const t = await startTestServer({ dns: { servers: [dns.server], timeout: '300ms' }, domains: { recheck_interval: '100ms' } });
    try {
      const d = await add('background.example.com', t);
      publish(d.dnsRecords);
      const v = await until(async () => {
        const got = (await t.api('GET', `/domains/${d.id}`)).body;
        return got.sendingStatus === 'verified' && got.receivingStatus === 'verified' && got;
      }, 'the background re-check to verify the domain');
      assert.ok(v.lastCheckedAt);
      assert.equal((await verifiedEvents(t, d.id)).length, 1);

      // Once verified both ways it is not re-checked: removing the records changes nothing.
      const checked = v.lastCheckedAt;
      unpublish(d);
      const queriesBefore = dns.queries.length;
      // Instead of a fixed wait: an unverified domain is re-checked, and its lastCheckedAt moved,
      // by every pass. Three moves: a whole pass ran after this point, and asked nothing about ours.
      const sentinel = await add('sentinel.example.com', t);
      let seen = (await t.api('GET', `/domains/${sentinel.id}`)).body.lastCheckedAt;
      for (let pass = 0; pass < 3; pass++) {
        seen = await until(async () => {
          const at = (await t.api('GET', `/domains/${sentinel.id}`)).body.lastCheckedAt;
          return at !== seen && at;
        }, 'a re-check pass');
      }
      const later = (await t.api('GET', `/domains/${d.id}`)).body;
      assert.equal(later.sendingStatus, 'verified');
      assert.equal(later.lastCheckedAt, checked);
      assert.ok(!dns.queries.slice(queriesBefore).some((q) => q.includes('background.example.com')));
    } finally {
      await t.close();
    }
  });
});

describe('CLI', () => {
  /** The records in zone-file lines: owner, type and value (TXT strings joined, RFC 1035). */
  function parseZone(text: string): Rec[] {
    const out: Rec[] = [];
    for (const line of text.split('\n')) {
      if (!line.trim() || line.startsWith(';')) continue;
      const m = /^(\S+)\.\s+(\d+)\s+IN\s+(TXT|MX|CNAME)\s+(.*)$/.exec(line);
      assert.ok(m, `not a zone line: ${line}`);
      if (m[3] === 'TXT') {
        const strings = [...m[4].matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((x) => x[1].replace(/\\(.)/g, '$1'));
        for (const str of m[4].matchAll(/"((?:[^"\\]|\\.)*)"/g)) assert.ok(Buffer.byteLength(str[1]) <= 255);
        out.push({ type: 'TXT', name: m[1], value: strings.join('') });
      } else if (m[3] === 'CNAME') {
        assert.ok(m[4].endsWith('.'));
        out.push({ type: 'CNAME', name: m[1], value: m[4].slice(0, -1) });
      } else {
        const [prio, host] = m[4].split(/\s+/);
        assert.ok(host.endsWith('.'));
        out.push({ type: 'MX', name: m[1], value: host.slice(0, -1), priority: Number(prio) });
      }
    }
    return out;
  }

  function configFile(): string {
    const file = join(s.dataDir, 'cli.toml');
    writeFileSync(file, `data_dir = ${JSON.stringify(s.dataDir)}\nhostname = "${HOST}"\nshared_domain = "${SHARED}"\n[dns]\nservers = ["${dns.server}"]\ntimeout = "300ms"\n`);
    return file;
  }

  test('add prints paste-able records; publishing exactly those and verifying gives verified/verified; show reports each record in DNS', async () => {
    const config = configFile();
    const added = await runCli(['--config', config, 'domains', 'add', 'cli.example.com', '--account', s.accountId]);
    assert.equal(added.code, 0, added.stderr);
    const records = parseZone(added.stdout);
    assert.deepEqual(
      records.map((r) => `${r.type} ${r.name}`),
      [
        'TXT _mailroom.cli.example.com',
        `TXT ${records[1].name}`,
        'TXT cli.example.com',
        'TXT _dmarc.cli.example.com',
        'MX cli.example.com',
        'TXT _mta-sts.cli.example.com',
        'CNAME mta-sts.cli.example.com',
        'TXT _smtp._tls.cli.example.com',
      ],
    );
    const dkimLine = added.stdout.split('\n').find((l) => l.includes('._domainkey.'))!;
    assert.match(dkimLine, /^mr\d{6}\._domainkey\.cli\.example\.com\. 3600 IN TXT "v=DKIM1; k=rsa; p=[^"]{200,}" "[^"]+"$/);
    assert.match(added.stdout, /cli\.example\.com\. 3600 IN MX 10 mx\.test\.localhost\.$/m);

    // The API sees the domain with exactly the same records.
    const list = (await s.api('GET', '/domains')).body.data;
    const apiDomain = list.find((d: any) => d.domain === 'cli.example.com');
    assert.ok(apiDomain);
    assert.deepEqual(records, apiDomain.dnsRecords);

    const before = await runCli(['--config', config, 'domains', 'show', apiDomain.id]);
    assert.equal(before.code, 0, before.stderr);
    assert.match(before.stdout, /sending: pending, receiving: pending/);
    assert.equal((before.stdout.match(/in DNS now: missing/g) ?? []).length, 8);
    assert.deepEqual(parseZone(before.stdout), records);

    publish(records);
    const verified = await runCli(['--config', config, 'domains', 'verify', 'cli.example.com']);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, /sending: verified, receiving: verified/);
    const got = (await s.api('GET', `/domains/${apiDomain.id}`)).body;
    assert.equal(got.sendingStatus, 'verified');
    assert.equal(got.receivingStatus, 'verified');
    assert.equal((await verifiedEvents(s, apiDomain.id)).length, 1);

    // Independent runs go in parallel: each CLI run costs a process start.
    const [shown, listed] = await Promise.all([runCli(['--config', config, 'domains', 'show', 'cli.example.com', '--json']), runCli(['--config', config, 'domains', 'list', '--json'])]);
    assert.equal(shown.code, 0, shown.stderr);
    const json = JSON.parse(shown.stdout);
    assert.deepEqual(
      json.records.map((r: any) => [r.role, r.state]),
      [
        ['ownership', 'found'],
        ['dkim', 'found'],
        ['spf', 'found'],
        ['dmarc', 'found'],
        ['mx', 'found'],
        ['mta_sts', 'found'],
        ['mta_sts_host', MTA_STS_HOST_STATE],
        ['tls_rpt', 'found'],
      ],
    );
    assert.equal(json.status.sendingStatus, 'verified');

    assert.ok(JSON.parse(listed.stdout).data.some((d: any) => d.id === apiDomain.id));

    const removed = await runCli(['--config', config, 'domains', 'remove', apiDomain.id]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, /removed cli\.example\.com/);
    expectError(await s.api('GET', `/domains/${apiDomain.id}`), 404, 'DOMAIN_NOT_FOUND');
  });

  test('show shared prints the shared domain records with the key signingKeyFor uses; unknown domains exit 1', async () => {
    const config = configFile();
    const errorRuns = [
      ['domains', 'remove', 'nope.example.com'],
      ['domains', 'add', SHARED],
    ];
    const [shown, ...failed] = await Promise.all([runCli(['--config', config, 'domains', 'show', 'shared', '--no-check']), ...errorRuns.map((args) => runCli(['--config', config, ...args]))]);
    assert.equal(shown.code, 0, shown.stderr);
    const records = parseZone(shown.stdout);
    assert.deepEqual(
      records.map((r) => r.type + ' ' + r.name.replace(/^mr\d{6}/, 'SEL')),
      [`TXT SEL._domainkey.${SHARED}`, `TXT ${SHARED}`, `TXT _dmarc.${SHARED}`, `MX ${SHARED}`],
    );
    const key = (await signingKeyFor(s.server.ctx, SHARED))!;
    assert.equal(records[0].name, `${key.selector}._domainkey.${SHARED}`);
    const derived = createPublicKey(key.privateKey).export({ type: 'spki', format: 'der' }).toString('base64');
    assert.equal(records[0].value, `v=DKIM1; k=rsa; p=${derived}`);

    // One not-found and one refused add cover the CLI's error path (one line, exit 1).
    for (const [i, res] of failed.entries()) {
      assert.equal(res.code, 1, `${errorRuns[i].join(' ')}: ${res.stdout}`);
      assert.match(res.stderr, /^mailroom: /);
      assert.doesNotMatch(res.stderr, /\n\s+at /, 'no stack trace');
    }
  });
});
