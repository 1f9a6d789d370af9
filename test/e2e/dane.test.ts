// Outbound DANE (RFC 7672) against real peers on loopback: the recipient zone is signed with
// ldnsutils and served by a validating unbound (test/support/dnssec.ts), the receiver is a real
// Postfix with its own certificate, and mailroom runs with `dns.dnssec = true`. Covers a
// matching DANE-EE record, a DANE-TA record, a mismatching record, no TLSA record, and
// `outbound.dane = false`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { Clock } from '../../src/context.ts';
import type { TlsReport } from '../../src/outbound/tls-rpt.ts';
import { startPolicyServer, type TestPolicyServer } from '../support/mta-sts-server.ts';
import { startTestCa, type TestCa } from '../support/test-ca.ts';
import { dnssecMissing, startSignedZone, tlsaDigest, type SignedZone } from '../support/dnssec.ts';
import { postfixMissing, startPostfix, type Mta } from '../support/mta.ts';
import { peerSkip } from '../support/peers.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

const skip = peerSkip(dnssecMissing()) || peerSkip(postfixMissing());

describe('outbound DANE', { skip }, () => {
  let postfix: Mta;
  let zone: SignedZone;
  let t: TestServer;
  let inboxId: string;
  let ca: TestCa;
  let policies: TestPolicyServer;
  /** The server's clock runs this far ahead of the real one (to make the day's TLS report due). */
  let offset = 0;
  const clock: Clock = { now: () => new Date(Date.now() + offset) };
  /** The Postfix MX: its certificate names it (CN postfix.remote.test). */
  const MX = 'postfix.remote.test';
  const records = (tlsa: string[]) => ['@ IN MX 10 postfix.remote.test.', 'postfix IN A 127.0.0.1', ...tlsa.map((r) => `_${postfix.port}._tcp.postfix IN TLSA ${r}`)];

  before(async () => {
    postfix = await startPostfix({ mailroomPort: 9, routeDomains: ['nowhere.test'] });
    zone = await startSignedZone('remote.test', records([]));
    ca = startTestCa();
    policies = await startPolicyServer(ca);
    t = await startTestServer(
      {
        outbound: { mode: 'email', mx_port: postfix.port, retry_schedule: ['1h'], timeout: '10s', mta_sts_port: policies.port, tls_ca_file: ca.caFile },
        dns: { servers: [zone.server], timeout: '2s', dnssec: true },
        // The https TLS report collector is on loopback.
        webhooks: { allow_insecure_targets: true },
      },
      { clock },
    );
    inboxId = (await t.api('POST', '/inboxes', { address: 'dane-sender' })).body.id;
  });

  after(async () => {
    await t?.close();
    await zone?.close();
    await postfix?.stop();
    await policies?.close();
    ca?.close();
  });

  async function sendAndWait(server: TestServer, subject: string, inbox = inboxId): Promise<{ status: string; response: string }> {
    const res = await server.api('POST', `/inboxes/${inbox}/messages`, { to: ['alice@remote.test'], subject, bodyText: 'hello' });
    assert.equal(res.status, 202, res.text);
    return until(
      `an outcome of ${subject}`,
      async () => {
        const r = (await server.api('GET', `/messages/${res.body.id}`)).body.recipients[0];
        return ['sent', 'deferred', 'bounced', 'failed'].includes(r.status) ? r : undefined;
      },
      30_000,
    );
  }

  const deliveredWith = (subject: string) => postfix.delivered('alice').find((m) => m.includes(`Subject: ${subject}`));

  test('DANE-EE(3) SPKI SHA-256 matching the certificate: delivered over TLS', async () => {
    await zone.publish(records([`3 1 1 ${tlsaDigest(join(postfix.dir, 'tls.crt'), 'spki')}`]));
    const r = await sendAndWait(t, 'dane-ee match');
    assert.equal(r.status, 'sent', r.response);
    const got = await until('delivery by Postfix', () => deliveredWith('dane-ee match'));
    assert.match(got, /\(using TLS/);
  });

  test('DANE-TA(2) full certificate SHA-256 with the MX name in the certificate: delivered', async () => {
    await zone.publish(records([`2 0 1 ${tlsaDigest(join(postfix.dir, 'tls.crt'), 'cert')}`]));
    const r = await sendAndWait(t, 'dane-ta match');
    assert.equal(r.status, 'sent', r.response);
    await until('delivery by Postfix', () => deliveredWith('dane-ta match'));
  });

  test('a TLSA record the certificate does not match: deferred with the reason, nothing delivered', async () => {
    await zone.publish(records([`3 1 1 ${'00'.repeat(32)}`]));
    const r = await sendAndWait(t, 'dane mismatch');
    assert.equal(r.status, 'deferred');
    assert.match(r.response, new RegExp(`DANE: certificate of ${MX.replace(/\./g, '\\.')} matches none of its TLSA records`));
    assert.equal(deliveredWith('dane mismatch'), undefined);
  });

  test('no TLSA record: delivered as before (opportunistic TLS)', async () => {
    await zone.publish(records([]));
    const r = await sendAndWait(t, 'dane none');
    assert.equal(r.status, 'sent', r.response);
    await until('delivery by Postfix', () => deliveredWith('dane none'));
  });

  test('outbound.dane = false: a mismatching record is not looked at', async () => {
    await zone.publish(records([`3 1 1 ${'00'.repeat(32)}`]));
    const off = await startTestServer({
      outbound: { mode: 'email', mx_port: postfix.port, retry_schedule: ['1h'], timeout: '10s', dane: false },
      dns: { servers: [zone.server], timeout: '2s', dnssec: true },
      http: { shutdown_grace: '100ms' },
    });
    try {
      const ib = (await off.api('POST', '/inboxes', { address: 'dane-off' })).body.id;
      const r = await sendAndWait(off, 'dane off', ib);
      assert.equal(r.status, 'sent', r.response);
    } finally {
      await off.close();
    }
  });

  test('a TLSA answer that fails DNSSEC validation (bogus): the host is not used', async () => {
    const digest = tlsaDigest(join(postfix.dir, 'tls.crt'), 'spki');
    // Signed with the right digest, then changed: the signature no longer covers the record.
    await zone.publish(records([`3 1 1 ${digest}`]), (signed) => signed.replace(new RegExp(digest, 'i'), '11'.repeat(32)));
    const r = await sendAndWait(t, 'dane bogus');
    assert.equal(r.status, 'deferred');
    assert.match(r.response, /DANE: TLSA lookup of _\d+\._tcp\.postfix\.remote\.test failed DNSSEC validation/);
    assert.equal(deliveredWith('dane bogus'), undefined);
  });

  test("DANE takes precedence over MTA-STS; the day's TLS report names the tlsa policy", async () => {
    // An enforce policy naming another MX host: alone it would defer. The matching TLSA decides.
    policies.serve('remote.test', 'version: STSv1\r\nmode: enforce\r\nmx: elsewhere.remote.test\r\nmax_age: 86400\r\n');
    policies.certify('collector.remote.test');
    const digest = tlsaDigest(join(postfix.dir, 'tls.crt'), 'spki');
    await zone.publish([
      ...records([`3 1 1 ${digest}`]),
      '_mta-sts IN TXT "v=STSv1; id=p1"',
      'mta-sts IN A 127.0.0.1',
      `_smtp._tls IN TXT "v=TLSRPTv1; rua=https://collector.remote.test:${policies.port}/tlsrpt"`,
      'collector IN A 127.0.0.1',
    ]);
    // Whether a domain wants reports is looked up again after a minute: let the earlier answer go.
    offset += 61_000;
    const r = await sendAndWait(t, 'dane over sts');
    assert.equal(r.status, 'sent', r.response);
    await until('delivery by Postfix', () => deliveredWith('dane over sts'));

    offset += 86_400_000 + 30 * 60_000;
    t.server.ctx.notify('jobs');
    const post = await until('the TLS report', () => policies.posts.find((p) => p.path === '/tlsrpt'), 30_000);
    const report = JSON.parse(gunzipSync(post.body).toString('utf8')) as TlsReport;
    assert.equal(report.policies.length, 1);
    const [p] = report.policies;
    assert.equal(p.policy['policy-type'], 'tlsa');
    assert.equal(p.policy['policy-domain'], 'remote.test');
    assert.deepEqual(p.policy['mx-host'], [MX]);
    assert.deepEqual(p.policy['policy-string'], [`_${postfix.port}._tcp.${MX}. IN TLSA 3 1 1 ${digest}`]);
    assert.deepEqual(p.summary, { 'total-successful-session-count': 1, 'total-failure-session-count': 0 });
  });
});
