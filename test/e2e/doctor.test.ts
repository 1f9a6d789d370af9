// mailroom doctor against a dns2 server with good and broken records: hostname and reverse
// DNS, port 25 in (the real SMTP listener) and out (a capturing MX, or a relay), the STARTTLS
// certificate (a test CA, an expiring, a wrong-host and a mismatched-key case), and each
// domain's records. Every connection goes to loopback; the CLI is run as a child process.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configFrom } from '../../src/config.ts';
import { closeContext, createContext, type AppContext } from '../../src/context.ts';
import { addDomain } from '../../src/domain/domains/domains.ts';
import { runDoctor, renderDoctorReport, type DoctorCheck, type DoctorReport } from '../../src/domain/domains/doctor.ts';
import { silentLogger } from '../../src/log.ts';
import { rawRun } from '../../src/store/store.ts';
import { runCli } from '../support/cli.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { startTestMx, type TestMx } from '../support/mx.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { peerSkip, toolMissing } from '../support/peers.ts';

const HOST = 'mx.doctor-test.net';
const PTR_NAME = '1.0.0.127.in-addr.arpa';
const PROBE = 'probe.doctor-test.net';
const NO_OPENSSL = peerSkip(toolMissing('openssl', ['version'], 'openssl'));
const HAVE_OPENSSL = !NO_OPENSSL;

let dns: TestDns;
let mx: TestMx;
let t: TestServer;
const dir = mkdtempSync(join(tmpdir(), 'mailroom-doctor-'));
const contexts: AppContext[] = [];

/** A test CA and a certificate it issued for `host` (SAN), valid 365 days. */
function issueCertificate(host: string): { cert: string; key: string } {
  const p = (f: string) => join(dir, f);
  const run = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('ca.key'), '-out', p('ca.pem'), '-days', '3650', '-subj', '/CN=Doctor Test CA']);
  run(['req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('leaf.key'), '-out', p('leaf.csr'), '-subj', `/CN=${host}`, '-addext', `subjectAltName=DNS:${host}`]);
  run(['x509', '-req', '-in', p('leaf.csr'), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial', '-out', p('leaf.pem'), '-days', '365', '-copy_extensions', 'copy']);
  return { cert: p('leaf.pem'), key: p('leaf.key') };
}

function publishGoodHost(): void {
  dns.set(HOST, [{ type: 'A', address: '127.0.0.1' }]);
  dns.set(PTR_NAME, [{ type: 'PTR', domain: HOST }]);
  dns.set(PROBE, [{ type: 'MX', exchange: `mx.${PROBE}`, priority: 10 }]);
  dns.set(`mx.${PROBE}`, [{ type: 'A', address: '127.0.0.1' }]);
}

async function publishRecords(ctx: AppContext, name: string): Promise<void> {
  const d = await addDomain(ctx, t.accountId, name);
  for (const r of d.dnsRecords) {
    if (r.type === 'MX') dns.add(r.name, { type: 'MX', exchange: r.value, priority: r.priority ?? 10 });
    // The MTA-STS policy host: an address of the hostname (what the CNAME leads to).
    else if (r.type === 'CNAME') dns.add(r.name, { type: 'A', address: '127.0.0.1' });
    else dns.add(r.name, { type: 'TXT', value: r.value });
  }
}

/** A context on the test server's data directory with other settings (no listeners). */
async function contextWith(overrides: Record<string, unknown>, clockMs?: number): Promise<AppContext> {
  const config = configFrom({
    data_dir: t.dataDir,
    database: { url: t.config.database.url },
    hostname: HOST,
    shared_domain: 'agents.test',
    dns: { servers: [dns.server], timeout: '1s' },
    smtp: { listen: '0.0.0.0:0' },
    outbound: { mode: 'email', mx_port: mx.port },
    ...overrides,
  });
  const ctx = await createContext(config, silentLogger, clockMs ? { clock: { now: () => new Date(clockMs) } } : {});
  contexts.push(ctx);
  return ctx;
}

const doctor = (ctx: AppContext) => runDoctor(ctx, { address: '127.0.0.1', inboundPort: t.server.smtpPort, probeDomain: PROBE, timeoutMs: 2000 });
const one = (r: DoctorReport, id: string, domain?: string, role?: string): DoctorCheck => {
  const found = r.checks.filter((c) => c.id === id && (domain === undefined || c.domain === domain) && (role === undefined || c.role === role));
  assert.equal(found.length, 1, `expected one ${id} ${domain ?? ''} ${role ?? ''} check, got ${JSON.stringify(r.checks, null, 1)}`);
  return found[0];
};

let tls: { cert: string; key: string } | undefined;

before(async () => {
  dns = await startTestDns();
  mx = await startTestMx();
  publishGoodHost();
  if (HAVE_OPENSSL) tls = issueCertificate(HOST);
  t = await startTestServer({
    hostname: HOST,
    smtp: { listen: '0.0.0.0:0', ...(tls ? { tls_cert: tls.cert, tls_key: tls.key } : {}) },
    dns: { servers: [dns.server], timeout: '1s' },
    outbound: { mode: 'email', mx_port: mx.port },
  });
  await publishRecords(t.server.ctx, 'good.doctor-test.net');
});

after(async () => {
  for (const c of contexts) await closeContext(c);
  await t?.close();
  await mx?.close();
  await dns?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a host set up right', () => {
  test('every check passes, with what was found', { skip: NO_OPENSSL }, async () => {
    const r = await doctor(t.server.ctx);
    assert.equal(one(r, 'hostname').status, 'ok');
    assert.equal(one(r, 'reverse-dns').detail, `127.0.0.1 → ${HOST}`);
    const inbound = one(r, 'smtp-inbound');
    assert.equal(inbound.status, 'ok', inbound.detail);
    assert.match(inbound.detail, new RegExp(HOST.replace(/\./g, '\\.')), 'the greeting of mailroom itself');
    assert.equal(one(r, 'smtp-outbound').status, 'ok');
    assert.match(one(r, 'tls').detail, /^valid until .* \(36\d days\), for mx\.doctor-test\.net$/);
    for (const role of ['ownership', 'dkim', 'spf', 'dmarc', 'mx', 'mta_sts', 'mta_sts_host', 'tls_rpt']) assert.equal(one(r, 'domain', 'good.doctor-test.net', role).status, 'ok', role);
    assert.equal(one(r, 'domain', 'agents.test').status, 'skip', 'the reserved shared domain is not checked');
    // The bulk-sender checklist (issue 30); nothing was sent yet, so there is no complaint rate.
    assert.equal(one(r, 'bulk-alignment', 'good.doctor-test.net').status, 'ok');
    assert.equal(one(r, 'fcrdns').detail, `127.0.0.1 → ${HOST} → 127.0.0.1`);
    assert.equal(one(r, 'bulk-tls').status, 'ok');
    assert.equal(one(r, 'complaint-rate').status, 'skip');
    assert.deepEqual(r.summary, { ok: 16, warn: 0, fail: 0, skip: 2 });
    assert.equal(r.checks.filter((c) => c.fix && c.status !== 'ok' && c.status !== 'skip').length, 0);
  });
});

describe('broken set-ups say how to fix them', () => {
  test('hostname left at localhost; listener on loopback; no TLS', async () => {
    const ctx = await contextWith({ hostname: 'localhost', smtp: { listen: '127.0.0.1:2525' } });
    const r = await doctor(ctx);
    const h = one(r, 'hostname');
    assert.equal(h.status, 'fail');
    assert.match(h.fix!, /set `hostname`/);
    assert.equal(one(r, 'reverse-dns').status, 'skip');
    const inbound = one(r, 'smtp-inbound');
    assert.equal(inbound.status, 'fail');
    assert.match(inbound.fix!, /smtp\.listen = "0\.0\.0\.0:25"/);
    const tlsCheck = one(r, 'tls');
    assert.equal(tlsCheck.status, 'warn');
    assert.match(tlsCheck.fix!, /smtp\.tls_cert and smtp\.tls_key/);
  });

  test('no A record, a name pointing at another host, a missing and a wrong PTR', async () => {
    const ctx = await contextWith({});
    dns.set(HOST, []);
    dns.clear(HOST);
    let r = await doctor(ctx);
    assert.equal(one(r, 'hostname').status, 'fail');
    assert.equal(one(r, 'hostname').fix, `publish ${HOST}. 3600 IN A 127.0.0.1`);
    assert.equal(one(r, 'smtp-inbound').status, 'skip');

    dns.set(HOST, [{ type: 'A', address: '192.0.2.7' }]);
    r = await doctor(ctx);
    assert.equal(one(r, 'hostname').status, 'fail');
    assert.match(one(r, 'hostname').fix!, /point the A\/AAAA record of mx\.doctor-test\.net at 127\.0\.0\.1/);
    // Nothing is probed at an address that is not this host.
    assert.equal(one(r, 'smtp-inbound').status, 'skip');

    dns.set(HOST, [{ type: 'A', address: '127.0.0.1' }]);
    dns.clear(PTR_NAME);
    r = await doctor(ctx);
    const ptr = one(r, 'reverse-dns');
    assert.equal(ptr.status, 'fail');
    assert.equal(ptr.detail, '127.0.0.1 has no PTR record');
    assert.match(ptr.fix!, /set the reverse DNS of 127\.0\.0\.1 to mx\.doctor-test\.net/);
    dns.set(PTR_NAME, [{ type: 'PTR', domain: 'host-127-0-0-1.isp.example.net' }]);
    r = await doctor(ctx);
    assert.equal(one(r, 'reverse-dns').detail, `PTR of 127.0.0.1 is host-127-0-0-1.isp.example.net, not ${HOST}`);
    publishGoodHost();
  });

  test('a DNS outage is a warning, never a verdict', async () => {
    const ctx = await contextWith({});
    dns.servfail(HOST);
    try {
      const h = one(await doctor(ctx), 'hostname');
      assert.equal(h.status, 'warn');
      assert.match(h.detail, /DNS did not answer/);
    } finally {
      dns.clear(HOST);
      publishGoodHost();
    }
  });

  test('outbound port 25 closed: suggests a relay; a working relay passes; dry-run skips', async () => {
    const closed = await contextWith({ outbound: { mode: 'email', mx_port: 9 } });
    const out = one(await doctor(closed), 'smtp-outbound');
    assert.equal(out.status, 'fail');
    assert.match(out.detail, /ECONNREFUSED|refused/);
    assert.match(out.fix!, /outbound\.relay/);
    const relay = await contextWith({ outbound: { mode: 'email', relay: `smtp://127.0.0.1:${mx.port}` } });
    const viaRelay = one(await doctor(relay), 'smtp-outbound');
    assert.equal(viaRelay.status, 'ok', viaRelay.detail);
    assert.match(viaRelay.title, new RegExp(`relay 127\\.0\\.0\\.1:${mx.port}`));
    assert.equal(one(await doctor(await contextWith({ outbound: { mode: 'dry-run' } })), 'smtp-outbound').status, 'skip');
  });

  test('certificate expiring soon, for another name, or with the wrong key', { skip: NO_OPENSSL }, async () => {
    // The same certificate seen 360 days later: 4 or 5 days left.
    const later = await contextWith({ smtp: { listen: '0.0.0.0:0', tls_cert: tls!.cert, tls_key: tls!.key } }, Date.now() + 360 * 86_400_000);
    const soon = one(await doctor(later), 'tls');
    assert.equal(soon.status, 'warn');
    assert.match(soon.detail, /^expires in [45] day\(s\)/);
    assert.match(soon.fix!, /certbot renew/);
    const expired = one(await doctor(await contextWith({ smtp: { listen: '0.0.0.0:0', tls_cert: tls!.cert, tls_key: tls!.key } }, Date.now() + 400 * 86_400_000)), 'tls');
    assert.equal(expired.status, 'fail');
    assert.match(expired.detail, /^expired on /);

    const other = one(await doctor(await contextWith({ hostname: 'other.doctor-test.net', smtp: { listen: '0.0.0.0:0', tls_cert: tls!.cert, tls_key: tls!.key } })), 'tls');
    assert.equal(other.status, 'fail');
    assert.match(other.detail, /is for DNS:mx\.doctor-test\.net, not other\.doctor-test\.net/);

    const stray = join(dir, 'stray.key');
    writeFileSync(stray, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const mismatch = one(await doctor(await contextWith({ smtp: { listen: '0.0.0.0:0', tls_cert: tls!.cert, tls_key: stray } })), 'tls');
    assert.equal(mismatch.status, 'fail');
    assert.match(mismatch.detail, /is not the key of/);
    const missing = one(await doctor(await contextWith({ smtp: { listen: '0.0.0.0:0', tls_cert: join(dir, 'nope.pem'), tls_key: stray } })), 'tls');
    assert.equal(missing.status, 'fail');
    assert.match(missing.detail, /cannot read .*nope\.pem/);
  });

  test("a domain's records: wrong MX, another DKIM key, no SPF, no DMARC, no ownership token", async () => {
    const ctx = await contextWith({});
    const d = await addDomain(ctx, t.accountId, 'broken.doctor-test.net');
    dns.set('broken.doctor-test.net', [{ type: 'MX', exchange: 'mx.elsewhere.example.net', priority: 10 }]);
    const dkim = d.dnsRecords.find((r) => r.name.includes('._domainkey.'))!;
    dns.set(dkim.name, [{ type: 'TXT', value: 'v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAnotthekey' }]);
    const r = await doctor(ctx);
    const check = (role: string) => one(r, 'domain', 'broken.doctor-test.net', role);
    assert.equal(check('mx').status, 'fail');
    assert.equal(check('mx').detail, `MX points at mx.elsewhere.example.net, not ${HOST}`);
    assert.equal(check('mx').fix, `replace what is published at broken.doctor-test.net (MX) with: broken.doctor-test.net. 3600 IN MX 10 ${HOST}.`);
    assert.equal(check('dkim').status, 'fail');
    assert.match(check('dkim').fix!, /^replace what is published at mr\w+\._domainkey\.broken\.doctor-test\.net \(TXT\) with: .* IN TXT "v=DKIM1; k=rsa; p=/);
    // SPF and DMARC are what `domains show` calls recommended: missing, they warn, never fail.
    assert.equal(check('spf').status, 'warn', 'SPF helps but is not required');
    assert.equal(check('spf').detail, 'no v=spf1 record (recommended, not required)');
    assert.match(check('spf').fix!, /^publish: broken\.doctor-test\.net\. 3600 IN TXT "v=spf1 a:mx\.doctor-test\.net mx ~all"$/);
    assert.equal(check('dmarc').status, 'warn', 'DMARC helps but is not required');
    assert.equal(check('dmarc').detail, 'no v=DMARC1 record (recommended, not required)');
    assert.equal(check('ownership').status, 'fail');
    assert.equal(check('ownership').detail, 'no TXT record (required)');
    // The good domain is still good in the same report.
    assert.equal(one(r, 'domain', 'good.doctor-test.net', 'mx').status, 'ok');

    const text = renderDoctorReport(r);
    assert.match(text, /^mailroom doctor for mx\.doctor-test\.net\n/);
    assert.match(text, /\[FAIL\] broken\.doctor-test\.net: MX record: MX points at mx\.elsewhere\.example\.net, not mx\.doctor-test\.net\n {7}fix: replace what is published/);
    assert.match(text, /\n\d+ ok, \d+ warning\(s\), \d+ failure\(s\), \d+ skipped\n$/);
  });
});

describe('report and MTA-STS records', () => {
  test('a stale MTA-STS id fails, a policy host elsewhere fails, a rua naming someone else warns; each says what to publish', async () => {
    const ctx = await contextWith({});
    const name = 'sts.doctor-test.net';
    await publishRecords(ctx, name);
    dns.set(`_mta-sts.${name}`, [{ type: 'TXT', value: 'v=STSv1; id=20240101000000' }]);
    dns.set(`mta-sts.${name}`, [{ type: 'A', address: '192.0.2.80' }]);
    dns.set(`_smtp._tls.${name}`, [{ type: 'TXT', value: 'v=TLSRPTv1; rua=mailto:tls@reports.example.org' }]);
    dns.set(`_dmarc.${name}`, [{ type: 'TXT', value: 'v=DMARC1; p=none; rua=mailto:dmarc@reports.example.org' }]);
    const r = await doctor(ctx);
    const check = (role: string) => one(r, 'domain', name, role);
    assert.equal(check('mta_sts').status, 'fail');
    assert.match(check('mta_sts').detail, /^id=20240101000000, but the policy served now has id=[0-9a-f]{20}: senders keep a stale policy$/);
    assert.match(
      check('mta_sts').fix!,
      new RegExp(`^replace what is published at _mta-sts\\.sts\\.doctor-test\\.net \\(TXT\\) with: _mta-sts\\.sts\\.doctor-test\\.net\\. 3600 IN TXT "v=STSv1; id=[0-9a-f]{20}"$`),
    );
    assert.equal(check('mta_sts_host').status, 'fail');
    assert.equal(check('mta_sts_host').detail, `resolves to 192.0.2.80, not to ${HOST} (127.0.0.1)`);
    assert.equal(check('mta_sts_host').fix, `replace what is published at mta-sts.${name} (CNAME) with: mta-sts.${name}. 3600 IN CNAME ${HOST}.`);
    assert.equal(check('tls_rpt').status, 'warn');
    assert.equal(check('tls_rpt').fix, `name this appliance's report address in its rua, e.g.: _smtp._tls.${name}. 3600 IN TXT "v=TLSRPTv1; rua=mailto:tls-reports@${name}"`);
    assert.equal(check('dmarc').status, 'warn');
    assert.match(check('dmarc').detail, /its rua does not name dmarc-reports@sts\.doctor-test\.net/);
    // DMARC is still published: the bulk-sender alignment line is satisfied.
    assert.equal(one(r, 'bulk-alignment', name).status, 'ok');
  });
});

describe('the bulk-sender checklist', () => {
  test('a domain without SPF and DMARC fails alignment; FCrDNS must resolve back and be the HELO name; TLS follows the certificate check', async () => {
    const ctx = await contextWith({});
    const d = await addDomain(ctx, t.accountId, 'bulk.doctor-test.net');
    for (const r of d.dnsRecords.filter((x) => x.name.startsWith('_mailroom.') || x.name.includes('._domainkey.'))) dns.set(r.name, [{ type: 'TXT', value: r.value }]);
    let r = await doctor(ctx);
    const bulk = one(r, 'bulk-alignment', 'bulk.doctor-test.net');
    assert.equal(bulk.status, 'fail');
    assert.match(bulk.detail, /not in order: SPF, DMARC; .*550 5\.7\.515/);
    assert.match(bulk.fix!, /publish: bulk\.doctor-test\.net\. 3600 IN TXT "v=spf1 a:mx\.doctor-test\.net mx ~all"/);
    assert.match(bulk.fix!, /publish: _dmarc\.bulk\.doctor-test\.net\. 3600 IN TXT "v=DMARC1; p=none; adkim=r; aspf=r; rua=mailto:dmarc-reports@bulk\.doctor-test\.net"/);
    assert.equal(one(r, 'bulk-alignment', 'good.doctor-test.net').status, 'ok');
    // No TLS certificate in this context: the TLS line says so, with the certificate check's fix.
    const tlsLine = one(r, 'bulk-tls');
    assert.equal(tlsLine.status, 'warn');
    assert.match(tlsLine.fix!, /smtp\.tls_cert and smtp\.tls_key/);

    try {
      // A PTR name that does not resolve back to the address.
      dns.set(PTR_NAME, [{ type: 'PTR', domain: 'host-127-0-0-1.isp.example.net' }]);
      r = await doctor(ctx);
      let f = one(r, 'fcrdns');
      assert.equal(f.status, 'fail');
      assert.equal(f.detail, 'PTR of 127.0.0.1 is host-127-0-0-1.isp.example.net, which does not resolve back to 127.0.0.1');
      assert.equal(f.fix, `set the reverse DNS of 127.0.0.1 to ${HOST} (VPS provider's panel) and publish ${HOST}. 3600 IN A 127.0.0.1; the HELO name is \`hostname\``);
      // Confirmed, but another name than the HELO name.
      dns.set(PTR_NAME, [{ type: 'PTR', domain: 'other.doctor-test.net' }]);
      dns.set('other.doctor-test.net', [{ type: 'A', address: '127.0.0.1' }]);
      f = one(await doctor(ctx), 'fcrdns');
      assert.equal(f.status, 'fail');
      assert.equal(f.detail, `PTR of 127.0.0.1 is other.doctor-test.net (confirmed), but the HELO name is ${HOST}`);
    } finally {
      dns.clear('other.doctor-test.net');
      publishGoodHost();
    }
    // Through a relay the address is the relay's.
    assert.equal(one(await doctor(await contextWith({ outbound: { mode: 'email', relay: `smtp://127.0.0.1:${mx.port}` } })), 'fcrdns').status, 'skip');
  });

  test('the complaint rate of the last 30 days: ok, above 0.3% a failure saying how to fix it, outside the window not counted', async () => {
    const inbox = (await t.api('POST', '/inboxes', { address: 'bulk' })).body;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: [`reader${i}@${PROBE}`], subject: `news ${i}`, bodyText: 'hello' });
      assert.equal(res.status, 202, res.text);
      ids.push(res.body.id);
    }
    const deadline = Date.now() + 60_000;
    for (const id of ids) {
      while ((await t.api('GET', `/messages/${id}`)).body.status !== 'sent') {
        assert.ok(Date.now() < deadline, `${id} never sent`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const ctx = await contextWith({});
    let c = one(await doctor(ctx), 'complaint-rate');
    assert.equal(c.status, 'ok', c.detail);
    assert.equal(c.detail, '0 complaint(s) over 3 message(s) sent: 0.00%');
    // What an ARF report at the bounce address does to a message (test/e2e/reports.test.ts sends real ones).
    await rawRun(t.server.ctx.db, "UPDATE messages SET status = 'complained' WHERE id = ?", [ids[0]]);
    c = one(await doctor(ctx), 'complaint-rate');
    assert.equal(c.status, 'fail');
    assert.match(c.detail, /^1 complaint\(s\) over 3 message\(s\) sent: 33\.33%: at or above 0\.3%/);
    assert.match(c.fix!, /listUnsubscribe: true/);
    // 31 days later the window holds none of them.
    assert.equal(one(await doctor(await contextWith({}, Date.now() + 31 * 86_400_000)), 'complaint-rate').status, 'skip');
  });
});

describe('mailroom doctor (CLI)', () => {
  test('--json prints the report and exits 1 when a check fails; bad options are refused', async () => {
    const configFile = join(dir, 'mailroom.toml');
    writeFileSync(
      configFile,
      [
        `data_dir = ${JSON.stringify(t.dataDir)}`,
        `hostname = "${HOST}"`,
        'shared_domain = "agents.test"',
        '[smtp]',
        'listen = "127.0.0.1:2525"',
        '[outbound]',
        `mx_port = ${mx.port}`,
        '[dns]',
        `servers = ["${dns.server}"]`,
        'timeout = "1s"',
      ].join('\n'),
    );
    const common = ['--config', configFile, 'doctor', '--address', '127.0.0.1', '--probe-domain', PROBE, '--timeout', '2'];
    // Independent child processes: run side by side.
    const [json, human, bad] = await Promise.all([runCli([...common, '--json']), runCli(common), runCli(['--config', configFile, 'doctor', '--address', 'not-an-ip'])]);
    assert.equal(json.code, 1, json.stderr);
    const report = JSON.parse(json.stdout) as DoctorReport;
    assert.equal(report.hostname, HOST);
    assert.equal(report.checks.find((c) => c.id === 'smtp-inbound')?.status, 'fail', 'the listener is on loopback in this config');
    assert.equal(report.checks.find((c) => c.id === 'reverse-dns')?.status, 'ok');
    assert.ok(report.summary.fail >= 1);

    assert.equal(human.code, 1);
    assert.match(human.stdout, /\[FAIL\] port 25 reachable for inbound mail: smtp\.listen is 127\.0\.0\.1:2525: only this machine can connect\n {7}fix: set smtp\.listen = "0\.0\.0\.0:25"/);
    assert.match(human.stdout, /\[ok  \] reverse DNS \(PTR\) of the public address names the hostname: 127\.0\.0\.1 → mx\.doctor-test\.net/);

    assert.equal(bad.code, 1);
    assert.equal(bad.stderr, 'mailroom: --address must be an IP address, got not-an-ip\n');
  });
});
