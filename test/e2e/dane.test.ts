// Outbound DANE (RFC 7672) against real peers on loopback: the recipient zone is signed with
// ldnsutils and served by a validating unbound (test/support/dnssec.ts), the receiver is a real
// Postfix with its own certificate, and mailroom runs with `dns.dnssec = true`. Covers a
// matching DANE-EE record, a DANE-TA record, a mismatching record, no TLSA record, and
// `outbound.dane = false`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
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
  /** The Postfix MX: its certificate names it (CN postfix.remote.test). */
  const MX = 'postfix.remote.test';
  const records = (tlsa: string[]) => ['@ IN MX 10 postfix.remote.test.', 'postfix IN A 127.0.0.1', ...tlsa.map((r) => `_${postfix.port}._tcp.postfix IN TLSA ${r}`)];

  before(async () => {
    postfix = await startPostfix({ mailroomPort: 9, routeDomains: ['nowhere.test'] });
    zone = await startSignedZone('remote.test', records([]));
    t = await startTestServer({
      outbound: { mode: 'email', mx_port: postfix.port, retry_schedule: ['1h'], timeout: '10s' },
      dns: { servers: [zone.server], timeout: '2s', dnssec: true },
    });
    inboxId = (await t.api('POST', '/inboxes', { address: 'dane-sender' })).body.id;
  });

  after(async () => {
    await t?.close();
    await zone?.close();
    await postfix?.stop();
  });

  async function sendAndWait(server: TestServer, subject: string, inbox = inboxId): Promise<{ status: string; response: string }> {
    const res = await server.api('POST', `/inboxes/${inbox}/messages`, { to: ['alice@remote.test'], subject, bodyText: 'hello' });
    assert.equal(res.status, 202, res.text);
    return until(`an outcome of ${subject}`, async () => {
      const r = (await server.api('GET', `/messages/${res.body.id}`)).body.recipients[0];
      return ['sent', 'deferred', 'bounced', 'failed'].includes(r.status) ? r : undefined;
    }, 30_000);
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
});
