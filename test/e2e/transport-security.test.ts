// Outbound transport security against real peers on loopback: MTA-STS policies (RFC 8461)
// served over HTTPS by a policy server whose certificates come from a test CA the sender trusts
// (`outbound.tls_ca_file`), and a capturing MX presenting certificates of the same CA.
// Covers enforce with a matching and a non-matching MX, a listed MX with a certificate for
// another name, testing mode, a failed policy fetch, the cache within max_age and after it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { simpleParser } from 'mailparser';
import type { Clock } from '../../src/context.ts';
import { tlsResults } from '../../src/store/schema.ts';
import type { TlsReport } from '../../src/outbound/tls-rpt.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { startPolicyServer, type TestPolicyServer } from '../support/mta-sts-server.ts';
import { startTestCa, type TestCa } from '../support/test-ca.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { sqlDb } from '../support/db.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;

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
  return until(
    `an outcome for ${id}`,
    async () => {
      const m = (await t.api('GET', `/messages/${id}`)).body;
      const r = m.recipients[0];
      return ['sent', 'deferred', 'bounced', 'failed'].includes(r.status) ? r : undefined;
    },
    20_000,
  );
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
      // The https report collector is on loopback.
      webhooks: { allow_insecure_targets: true },
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

  test('a policy larger than outbound.mta_sts_max_bytes is abandoned: no policy, delivered', async () => {
    remoteDomain('sts-huge.test', 'mx.sts-huge.test');
    publishPolicy('sts-huge.test', 'h1', 'enforce', ['mx.elsewhere.test', ...Array.from({ length: 4000 }, (_, i) => `mx${i}.padding.test`)]);
    assert.equal((await outcome(await send('nina@sts-huge.test'))).status, 'sent');
    assert.ok(policies.fetches.includes('mta-sts.sts-huge.test'));
  });

  test('a policy server that never answers: given up after outbound.mta_sts_timeout, delivered', async () => {
    remoteDomain('sts-slow.test', 'mx.sts-slow.test');
    dns.set('_mta-sts.sts-slow.test', [{ type: 'TXT', value: 'v=STSv1; id=s1' }]);
    dns.set('mta-sts.sts-slow.test', [{ type: 'A', address: '127.0.0.1' }]);
    policies.stall('sts-slow.test');
    assert.equal((await outcome(await send('otto@sts-slow.test'))).status, 'sent');
    assert.equal(policies.fetches.filter((h) => h === 'mta-sts.sts-slow.test').length, 1);
    // The next message within the minute does not wait for that server again.
    assert.equal((await outcome(await send('paul@sts-slow.test'))).status, 'sent');
    assert.equal(policies.fetches.filter((h) => h === 'mta-sts.sts-slow.test').length, 1);
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

describe('TLS-RPT reports (RFC 8460)', () => {
  test('a day later each domain asking for reports gets one, by mail and by https, valid against the schema', async () => {
    const schema = JSON.parse(readFileSync(new URL('../fixtures/tlsrpt/report.schema.json', import.meta.url), 'utf8'));
    const ajv = new Ajv2020({ allErrors: true });
    addFormats(ajv);
    const validate = ajv.compile(schema);

    // Reports by mail go to a mailbox on the capturing MX.
    remoteDomain('reports.test', 'mx.reports.test');
    // rpt-ok.test: enforce, valid certificate (2 successful sessions), reports by mail.
    remoteDomain('rpt-ok.test', 'mx.rpt-ok.test');
    publishPolicy('rpt-ok.test', 'r1', 'enforce', ['mx.rpt-ok.test']);
    dns.set('_smtp._tls.rpt-ok.test', [{ type: 'TXT', value: 'v=TLSRPTv1; rua=mailto:tlsrpt@reports.test' }]);
    // rpt-bad.test: testing, a certificate for another name (a failure, delivered anyway), reports by https.
    remoteDomain('rpt-bad.test', 'mx.rpt-bad.test', 'someone-else.test');
    publishPolicy('rpt-bad.test', 'r1', 'testing', ['mx.rpt-bad.test']);
    policies.certify('tlsrpt.collector.test');
    dns.set('tlsrpt.collector.test', [{ type: 'A', address: '127.0.0.1' }]);
    dns.set('_smtp._tls.rpt-bad.test', [{ type: 'TXT', value: `v=TLSRPTv1; rua=https://tlsrpt.collector.test:${policies.port}/reports` }]);
    // rpt-none.test asks for nothing: none of its sessions is counted.
    remoteDomain('rpt-none.test', 'mx.rpt-none.test');

    for (const to of ['a@rpt-ok.test', 'b@rpt-ok.test', 'c@rpt-bad.test', 'd@rpt-none.test']) assert.equal((await outcome(await send(to))).status, 'sent');
    const day = clock.now().toISOString().slice(0, 10);
    const counted = await sqlDb(t.server.ctx).select().from(tlsResults).all();
    assert.deepEqual([...new Set(counted.map((r) => r.policyDomain))].sort(), ['rpt-bad.test', 'rpt-ok.test']);

    // The day ends; the report job (queued by the first counted delivery) becomes due.
    offset += 86_400_000 + 30 * 60_000;
    t.server.ctx.notify('jobs');

    const mail = await until('the report mail', () => mx.messages.find((m) => m.rcptTo.includes('tlsrpt@reports.test')), 30_000);
    const parsed = await simpleParser(mail.raw);
    assert.equal(parsed.headers.get('tls-report-domain'), 'rpt-ok.test');
    assert.equal(parsed.headers.get('tls-report-submitter'), t.config.hostname);
    assert.match(String(parsed.subject), /^Report Domain: rpt-ok\.test Submitter: \S+ Report-ID: <.+>$/);
    assert.match(String((parsed.headers.get('content-type') as { value: string; params: Record<string, string> }).params['report-type']), /^tlsrpt$/);
    const [att] = parsed.attachments;
    assert.equal(att.contentType, 'application/tlsrpt+gzip');
    assert.match(att.filename ?? '', /^[^!]+!rpt-ok\.test!\d+!\d+\.json\.gz$/);
    const byMail = JSON.parse(gunzipSync(att.content).toString('utf8')) as TlsReport;
    assert.ok(validate(byMail), JSON.stringify(validate.errors));
    assert.deepEqual(byMail['date-range'], { 'start-datetime': `${day}T00:00:00Z`, 'end-datetime': `${day}T23:59:59Z` });
    assert.equal(byMail.policies.length, 1);
    assert.equal(byMail.policies[0].policy['policy-type'], 'sts');
    assert.equal(byMail.policies[0].policy['policy-domain'], 'rpt-ok.test');
    assert.deepEqual(byMail.policies[0].policy['mx-host'], ['mx.rpt-ok.test']);
    assert.deepEqual(byMail.policies[0].policy['policy-string'], ['version: STSv1', 'mode: enforce', 'mx: mx.rpt-ok.test', 'max_age: 86400']);
    assert.deepEqual(byMail.policies[0].summary, { 'total-successful-session-count': 2, 'total-failure-session-count': 0 });

    const post = await until('the report POST', () => policies.posts.find((p) => p.host === 'tlsrpt.collector.test'), 30_000);
    assert.equal(post.path, '/reports');
    assert.equal(post.contentType, 'application/tlsrpt+gzip');
    const byHttps = JSON.parse(gunzipSync(post.body).toString('utf8')) as TlsReport;
    assert.ok(validate(byHttps), JSON.stringify(validate.errors));
    assert.equal(byHttps.policies[0].policy['policy-domain'], 'rpt-bad.test');
    assert.deepEqual(byHttps.policies[0].summary, { 'total-successful-session-count': 0, 'total-failure-session-count': 1 });
    const [failure] = byHttps.policies[0]['failure-details'] ?? [];
    assert.equal(failure['result-type'], 'certificate-host-mismatch');
    assert.equal(failure['receiving-mx-hostname'], 'mx.rpt-bad.test');
    assert.equal(failure['receiving-ip'], '127.0.0.1');
    assert.equal(failure['failed-session-count'], 1);

    // Reported counts are gone; nothing for rpt-none.test was ever sent.
    await until('the counts deleted', async () => ((await sqlDb(t.server.ctx).select().from(tlsResults).all()).length === 0 ? true : undefined));
    assert.equal(mx.messages.filter((m) => m.rcptTo.includes('tlsrpt@reports.test')).length, 1);
  });
});
