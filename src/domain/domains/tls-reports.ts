// TLS-RPT reports (RFC 8460): senders that deliver to a custom domain report daily, as JSON
// (usually gzip: application/tlsrpt+gzip), to the rua of its _smtp._tls record,
// tls-reports@<domain> (src/domain/inbound/service-address.ts). Each report is parsed (§4.4)
// and stored; GET /domains/{id}/tls-reports lists them. Bounded like DMARC reports:
// `[inbound] report_max_bytes` once unpacked, `[inbound] report_max_records` policies and
// failure details; past either, or with no report in the mail, 550 5.7.1 and nothing stored.
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { insertTlsReport, listTlsReports } from '../../store/repo/reports.ts';
import { intParam } from '../pagination.ts';
import { isoNow } from '../time.ts';
import { windowStart } from './dmarc-reports.ts';
import { findDomainRow } from './domains.ts';
import { refusedReport, reportFiles } from './report-files.ts';

export interface TlsPolicyResult {
  /** sts | tlsa | no-policy-found */
  type: string;
  domain: string;
  mxHosts: string[];
  success: number;
  failure: number;
  failures: Array<{ resultType: string; count: number; sendingMta?: string; receivingMx?: string }>;
}

export interface ParsedTlsReport {
  orgName: string;
  reportId: string;
  begin: Date;
  end: Date;
  policies: TlsPolicyResult[];
}

type Node = Record<string, unknown>;
const obj = (v: unknown): Node => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Node) : {});
const str = (v: unknown, max = 253): string => (typeof v === 'string' ? v.trim().slice(0, max) : '');
const count = (v: unknown): number => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const time = (v: unknown, field: string): Date => {
  const d = new Date(str(v, 64));
  if (Number.isNaN(d.getTime())) throw refusedReport(`the TLS report has no valid ${field}`);
  return d;
};

/** Parses one report's JSON; undefined when it is no TLS-RPT report. */
export function parseTlsReport(ctx: AppContext, json: string): ParsedTlsReport | undefined {
  let doc: Node;
  try {
    doc = obj(JSON.parse(json));
  } catch {
    return undefined;
  }
  const range = obj(doc['date-range']);
  if (!Array.isArray(doc.policies) || !Object.keys(range).length) return undefined;
  const rows = doc.policies.length + doc.policies.reduce<number>((n, p) => n + arr(obj(p)['failure-details']).length, 0);
  const max = ctx.config.inbound.report_max_records;
  if (rows > max) throw refusedReport(`the TLS report has ${rows} policies and failure details; at most ${max} are taken (inbound.report_max_records)`);
  return {
    orgName: str(doc['organization-name'], 200) || '(unnamed)',
    reportId: str(doc['report-id'], 200) || '(none)',
    begin: time(range['start-datetime'], 'start-datetime'),
    end: time(range['end-datetime'], 'end-datetime'),
    policies: doc.policies.map((p): TlsPolicyResult => {
      const policy = obj(obj(p).policy);
      const summary = obj(obj(p).summary);
      return {
        type: str(policy['policy-type'], 32) || 'no-policy-found',
        domain: str(policy['policy-domain']).toLowerCase(),
        mxHosts: arr(policy['mx-host'])
          .map((h) => str(h))
          .filter(Boolean),
        success: count(summary['total-successful-session-count']),
        failure: count(summary['total-failure-session-count']),
        failures: arr(obj(p)['failure-details']).map((f) => {
          const d = obj(f);
          const sendingMta = str(d['sending-mta-ip'], 64);
          const receivingMx = str(d['receiving-mx-hostname']);
          return { resultType: str(d['result-type'], 64) || 'unknown', count: count(d['failed-session-count']), ...(sendingMta ? { sendingMta } : {}), ...(receivingMx ? { receivingMx } : {}) };
        }),
      };
    }),
  };
}

/** Takes the report a mail at tls-reports@<domain> carries and stores it (a copy sent again is stored once). */
export async function ingestTlsReport(ctx: AppContext, target: { domainId: string; domain: string }, parsed: ParsedMail): Promise<{ stored: boolean }> {
  for await (const json of reportFiles(ctx, parsed, /\.json$/i)) {
    const report = parseTlsReport(ctx, json.toString('utf8'));
    if (!report) continue;
    const other = report.policies.find((p) => p.domain && p.domain !== target.domain);
    if (other) throw refusedReport(`the TLS report is about ${other.domain}, not ${target.domain}`);
    const stored = await insertTlsReport(ctx.db, {
      id: newId('rpt'),
      domainId: target.domainId,
      orgName: report.orgName,
      reportId: report.reportId,
      beginAt: report.begin.toISOString(),
      endAt: report.end.toISOString(),
      successCount: report.policies.reduce((n, p) => n + p.success, 0),
      failureCount: report.policies.reduce((n, p) => n + p.failure, 0),
      policies: JSON.stringify(report.policies),
      receivedAt: isoNow(ctx.clock),
    });
    ctx.log.info('tls report received', { domain: target.domain, org: report.orgName, reportId: report.reportId, stored });
    return { stored };
  }
  throw refusedReport('no TLS-RPT report (JSON, gzip or zip) in this message');
}

/** GET /domains/{id}/tls-reports: the reports of the last `days` days (default 30), newest first, at most 100. */
export async function tlsReportList(ctx: AppContext, accountId: string, domainId: string, query: URLSearchParams) {
  const days = intParam('days', query.get('days'), 30, 1, 366);
  const domain = await findDomainRow(ctx, accountId, domainId);
  const since = windowStart(ctx, days);
  const rows = await listTlsReports(ctx.db, domainId, since, 100);
  const data = rows.map((r) => ({
    orgName: r.orgName,
    reportId: r.reportId,
    begin: r.beginAt,
    end: r.endAt,
    successCount: r.successCount,
    failureCount: r.failureCount,
    policies: JSON.parse(r.policies) as TlsPolicyResult[],
    receivedAt: r.receivedAt,
  }));
  return { domain: domain.domain, days, since, data };
}
