// Outbound transport security against real peers on loopback: MTA-STS policies (RFC 8461)
// served over HTTPS by a policy server whose certificates come from a test CA the sender trusts
// (`outbound.tls_ca_file`), and a capturing MX presenting certificates of the same CA.
// Covers enforce with a matching and a non-matching MX, a listed MX with a certificate for
// another name, testing mode, a failed policy fetch, the cache within max_age and after it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../../src/context.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { startPolicyServer, type TestPolicyServer } from '../support/mta-sts-server.ts';
import { startTestCa, type TestCa } from '../support/test-ca.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';

let t: TestServer;
let dns: TestDns;
let mx: TestMx;
let ca: TestCa;
let policies: TestPolicyServer;
let inboxId: string;
/** The server's clock runs this far ahead of the real one (to let cached policies expire). */
let offset = 0;
const clock: Clock = { now: () => new Date(Date.now() + offset) };

/** A domain whose MX `mxName` is the capturing server, presenting a certificate for `certName`. */
function remoteDomain(domain: string, mxName: string, certName = mxName): void {
  dns.set(domain, [{ type: 'MX', exchange: mxName, priority: 10 }]);
  dns.set(mxName, [{ type: 'A', address: '127.0.0.1' }]);
  mx.certificate(mxName, ca.issue([certName]));
}

/** Publishes an MTA-STS policy for `domain`: the TXT record and the policy file. */
function publishPolicy(domain: string, id: string, mode: string, mxPatterns: string[], maxAge = 86_400): void {
  dns.set(`_mta-sts.${domain}`, [{ type: 'TXT', value: `v=STSv1; id=${id}` }]);
  dns.set(`mta-sts.${domain}`, [{ type: 'A', address: '127.0.0.1' }]);
  policies.serve(domain, ['version: STSv1', `mode: ${mode}`, ...mxPatterns.map((p) => `mx: ${p}`), `max_age: ${maxAge}`].join('\r\n') + '\r\n');
}

async function send(to: string): Promise<string> {
  const res = await t.api('POST', `/inboxes/${inboxId}/messages`, { to: [to], subject: `to ${to}`, bodyText: 'hello' });
  assert.equal(res.status, 202, res.text);
  return res.body.id;
}

/** The recipient once its first attempt ended (sent, or deferred with its reason). */
async function outcome(id: string): Promise<{ status: string; response: string }> {
  return until(`an outcome for ${id}`, async () => {
    const m = (await t.api('GET', `/messages/${id}`)).body;
    const r = m.recipients[0];
    return ['sent', 'deferred', 'bounced', 'failed'].includes(r.status) ? r : undefined;
  }, 20_000);
}

before(async () => {
  ca = startTestCa();
  dns = await startTestDns();
  mx = await startTestMx();
  policies = await startPolicyServer(ca);
  t = await startTestServer(
    {
      // One attempt in the test's time: a deferred recipient stays deferred with its reason.
      outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['1h'], timeout: '5s', mta_sts_port: policies.port, tls_ca_file: ca.caFile, mta_sts_timeout: '3s' },
      dns: { servers: [dns.server], timeout: '1s' },
    },
    { clock },
  );
  inboxId = (await t.api('POST', '/inboxes', { address: 'sts-sender' })).body.id;
});

after(async () => {
  await t?.close();
  await mx?.close();
  await policies?.close();
  await dns?.close();
  ca?.close();
});

describe('outbound MTA-STS', () => {
  test('enforce, MX named by the policy with a valid certificate: delivered over TLS', async () => {
    remoteDomain('sts-ok.test', 'mx.sts-ok.test');
    publishPolicy('sts-ok.test', 'one', 'enforce', ['mx.sts-ok.test']);
    const r = await outcome(await send('alice@sts-ok.test'));
    assert.equal(r.status, 'sent', r.response);
    const got = mx.messages.find((m) => m.rcptTo.includes('alice@sts-ok.test'));
    assert.equal(got?.secure, true);
    assert.ok(policies.fetches.includes('mta-sts.sts-ok.test'));
  });

  test('enforce, a wildcard pattern matches one label', async () => {
    remoteDomain('sts-wild.test', 'mx1.sts-wild.test');
    publishPolicy('sts-wild.test', 'w1', 'enforce', ['*.sts-wild.test']);
    assert.equal((await outcome(await send('bob@sts-wild.test'))).status, 'sent');
  });

  test('enforce, MX the policy does not name: deferred with the reason, nothing delivered', async () => {
    remoteDomain('sts-bad.test', 'mx.sts-bad.test');
    publishPolicy('sts-bad.test', 'one', 'enforce', ['mx.elsewhere.test']);
    const r = await outcome(await send('carol@sts-bad.test'));
    assert.equal(r.status, 'deferred');
    assert.match(r.response, /MTA-STS policy of sts-bad\.test \(enforce\) does not name mx\.sts-bad\.test/);
    assert.equal(mx.attempts('carol@sts-bad.test'), 0);
  });

  test('enforce, named MX whose certificate is for another name: deferred, nothing delivered', async () => {
    remoteDomain('sts-cert.test', 'mx.sts-cert.test', 'someone-else.test');
    publishPolicy('sts-cert.test', 'one', 'enforce', ['mx.sts-cert.test']);
    const r = await outcome(await send('dave@sts-cert.test'));
    assert.equal(r.status, 'deferred');
    assert.match(r.response, /MTA-STS \(enforce\): .*(altnames|does not match)/i);
    assert.equal(mx.attempts('dave@sts-cert.test'), 0);
  });

  test('testing mode: a non-matching MX and a wrong certificate are reported, not blocked', async () => {
    remoteDomain('sts-testing.test', 'mx.sts-testing.test', 'someone-else.test');
    publishPolicy('sts-testing.test', 'one', 'testing', ['mx.elsewhere.test']);
    assert.equal((await outcome(await send('erin@sts-testing.test'))).status, 'sent');
    remoteDomain('sts-testing2.test', 'mx.sts-testing2.test', 'someone-else.test');
    publishPolicy('sts-testing2.test', 'one', 'testing', ['mx.sts-testing2.test']);
    assert.equal((await outcome(await send('fred@sts-testing2.test'))).status, 'sent');
  });

  test('a policy that cannot be fetched (404) leaves the domain without a policy', async () => {
    remoteDomain('sts-missing.test', 'mx.sts-missing.test', 'someone-else.test');
    dns.set('_mta-sts.sts-missing.test', [{ type: 'TXT', value: 'v=STSv1; id=x' }]);
    dns.set('mta-sts.sts-missing.test', [{ type: 'A', address: '127.0.0.1' }]);
    assert.equal((await outcome(await send('gina@sts-missing.test'))).status, 'sent');
  });

  test('the policy is cached within max_age, fetched again once it has expired', async () => {
    remoteDomain('sts-cache.test', 'mx.sts-cache.test');
    publishPolicy('sts-cache.test', 'c1', 'enforce', ['mx.sts-cache.test'], 600);
    assert.equal((await outcome(await send('hank@sts-cache.test'))).status, 'sent');
    const fetched = policies.fetches.filter((h) => h === 'mta-sts.sts-cache.test').length;
    assert.equal(fetched, 1);

    // The file changes but the TXT id does not: the cached policy still holds.
    publishPolicy('sts-cache.test', 'c1', 'enforce', ['mx.moved.test'], 600);
    assert.equal((await outcome(await send('ida@sts-cache.test'))).status, 'sent');
    assert.equal(policies.fetches.filter((h) => h === 'mta-sts.sts-cache.test').length, 1);

    // Past max_age the policy is fetched again, and the new one is enforced.
    offset += 601_000;
    const r = await outcome(await send('jack@sts-cache.test'));
    assert.equal(r.status, 'deferred');
    assert.match(r.response, /does not name mx\.sts-cache\.test/);
    assert.equal(policies.fetches.filter((h) => h === 'mta-sts.sts-cache.test').length, 2);
  });

  test('outbound.mta_sts = false turns it off: the policy is neither fetched nor enforced', async () => {
    remoteDomain('sts-off.test', 'mx.sts-off.test');
    publishPolicy('sts-off.test', 'one', 'enforce', ['mx.elsewhere.test']);
    const off = await startTestServer({
      outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['1h'], timeout: '5s', mta_sts: false, mta_sts_port: policies.port, tls_ca_file: ca.caFile },
      dns: { servers: [dns.server], timeout: '1s' },
      http: { shutdown_grace: '100ms' },
    });
    try {
      const ib = (await off.api('POST', '/inboxes', { address: 'sts-off' })).body;
      const res = await off.api('POST', `/inboxes/${ib.id}/messages`, { to: ['kim@sts-off.test'], subject: 'off', bodyText: 'hello' });
      assert.equal(res.status, 202, res.text);
      const r = await until('sent', async () => {
        const m = (await off.api('GET', `/messages/${res.body.id}`)).body;
        return m.recipients[0].status === 'deferred' || m.recipients[0].status === 'sent' ? m.recipients[0] : undefined;
      });
      assert.equal(r.status, 'sent', r.response);
      assert.ok(!policies.fetches.includes('mta-sts.sts-off.test'));
    } finally {
      await off.close();
    }
  });

  test('a fetched policy outlives a restart: a blocked fetch afterwards does not lift it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-sts-'));
    const o = {
      outbound: { mode: 'email', mx_port: mx.port, retry_schedule: ['1h'], timeout: '5s', mta_sts_port: policies.port, tls_ca_file: ca.caFile },
      dns: { servers: [dns.server], timeout: '1s' },
      http: { shutdown_grace: '100ms' },
    };
    remoteDomain('sts-keep.test', 'mx.sts-keep.test');
    publishPolicy('sts-keep.test', 'k1', 'enforce', ['mx.sts-keep.test']);
    let server: TestServer | undefined = await startTestServer(o, { dataDir });
    try {
      const key = server.key;
      const sendVia = async (s: TestServer, ib: string, to: string) => {
        const res = await s.api('POST', `/inboxes/${ib}/messages`, { to: [to], subject: 'keep', bodyText: 'hello' }, { key });
        assert.equal(res.status, 202, res.text);
        return until('an outcome', async () => {
          const r = (await s.api('GET', `/messages/${res.body.id}`, undefined, { key })).body.recipients[0];
          return r.status === 'sent' || r.status === 'deferred' ? r : undefined;
        });
      };
      const ib = (await server.api('POST', '/inboxes', { address: 'sts-keep' })).body.id;
      assert.equal((await sendVia(server, ib, 'lea@sts-keep.test')).status, 'sent');
      await server.close();
      server = undefined;
      // An attacker now answers for the domain: another MX, and the policy fetch fails.
      remoteDomain('sts-keep.test', 'mx.attacker.test');
      policies.withdraw('sts-keep.test');
      server = await startTestServer(o, { dataDir });
      const r = await sendVia(server, ib, 'max@sts-keep.test');
      assert.equal(r.status, 'deferred');
      assert.match(r.response, /MTA-STS policy of sts-keep\.test \(enforce\) does not name mx\.attacker\.test/);
    } finally {
      await server?.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
