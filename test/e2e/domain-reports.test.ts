// Reports receivers send about a custom domain, end to end over SMTP: DMARC aggregate reports
// in the forms Google (XML in a .zip, application/zip) and Microsoft (XML in a .xml.gz,
// application/gzip) send them, hand-written from their documented samples, and a TLS-RPT report
// (RFC 8460 §4.4's sample, application/tlsrpt+gzip as Google sends it). Each arrives at the
// domain's report address, is parsed and stored (not put in an inbox), and shows in
// GET /domains/{id}/dmarc or /tls-reports. A copy sent again counts once; a report about another
// domain, one past `[inbound] report_max_records` or `report_max_bytes`, and a mail with no
// report are 550 5.7.1 with nothing stored; an unverified domain has no report address (550 5.1.1).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import JSZip from 'jszip';
import type { Clock } from '../../src/context.ts';
import { sweepReports } from '../../src/domain/domains/dmarc-reports.ts';
import { MAX_EXPANSION, MAX_REPORT_PARTS } from '../../src/domain/domains/report-files.ts';
import { rawRows } from '../../src/store/store.ts';
import { startTestDns, type TestDns, type TestRecord } from '../support/dns.ts';
import { smtpTransport } from '../support/mail.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';

const DOMAIN = 'reports.example';
let dns: TestDns;
let t: TestServer;
let domain: { id: string; domain: string; dnsRecords: Array<{ type: string; name: string; value: string; priority?: number }> };
/** The server's clock runs this far ahead of the real one (moved to test retention). */
let offset = 0;
const clock: Clock = { now: () => new Date(Date.now() + offset) };

before(async () => {
  dns = await startTestDns();
  t = await startTestServer({ dns: { servers: [dns.server], timeout: '1s' }, inbound: { report_max_records: 5, report_max_bytes: 8192 } }, { clock });
  domain = (await t.api('POST', '/domains', { domain: DOMAIN })).body;
  const byName = new Map<string, TestRecord[]>();
  for (const r of domain.dnsRecords) {
    if (r.type !== 'MX' && r.type !== 'TXT') continue;
    const rec: TestRecord = r.type === 'MX' ? { type: 'MX', exchange: r.value, priority: r.priority! } : { type: 'TXT', value: r.value };
    byName.set(r.name, [...(byName.get(r.name) ?? []), rec]);
  }
  for (const [name, recs] of byName) dns.set(name, recs);
  const verified = await t.api('POST', `/domains/${domain.id}/verify`);
  assert.equal(verified.body.sendingStatus, 'verified', verified.text);
});

after(async () => {
  await t?.close();
  await dns?.close();
});

const DAY = 86_400;
/** Yesterday's UTC day, as the reports cover it (Unix seconds). */
const begin = Math.floor(Date.now() / 1000 / DAY) * DAY - DAY;
const day = new Date(begin * 1000).toISOString().slice(0, 10);

interface Row {
  ip: string;
  count: number;
  dkim: string;
  spf: string;
  disposition?: string;
}

const rowXml = (r: Row, extraIdentifiers = '') => `
  <record>
    <row>
      <source_ip>${r.ip}</source_ip>
      <count>${r.count}</count>
      <policy_evaluated>
        <disposition>${r.disposition ?? 'none'}</disposition>
        <dkim>${r.dkim}</dkim>
        <spf>${r.spf}</spf>
      </policy_evaluated>
    </row>
    <identifiers>${extraIdentifiers}
      <header_from>${DOMAIN}</header_from>
    </identifiers>
    <auth_results>
      <dkim>
        <domain>${DOMAIN}</domain>
        <result>${r.dkim}</result>
        <selector>mr1</selector>
      </dkim>
      <spf>
        <domain>${DOMAIN}</domain>
        <result>${r.spf}</result>
      </spf>
    </auth_results>
  </record>`;

/** Google's form (support.google.com/a/answer/10032472): no version element, np in policy_published. */
const googleXml = (reportId: string, rows: Row[], about = DOMAIN) => `<?xml version="1.0" encoding="UTF-8" ?>
<feedback>
  <report_metadata>
    <org_name>google.com</org_name>
    <email>noreply-dmarc-support@google.com</email>
    <extra_contact_info>https://support.google.com/a/answer/2466580</extra_contact_info>
    <report_id>${reportId}</report_id>
    <date_range>
      <begin>${begin}</begin>
      <end>${begin + DAY - 1}</end>
    </date_range>
  </report_metadata>
  <policy_published>
    <domain>${about}</domain>
    <adkim>r</adkim>
    <aspf>r</aspf>
    <p>none</p>
    <sp>none</sp>
    <pct>100</pct>
    <np>none</np>
  </policy_published>${rows.map((r) => rowXml(r)).join('')}
</feedback>
`;

/** Microsoft's form (Outlook.com / Exchange Online): XML Schema namespaces, version, envelope_to and envelope_from. */
const microsoftXml = (reportId: string, rows: Row[]) => `<?xml version="1.0"?>
<feedback xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <version>1.0</version>
  <report_metadata>
    <org_name>Enterprise Outlook</org_name>
    <email>dmarcreport@microsoft.com</email>
    <report_id>${reportId}</report_id>
    <date_range>
      <begin>${begin}</begin>
      <end>${begin + DAY}</end>
    </date_range>
  </report_metadata>
  <policy_published>
    <domain>${DOMAIN}</domain>
    <adkim>r</adkim>
    <aspf>r</aspf>
    <p>quarantine</p>
    <sp>quarantine</sp>
    <pct>100</pct>
    <fo>0</fo>
  </policy_published>${rows.map((r) => rowXml(r, `\n      <envelope_to>outlook.com</envelope_to>\n      <envelope_from>${DOMAIN}</envelope_from>`)).join('')}
</feedback>
`;

async function zipped(name: string, xml: string): Promise<Buffer> {
  const zip = new JSZip();
  zip.file(name, xml);
  return zip.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE' });
}

interface Sent {
  ok: boolean;
  code?: number;
  response: string;
}

/** Delivers one report mail to `to` over SMTP as the reporter would; the server's reply. */
async function deliver(to: string, subject: string, attachment: { filename: string; contentType: string; content: Buffer }, from = 'noreply-dmarc-support@google.com'): Promise<Sent> {
  const transport = smtpTransport(t.server.smtpPort);
  try {
    const info = await transport.sendMail({ from, to, subject, text: `This is an aggregate report for ${DOMAIN}.`, attachments: [attachment] });
    return { ok: true, response: info.response };
  } catch (err) {
    const e = err as { responseCode?: number; response?: string };
    return { ok: false, code: e.responseCode, response: e.response ?? String(err) };
  } finally {
    transport.close();
  }
}

const dmarcTo = `dmarc-reports@${DOMAIN}`;
const google = async (reportId: string, rows: Row[], about = DOMAIN) =>
  deliver(dmarcTo, `Report domain: ${DOMAIN} Submitter: google.com Report-ID: ${reportId}`, {
    filename: `google.com!${DOMAIN}!${begin}!${begin + DAY - 1}.zip`,
    contentType: 'application/zip',
    content: await zipped(`google.com!${DOMAIN}!${begin}!${begin + DAY - 1}.xml`, googleXml(reportId, rows, about)),
  });
const microsoft = (reportId: string, rows: Row[]) =>
  deliver(
    dmarcTo,
    `Report Domain: ${DOMAIN} Submitter: enterprise.protection.outlook.com Report-ID: ${reportId}`,
    { filename: `enterprise.protection.outlook.com!${DOMAIN}!${begin}!${begin + DAY}.xml.gz`, contentType: 'application/gzip', content: gzipSync(microsoftXml(reportId, rows)) },
    'dmarcreport@microsoft.com',
  );

const summary = async () => {
  const res = await t.api('GET', `/domains/${domain.id}/dmarc`);
  assert.equal(res.status, 200, res.text);
  return res.body;
};
const countRows = async (table: string) => Number((await rawRows<[number]>(t.server.ctx.db, `SELECT count(*) FROM ${table}`))[0]?.[0]);

describe('DMARC aggregate reports', () => {
  test('the _dmarc record the domain lists sends reports to its report address', () => {
    const dmarc = domain.dnsRecords.find((r) => r.name === `_dmarc.${DOMAIN}`);
    assert.ok(dmarc, JSON.stringify(domain.dnsRecords));
    assert.match(dmarc.value, new RegExp(`rua=mailto:dmarc-reports@${DOMAIN.replace('.', '\\.')}`));
  });

  test("Google's zip and Microsoft's gzip are parsed, stored (no inbox message) and summarised by day and source", async () => {
    const before = await countRows('messages');
    const g = await google('15485340238745291092', [
      { ip: '203.0.113.10', count: 12, dkim: 'pass', spf: 'pass' },
      { ip: '198.51.100.7', count: 3, dkim: 'fail', spf: 'fail' },
    ]);
    assert.ok(g.ok, g.response);
    const m = await microsoft('2b8a3c1e9f5d4e7a8b6c5d4e3f2a1b0c', [
      { ip: '203.0.113.10', count: 5, dkim: 'pass', spf: 'fail' },
      { ip: '198.51.100.7', count: 2, dkim: 'fail', spf: 'fail', disposition: 'quarantine' },
    ]);
    assert.ok(m.ok, m.response);
    assert.equal(await countRows('messages'), before, 'reports go into no inbox');

    const s = await summary();
    assert.equal(s.domain, DOMAIN);
    assert.deepEqual(s.totals, { messages: 22, dmarcPass: 17, dkimAligned: 17, spfAligned: 12, quarantined: 2, rejected: 0 });
    assert.deepEqual(s.byDay, [{ day, messages: 22, dmarcPass: 17, dkimAligned: 17, spfAligned: 12, quarantined: 2, rejected: 0 }]);
    assert.deepEqual(
      s.sources.map((x: any) => [x.sourceIp, x.messages, x.dmarcPass]),
      [
        ['203.0.113.10', 17, 17],
        ['198.51.100.7', 5, 0],
      ],
    );
    assert.deepEqual(s.reports.map((r: any) => [r.orgName, r.policy]).sort(), [
      ['Enterprise Outlook', 'quarantine'],
      ['google.com', 'none'],
    ]);
    assert.equal(s.reports.find((r: any) => r.orgName === 'google.com').begin, new Date(begin * 1000).toISOString());

    // The same report again (a retry by the reporter) counts once.
    assert.ok((await google('15485340238745291092', [{ ip: '203.0.113.10', count: 12, dkim: 'pass', spf: 'pass' }])).ok);
    assert.equal((await summary()).totals.messages, 22);
  });

  test('refused with 550 5.7.1 and nothing stored: another domain, too many records, too large once unpacked, no report', async () => {
    const reports = await countRows('dmarc_reports');
    const refused = (r: Sent, why: RegExp) => {
      assert.equal(r.ok, false, r.response);
      assert.equal(r.code, 550, r.response);
      assert.match(r.response, /5\.7\.1/);
      assert.match(r.response, why);
    };
    refused(await google('other-domain', [{ ip: '192.0.2.1', count: 1, dkim: 'pass', spf: 'pass' }], 'elsewhere.example'), /elsewhere\.example/);
    const six = Array.from({ length: 6 }, (_, i) => ({ ip: `192.0.2.${i + 1}`, count: 1, dkim: 'pass', spf: 'pass' }));
    refused(await google('too-many', six), /report_max_records/);
    // Compresses to a few hundred bytes, expands past report_max_bytes (8192).
    const bomb = gzipSync(googleXml('bomb', [{ ip: '192.0.2.1', count: 1, dkim: 'pass', spf: 'pass' }]).replace('<feedback>', `<feedback>${' '.repeat(100_000)}`));
    refused(await deliver(dmarcTo, 'bomb', { filename: 'bomb.xml.gz', contentType: 'application/gzip', content: bomb }), /report_max_bytes/);
    refused(await deliver(dmarcTo, 'hello', { filename: 'note.txt', contentType: 'text/plain', content: Buffer.from('just a note') }), /no DMARC aggregate report/);
    refused(await deliver(dmarcTo, 'xxe', { filename: 'x.xml', contentType: 'text/xml', content: Buffer.from('<?xml version="1.0"?><!DOCTYPE feedback [<!ENTITY a "b">]><feedback/>') }), /DOCTYPE/);
    assert.equal(await countRows('dmarc_reports'), reports);
  });

  test(`what one mail can make the server parse is bounded: ${MAX_REPORT_PARTS} parts, report_max_bytes for the whole mail, ${MAX_EXPANSION}× expansion`, async () => {
    const reports = await countRows('dmarc_reports');
    const send = async (attachments: Array<{ filename: string; contentType: string; content: Buffer }>): Promise<Sent> => {
      const transport = smtpTransport(t.server.smtpPort);
      try {
        return { ok: true, response: (await transport.sendMail({ from: 'reports@example.org', to: dmarcTo, subject: 'parts', text: '', attachments })).response };
      } catch (err) {
        const e = err as { responseCode?: number; response?: string };
        return { ok: false, code: e.responseCode, response: e.response ?? String(err) };
      } finally {
        transport.close();
      }
    };
    const refused = (r: Sent, why: RegExp) => {
      assert.equal(r.code, 550, r.response);
      assert.match(r.response, why);
    };
    // XML that is no report, 3,000 bytes each: three pass report_max_bytes (8192) together.
    const notReport = Buffer.from(`<?xml version="1.0"?><note>${'x'.repeat(3000)}</note>`);
    refused(await send([1, 2, 3].map((i) => ({ filename: `n${i}.xml`, contentType: 'text/xml', content: notReport }))), /report_max_bytes/);
    // A gzip expanding more than MAX_EXPANSION times, though under report_max_bytes.
    const plain = `<feedback>${' '.repeat(7500)}</feedback>`;
    const dense = gzipSync(plain);
    assert.ok(dense.length * MAX_EXPANSION < plain.length && plain.length < 8192);
    refused(await send([{ filename: 'dense.xml.gz', contentType: 'application/gzip', content: dense }]), new RegExp(`more than ${MAX_EXPANSION} times`));
    // A report after MAX_REPORT_PARTS other parts is not looked at.
    const tiny = { filename: 'a.txt', contentType: 'application/octet-stream', content: Buffer.from('not a report') };
    const report = { filename: 'r.xml', contentType: 'text/xml', content: Buffer.from(googleXml('late', [{ ip: '192.0.2.9', count: 1, dkim: 'pass', spf: 'pass' }])) };
    refused(await send([...Array.from({ length: MAX_REPORT_PARTS }, () => tiny), report]), /no DMARC aggregate report/);
    assert.equal(await countRows('dmarc_reports'), reports);
    // The control: the same report as the first part is taken.
    assert.ok((await send([report])).ok);
    assert.equal(await countRows('dmarc_reports'), reports + 1);
  });

  test('an unverified domain has no report address (550 5.1.1 at RCPT); another account sees no report (404)', async () => {
    const other = await t.newAccount('other');
    await t.api('POST', '/domains', { domain: 'unverified.example' }, { key: other.key });
    const r = await deliver('dmarc-reports@unverified.example', 'x', { filename: 'r.xml', contentType: 'text/xml', content: Buffer.from(googleXml('u', [])) });
    assert.equal(r.code, 550, r.response);
    assert.match(r.response, /5\.1\.1/);
    expectError(await t.api('GET', `/domains/${domain.id}/dmarc`, undefined, { key: other.key }), 404, 'DOMAIN_NOT_FOUND');
    expectError(await t.api('GET', `/domains/${domain.id}/tls-reports`, undefined, { key: other.key }), 404, 'DOMAIN_NOT_FOUND');
    expectError(await t.api('GET', `/domains/${domain.id}/dmarc?days=0`), 400, 'VALIDATION_ERROR');
  });
});

/** RFC 8460 §4.4's sample report, dated yesterday and about our domain. */
const tlsReport = (reportId: string) =>
  JSON.stringify({
    'organization-name': 'Company-X',
    'date-range': { 'start-datetime': new Date(begin * 1000).toISOString(), 'end-datetime': new Date((begin + DAY - 1) * 1000).toISOString() },
    'contact-info': 'sts-reporting@company-x.example',
    'report-id': reportId,
    policies: [
      {
        policy: { 'policy-type': 'sts', 'policy-string': ['version: STSv1', 'mode: testing', `mx: mx.test.localhost`, 'max_age: 86400'], 'policy-domain': DOMAIN, 'mx-host': ['mx.test.localhost'] },
        summary: { 'total-successful-session-count': 5326, 'total-failure-session-count': 303 },
        'failure-details': [
          { 'result-type': 'certificate-expired', 'sending-mta-ip': '2001:db8:abcd:0012::1', 'receiving-mx-hostname': 'mx.test.localhost', 'failed-session-count': 100 },
          {
            'result-type': 'starttls-not-supported',
            'sending-mta-ip': '2001:db8:abcd:0013::1',
            'receiving-mx-hostname': 'mx.test.localhost',
            'receiving-ip': '203.0.113.56',
            'failed-session-count': 200,
            'additional-information': 'https://reports.company-x.example/report_info?id=5065427c-23d3#StarttlsNotSupported',
          },
          {
            'result-type': 'validation-failure',
            'sending-mta-ip': '198.51.100.62',
            'receiving-ip': '198.51.100.201',
            'receiving-mx-hostname': 'mx.test.localhost',
            'failed-session-count': 3,
            'failure-reason-code': 'X509_V_ERR_PROXY_PATH_LENGTH_EXCEEDED',
          },
        ],
      },
    ],
  });

describe('TLS-RPT reports', () => {
  test('the _smtp._tls record the domain lists sends reports to its report address', () => {
    const tls = domain.dnsRecords.find((r) => r.name === `_smtp._tls.${DOMAIN}`);
    assert.ok(tls, JSON.stringify(domain.dnsRecords));
    assert.equal(tls.value, `v=TLSRPTv1; rua=mailto:tls-reports@${DOMAIN}`);
  });

  test('a gzip JSON report (application/tlsrpt+gzip) is parsed, stored once and listed', async () => {
    const before = await countRows('messages');
    const send = () =>
      deliver(
        `tls-reports@${DOMAIN}`,
        `Report Domain: ${DOMAIN} Submitter: company-x.example Report-ID: <5065427c-23d3@company-x.example>`,
        {
          filename: `company-x.example!${DOMAIN}!${begin}!${begin + DAY - 1}!001.json.gz`,
          contentType: 'application/tlsrpt+gzip',
          content: gzipSync(tlsReport('5065427c-23d3-47ca-b6e0-946ea0e8c4be')),
        },
        'tlsrpt-noreply@company-x.example',
      );
    const r = await send();
    assert.ok(r.ok, r.response);
    assert.ok((await send()).ok);
    assert.equal(await countRows('messages'), before);
    const res = await t.api('GET', `/domains/${domain.id}/tls-reports`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.data.length, 1);
    const [rep] = res.body.data;
    assert.deepEqual([rep.orgName, rep.reportId, rep.successCount, rep.failureCount], ['Company-X', '5065427c-23d3-47ca-b6e0-946ea0e8c4be', 5326, 303]);
    assert.deepEqual(
      rep.policies[0].failures.map((f: any) => [f.resultType, f.count, f.receivingMx]),
      [
        ['certificate-expired', 100, 'mx.test.localhost'],
        ['starttls-not-supported', 200, 'mx.test.localhost'],
        ['validation-failure', 3, 'mx.test.localhost'],
      ],
    );
    assert.equal(rep.policies[0].type, 'sts');
  });

  test('a report about another domain or with no report is 550 5.7.1, nothing stored', async () => {
    const other = gzipSync(tlsReport('x').replaceAll(`"policy-domain":"${DOMAIN}"`, '"policy-domain":"elsewhere.example"'));
    const r = await deliver(`tls-reports@${DOMAIN}`, 'tls', { filename: 'r.json.gz', contentType: 'application/tlsrpt+gzip', content: other });
    assert.equal(r.code, 550, r.response);
    assert.match(r.response, /elsewhere\.example/);
    const none = await deliver(`tls-reports@${DOMAIN}`, 'tls', { filename: 'r.txt', contentType: 'text/plain', content: Buffer.from('hello') });
    assert.equal(none.code, 550, none.response);
    assert.equal((await t.api('GET', `/domains/${domain.id}/tls-reports`)).body.data.length, 1);
  });
});

/** GET with a Host header of our choosing (fetch does not let one set it). */
function getWithHost(path: string, host: string): Promise<{ status: number; type: string; body: string }> {
  const url = new URL(t.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('MTA-STS for custom domains', () => {
  test('the policy is served for mta-sts.<verified domain> (any case, with a port), its id is in the _mta-sts record; other hosts get 404', async () => {
    const r = await getWithHost('/.well-known/mta-sts.txt', `MTA-STS.${DOMAIN.toUpperCase()}:443`);
    assert.equal(r.status, 200, r.body);
    assert.match(r.type, /^text\/plain/);
    assert.equal(r.body, `version: STSv1\r\nmode: testing\r\nmx: ${t.config.hostname}\r\nmax_age: 604800\r\n`);
    const sts = domain.dnsRecords.find((x) => x.name === `_mta-sts.${DOMAIN}`);
    assert.match(sts!.value, /^v=STSv1; id=[0-9a-f]{20}$/);
    assert.deepEqual(
      domain.dnsRecords.find((x) => x.name === `mta-sts.${DOMAIN}`),
      { type: 'CNAME', name: `mta-sts.${DOMAIN}`, value: t.config.hostname },
    );
    for (const host of ['mta-sts.unverified.example', DOMAIN, 'mta-sts.', '127.0.0.1']) {
      const other = await getWithHost('/.well-known/mta-sts.txt', host);
      assert.equal(other.status, 404, host);
      assert.equal(JSON.parse(other.body).error.code, 'NOT_FOUND');
    }
  });
});

describe('retention', () => {
  test('reports are deleted retention.reports (400d) after they arrived, their rows with them', async () => {
    // Every report the tests above stored (three DMARC reports and one TLS report).
    const stored = (await countRows('dmarc_reports')) + (await countRows('tls_reports'));
    assert.equal(stored, 4);
    offset = 399 * 86_400_000;
    assert.equal(await sweepReports(t.server.ctx), 0);
    offset = 401 * 86_400_000;
    assert.equal(await sweepReports(t.server.ctx), stored);
    for (const table of ['dmarc_reports', 'dmarc_records', 'tls_reports']) assert.equal(await countRows(table), 0, table);
  });
});
