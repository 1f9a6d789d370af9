// DMARC aggregate reports (RFC 7489 §7.2, Appendix C): receivers (Google, Microsoft, Yahoo…)
// mail one a day per domain to the rua of its _dmarc record, which for a custom domain is
// dmarc-reports@<domain> (src/domain/inbound/service-address.ts, domains.ts dnsRecords). The
// XML (plain, gzip or zip: report-files.ts) is parsed and its rows stored (store/repo/reports.ts);
// the mail itself goes into no inbox. GET /domains/{id}/dmarc summarises them by day and source.
// A report that names another domain, has no feedback element, or more rows than
// `[inbound] report_max_records` is refused (550 5.7.1), as is XML with a DOCTYPE (entity expansion).
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { newId } from '../../ids.ts';
import { deleteReportsReceivedBefore, dmarcTotalsByDay, dmarcTotalsBySource, insertDmarcReport, listDmarcReports, type DmarcRecordRow, type DmarcTotals } from '../../store/repo/reports.ts';
import { intParam } from '../pagination.ts';
import { isoNow } from '../time.ts';
import { findDomainRow } from './domains.ts';
import { refusedReport, reportFiles } from './report-files.ts';

export interface ParsedDmarcReport {
  orgName: string;
  reportId: string;
  begin: Date;
  end: Date;
  domain: string;
  policy: string | null;
  records: Array<{ sourceIp: string; count: number; disposition: string; dkim: string; spf: string; headerFrom: string }>;
}

type Node = Record<string, unknown>;
const obj = (v: unknown): Node => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Node) : {});
const text = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v).trim() : '');
const list = (v: unknown): unknown[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
/** pass | fail (policy_evaluated results; anything else counts as fail). */
const result = (v: unknown) => (text(v).toLowerCase() === 'pass' ? 'pass' : 'fail');
const epoch = (v: unknown, field: string): Date => {
  const s = text(v);
  if (!/^\d{1,12}$/.test(s)) throw refusedReport(`the DMARC report has no valid ${field} (Unix time)`);
  return new Date(Number(s) * 1000);
};

/** Parses one report's XML; undefined when it is no DMARC aggregate report. */
export async function parseDmarcXml(ctx: AppContext, xml: string): Promise<ParsedDmarcReport | undefined> {
  if (/<!DOCTYPE|<!ENTITY/i.test(xml)) throw refusedReport('the DMARC report declares a DOCTYPE, which is not accepted');
  const { XMLParser } = await import('fast-xml-parser');
  let doc: Node;
  try {
    doc = new XMLParser({ ignoreAttributes: true, parseTagValue: false, removeNSPrefix: true, processEntities: true }).parse(xml) as Node;
  } catch {
    return undefined;
  }
  const feedback = obj(doc.feedback);
  const meta = obj(feedback.report_metadata);
  const published = obj(feedback.policy_published);
  if (!Object.keys(meta).length || !Object.keys(published).length) return undefined;
  const range = obj(meta.date_range);
  const rows = list(feedback.record);
  if (rows.length > ctx.config.inbound.report_max_records)
    throw refusedReport(`the DMARC report has ${rows.length} records; at most ${ctx.config.inbound.report_max_records} are taken (inbound.report_max_records)`);
  const records = rows.map((r) => {
    const row = obj(obj(r).row);
    const evaluated = obj(row.policy_evaluated);
    const count = Number(text(row.count));
    return {
      sourceIp: text(row.source_ip).slice(0, 64),
      count: Number.isSafeInteger(count) && count >= 0 ? count : 0,
      disposition: ['none', 'quarantine', 'reject'].includes(text(evaluated.disposition).toLowerCase()) ? text(evaluated.disposition).toLowerCase() : 'none',
      dkim: result(evaluated.dkim),
      spf: result(evaluated.spf),
      headerFrom: text(obj(obj(r).identifiers).header_from)
        .toLowerCase()
        .slice(0, 253),
    };
  });
  return {
    orgName: text(meta.org_name).slice(0, 200) || '(unnamed)',
    reportId: text(meta.report_id).slice(0, 200) || '(none)',
    begin: epoch(range.begin, 'date_range begin'),
    end: epoch(range.end, 'date_range end'),
    domain: text(published.domain).toLowerCase().replace(/\.$/, ''),
    policy: text(published.p).toLowerCase().slice(0, 20) || null,
    records: records.filter((r) => r.sourceIp),
  };
}

/**
 * Takes the report a mail at dmarc-reports@<domain> carries and stores it for that domain (a
 * copy sent again is stored once). Refused (550 5.7.1) when it carries none, or one about another
 * domain than this one or a subdomain of it (whose mail the domain's policy covers).
 */
export async function ingestDmarcReport(ctx: AppContext, target: { domainId: string; domain: string }, parsed: ParsedMail): Promise<{ stored: boolean }> {
  for await (const xml of reportFiles(ctx, parsed, /\.xml$/i)) {
    const report = await parseDmarcXml(ctx, xml.toString('utf8'));
    if (!report) continue;
    if (!report.domain) throw refusedReport('the DMARC report names no domain (policy_published/domain)');
    if (report.domain !== target.domain && !report.domain.endsWith(`.${target.domain}`)) {
      throw refusedReport(`the DMARC report is about ${report.domain}, not ${target.domain}`);
    }
    const id = newId('rpt');
    const records: DmarcRecordRow[] = report.records.map((r, seq) => ({ reportId: id, seq, ...r }));
    const stored = await ctx.store.transaction((tx) =>
      insertDmarcReport(
        tx,
        {
          id,
          domainId: target.domainId,
          orgName: report.orgName,
          reportId: report.reportId,
          beginAt: report.begin.toISOString(),
          endAt: report.end.toISOString(),
          policy: report.policy,
          receivedAt: isoNow(ctx.clock),
        },
        records,
      ),
    );
    ctx.log.info('dmarc report received', { domain: target.domain, org: report.orgName, reportId: report.reportId, records: records.length, stored });
    return { stored };
  }
  throw refusedReport('no DMARC aggregate report (XML, gzip or zip) in this message');
}

/** What GET /domains/{id}/dmarc answers. */
export interface DmarcSummary {
  domain: string;
  /** The window: reports whose range begins this many days back (UTC midnight) or later. */
  days: number;
  since: string;
  totals: DmarcTotals;
  byDay: Array<DmarcTotals & { day: string }>;
  sources: Array<DmarcTotals & { sourceIp: string }>;
  reports: Array<{ orgName: string; reportId: string; begin: string; end: string; policy: string | null; receivedAt: string }>;
}

/** Sources and reports listed at most (the totals count everything in the window). */
const LIST_LIMIT = 100;

export async function dmarcSummary(ctx: AppContext, accountId: string, domainId: string, query: URLSearchParams): Promise<DmarcSummary> {
  const days = intParam('days', query.get('days'), 30, 1, 366);
  const domain = await findDomainRow(ctx, accountId, domainId);
  const since = windowStart(ctx, days);
  const byDay = await dmarcTotalsByDay(ctx.db, domainId, since);
  const zero: DmarcTotals = { messages: 0, dmarcPass: 0, dkimAligned: 0, spfAligned: 0, quarantined: 0, rejected: 0 };
  const totals = byDay.reduce(
    (t, d) => ({
      messages: t.messages + d.messages,
      dmarcPass: t.dmarcPass + d.dmarcPass,
      dkimAligned: t.dkimAligned + d.dkimAligned,
      spfAligned: t.spfAligned + d.spfAligned,
      quarantined: t.quarantined + d.quarantined,
      rejected: t.rejected + d.rejected,
    }),
    zero,
  );
  return {
    domain: domain.domain,
    days,
    since,
    totals,
    byDay,
    sources: await dmarcTotalsBySource(ctx.db, domainId, since, LIST_LIMIT),
    reports: (await listDmarcReports(ctx.db, domainId, since, LIST_LIMIT)).map((r) => ({
      orgName: r.orgName,
      reportId: r.reportId,
      begin: r.beginAt,
      end: r.endAt,
      policy: r.policy,
      receivedAt: r.receivedAt,
    })),
  };
}

/** UTC midnight `days - 1` days before today: `days` whole days including today. */
export function windowStart(ctx: AppContext, days: number): string {
  const now = ctx.clock.now();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1))).toISOString();
}

/** Deletes DMARC and TLS-RPT reports older than `retention.reports` (housekeeping, hourly). */
export async function sweepReports(ctx: AppContext): Promise<number> {
  return deleteReportsReceivedBefore(ctx.db, new Date(ctx.clock.now().getTime() - ctx.config.retention.reports).toISOString());
}
