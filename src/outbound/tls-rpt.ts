// TLS-RPT (RFC 8460), sending side: what one delivery to a recipient domain saw of its
// transport-security policy (a session that succeeded, or failed with an RFC 8460 §4.3 type),
// counted per UTC day; the daily `tls-report` job sums a day into one JSON report per domain
// and sends it, gzipped, to the rua of the domain's `_smtp._tls` record (mail through our own
// sender, DKIM-signed with the shared domain's key; https by POST).
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { AppContext } from '../context.ts';
import type { Db } from '../store/client.ts';
import { parseWebhookUrl, resolveTarget } from '../domain/webhooks/webhook-targets.ts';
import { post as postTo } from '../jobs/handlers/webhook.ts';
import { scheduleTlsReport } from '../jobs/handlers/tls-report.ts';
import { afterCommit } from '../store/store.ts';
import { addTlsResults, listTlsResultsUpTo, type TlsResultRow } from '../store/repo/transport.ts';
import { deliverAttempt, type AttemptResult } from './deliver.ts';
import { signMessage } from './dkim.ts';
import { resolveMx } from './mx.ts';
import { trustedCas, type StsFailure, type StsPolicy } from './mta-sts.ts';

/** RFC 8460 §4.3 result types this sender reports. */
export type TlsFailureType =
  StsFailure | 'starttls-not-supported' | 'certificate-host-mismatch' | 'certificate-expired' | 'certificate-not-trusted' | 'validation-failure' | 'tlsa-invalid' | 'dnssec-invalid' | 'dane-required';

/** The RFC 8460 type of a failed STARTTLS or certificate check, from the error nodemailer gave. */
export function tlsFailureType(error: string): TlsFailureType {
  if (/altname|does not match/i.test(error)) return 'certificate-host-mismatch';
  if (/expired/i.test(error)) return 'certificate-expired';
  if (/self[- ]signed|unable to (verify|get)|not trusted|unknown ca/i.test(error)) return 'certificate-not-trusted';
  if (/upgrading connection with STARTTLS|STARTTLS/i.test(error)) return 'starttls-not-supported';
  return 'validation-failure';
}

const scheduledDays = new WeakMap<AppContext, string>();

/** Whether a domain publishes a TLSRPT record is looked up again after this long. */
const RUA_CACHE_MS = 60_000;
const ruaCaches = new WeakMap<AppContext, Map<string, { wanted: boolean; until: number }>>();

/**
 * Whether `domain` asks for TLS reports (a `_smtp._tls` record with a rua): only such domains'
 * sessions are counted (RFC 8460 §3), so mail to the others writes nothing more.
 */
async function reportsWanted(ctx: AppContext, domain: string): Promise<boolean> {
  if (!ctx.config.outbound.tls_reports) return false;
  let cache = ruaCaches.get(ctx);
  if (!cache) ruaCaches.set(ctx, (cache = new Map()));
  const now = ctx.clock.now().getTime();
  const hit = cache.get(domain);
  if (hit && hit.until > now) return hit.wanted;
  let wanted: boolean;
  try {
    wanted = parseTlsRptRecord(await ctx.dns.txt(`_smtp._tls.${domain}`)).length > 0;
  } catch {
    return false; // DNS could not answer: this attempt goes uncounted
  }
  cache.set(domain, { wanted, until: now + RUA_CACHE_MS });
  return wanted;
}

/** The TLSA policy of one MX host: its records in presentation form. */
export interface DanePolicy {
  mx: string;
  strings: string[];
}

/** The sessions of one delivery attempt to a domain, saved with the attempt's outcome. */
export class TlsSessions {
  policy: StsPolicy | undefined;
  private wanted = false;
  private readonly results = new Map<string, TlsResultRow>();
  readonly ctx: AppContext;
  readonly domain: string;
  constructor(ctx: AppContext, domain: string) {
    this.ctx = ctx;
    this.domain = domain;
  }

  /** Looks up whether the domain wants reports (before the sessions are counted). */
  async start(): Promise<void> {
    this.wanted = await reportsWanted(this.ctx, this.domain);
  }

  /** The MTA-STS lookup's outcome: the policy in force, or why a published one is not. */
  usePolicy(policy: StsPolicy | undefined, fetchFailure?: { type: StsFailure; detail: string }): void {
    this.policy = policy;
    if (fetchFailure) this.add(fetchFailure.type, '', '', fetchFailure.detail, 'sts');
  }

  /** A session that met the policy (`dane`: the MX host's TLSA policy rather than the domain's). */
  success(dane?: DanePolicy): void {
    this.add('', '', '', null, dane);
  }

  failure(type: TlsFailureType, mx: string, ip: string, detail: string, dane?: DanePolicy): void {
    this.ctx.log.warn('TLS policy failure', { domain: this.domain, type, mx, detail });
    this.add(type, mx, ip, detail, dane);
  }

  private add(resultType: string, mx: string, ip: string, detail: string | null, dane?: DanePolicy | 'sts'): void {
    if (!this.wanted) return;
    const policyType = dane === 'sts' ? 'sts' : dane ? 'tlsa' : this.policy ? 'sts' : 'no-policy-found';
    // A TLSA policy is the MX host's: its successes are counted per host too.
    if (dane && dane !== 'sts') mx = dane.mx;
    const key = [policyType, resultType, mx, ip].join('|');
    const row = this.results.get(key);
    if (row) {
      row.sessions++;
      row.detail = detail;
      return;
    }
    this.results.set(key, {
      day: this.ctx.clock.now().toISOString().slice(0, 10),
      policyDomain: this.domain,
      policyType,
      resultType,
      receivingMx: mx,
      receivingIp: ip,
      policyStrings: JSON.stringify(dane && dane !== 'sts' ? dane.strings : this.policy && policyType === 'sts' ? this.policy.text.split(/\r?\n/).filter((l) => l.trim()) : []),
      mxHosts: JSON.stringify(dane && dane !== 'sts' ? [dane.mx] : this.policy && policyType === 'sts' ? this.policy.mx : []),
      sessions: 1,
      detail: detail?.slice(0, 500) ?? null,
    });
  }

  /** Adds the counts to the day's rows, in the transaction that records the attempt. */
  async save(tx: Db): Promise<void> {
    if (!this.results.size) return;
    const rows = [...this.results.values()];
    await addTlsResults(tx, rows);
    // The day's report job, queued by the first delivery of the day that counts (once per process and day).
    const day = rows[0].day;
    if (scheduledDays.get(this.ctx) !== day && (await scheduleTlsReport(tx, this.ctx.clock.now(), day))) afterCommit(() => this.ctx.notify('jobs'));
    scheduledDays.set(this.ctx, day);
  }
}

/** RFC 8460 §3: `v=TLSRPTv1; rua=mailto:a@b,https://c/` → the rua URIs; [] without one valid record. */
export function parseTlsRptRecord(records: string[]): string[] {
  const rpt = records.filter((r) => /^v=TLSRPTv1\s*(;|$)/.test(r.trim()));
  if (rpt.length !== 1) return [];
  const rua = /(?:^|;)\s*rua=([^;]+)/.exec(rpt[0])?.[1];
  if (!rua) return [];
  return rua
    .split(',')
    .map((u) => u.trim())
    .filter((u) => /^(mailto:[^\s@]+@[^\s@]+|https:\/\/\S+)$/i.test(u));
}

/** RFC 8460 §4.4: one report for one policy domain and one day. */
export interface TlsReport {
  'organization-name': string;
  'date-range': { 'start-datetime': string; 'end-datetime': string };
  'contact-info': string;
  'report-id': string;
  policies: Array<{
    policy: { 'policy-type': string; 'policy-string'?: string[]; 'policy-domain': string; 'mx-host'?: string[] };
    summary: { 'total-successful-session-count': number; 'total-failure-session-count': number };
    'failure-details'?: Array<{
      'result-type': string;
      'receiving-mx-hostname'?: string;
      'receiving-ip'?: string;
      'failed-session-count': number;
      'additional-information'?: string;
    }>;
  }>;
}

/** The reports of one day's rows: one per policy domain, a policy entry per policy type seen. */
export function buildReports(ctx: AppContext, day: string, rows: TlsResultRow[]): Map<string, TlsReport> {
  const reports = new Map<string, TlsReport>();
  for (const row of rows) {
    let report = reports.get(row.policyDomain);
    if (!report) {
      report = {
        'organization-name': ctx.config.hostname,
        'date-range': { 'start-datetime': `${day}T00:00:00Z`, 'end-datetime': `${day}T23:59:59Z` },
        'contact-info': `postmaster@${ctx.config.shared_domain}`,
        'report-id': `${day}.${row.policyDomain}@${ctx.config.hostname}`,
        policies: [],
      };
      reports.set(row.policyDomain, report);
    }
    // One entry per policy: the domain's (sts, no-policy-found) or each MX host's TLSA policy.
    let entry = report.policies.find((p) => p.policy['policy-type'] === row.policyType && JSON.stringify(p.policy['mx-host'] ?? []) === row.mxHosts);
    if (!entry) {
      const strings = JSON.parse(row.policyStrings) as string[];
      const mx = JSON.parse(row.mxHosts) as string[];
      entry = {
        policy: { 'policy-type': row.policyType, 'policy-domain': row.policyDomain, ...(strings.length ? { 'policy-string': strings } : {}), ...(mx.length ? { 'mx-host': mx } : {}) },
        summary: { 'total-successful-session-count': 0, 'total-failure-session-count': 0 },
      };
      report.policies.push(entry);
    }
    if (!row.resultType) {
      entry.summary['total-successful-session-count'] += row.sessions;
      continue;
    }
    entry.summary['total-failure-session-count'] += row.sessions;
    (entry['failure-details'] ??= []).push({
      'result-type': row.resultType,
      ...(row.receivingMx ? { 'receiving-mx-hostname': row.receivingMx } : {}),
      ...(row.receivingIp ? { 'receiving-ip': row.receivingIp } : {}),
      'failed-session-count': row.sessions,
      ...(row.detail ? { 'additional-information': row.detail } : {}),
    });
  }
  return reports;
}

/** RFC 8460 §5.3: the report as a multipart/report message, the JSON gzipped as an attachment. */
export function reportMessage(ctx: AppContext, domain: string, report: TlsReport, json: Buffer, to: string): Buffer {
  const submitter = ctx.config.hostname;
  const start = Date.parse(report['date-range']['start-datetime']) / 1000;
  const end = Date.parse(report['date-range']['end-datetime']) / 1000;
  const filename = `${submitter}!${domain}!${start}!${end}.json.gz`;
  const boundary = `tlsrpt-${randomUUID()}`;
  const body = gzipSync(json).toString('base64').replace(/.{76}/g, '$&\r\n');
  const lines = [
    `From: TLS reports <tls-reports@${ctx.config.shared_domain}>`,
    `To: <${to}>`,
    `Subject: Report Domain: ${domain} Submitter: ${submitter} Report-ID: <${report['report-id']}>`,
    `Date: ${ctx.clock.now().toUTCString()}`,
    `Message-ID: <${randomUUID()}@${submitter}>`,
    `TLS-Report-Domain: ${domain}`,
    `TLS-Report-Submitter: ${submitter}`,
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type="tlsrpt"; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    '',
    `This is an aggregate TLS report (RFC 8460) from ${submitter} for ${domain}, ${report['date-range']['start-datetime'].slice(0, 10)}.`,
    `--${boundary}`,
    'Content-Type: application/tlsrpt+gzip',
    'Content-Transfer-Encoding: base64',
    `Content-Disposition: attachment; filename="${filename}"`,
    '',
    body,
    `--${boundary}--`,
    '',
  ];
  return Buffer.from(lines.join('\r\n'));
}

/** Hands a report to the MX hosts of the rua address's domain (or `outbound.relay`), as our mail goes. */
async function mailReport(ctx: AppContext, to: string, raw: Buffer): Promise<string | undefined> {
  const from = `tls-reports@${ctx.config.shared_domain}`;
  const signed = await signMessage(ctx, raw, ctx.config.shared_domain);
  const envelope = { from, to: [to] };
  const accepted = (res: AttemptResult) => res.kind === 'replies' && [...res.replies.values()].every((r) => r.accepted);
  const describe = (res: AttemptResult) => (res.kind === 'replies' ? [...res.replies.values()].map((r) => r.response).join('; ') : res.error);
  if (ctx.config.outbound.relay) {
    const res = await deliverAttempt(ctx, 'relay', envelope, signed);
    return accepted(res) ? undefined : describe(res);
  }
  const route = await resolveMx(ctx, to.slice(to.lastIndexOf('@') + 1).toLowerCase());
  if (route.kind !== 'hosts') return `${to}: no MX`;
  let last = '';
  for (const host of route.hosts) {
    for (const address of host.addresses) {
      const res = await deliverAttempt(ctx, { name: host.name, address, port: ctx.config.outbound.mx_port }, envelope, signed);
      if (res.kind === 'replies') return accepted(res) ? undefined : describe(res);
      last = describe(res);
    }
  }
  return last || `${to}: no MX host reachable`;
}

/** POSTs the gzipped report (RFC 8460 §5.4) to an https rua, with the webhooks' address checks. */
async function postReport(ctx: AppContext, uri: string, gz: Buffer): Promise<string | undefined> {
  const target = await resolveTarget(ctx, parseWebhookUrl(uri, ctx.config.webhooks.allow_insecure_targets));
  const res = await postTo(
    target,
    gz,
    { 'Content-Type': 'application/tlsrpt+gzip', 'User-Agent': 'mailroom' },
    ctx.config.outbound.timeout,
    AbortSignal.timeout(ctx.config.outbound.timeout),
    trustedCas(ctx),
  );
  return res.status !== undefined && res.status >= 200 && res.status < 300 ? undefined : (res.error ?? `HTTP ${res.status}`);
}

/**
 * Sends the reports of `day` and earlier days not reported yet: each domain publishing a
 * `_smtp._tls` record gets its report at every rua. Domains without one are skipped.
 * Returns the number of reports sent.
 */
export async function sendTlsReports(ctx: AppContext, day: string): Promise<number> {
  const rows = await listTlsResultsUpTo(ctx.store.db, day);
  const byDay = new Map<string, TlsResultRow[]>();
  for (const r of rows) byDay.set(r.day, [...(byDay.get(r.day) ?? []), r]);
  let sent = 0;
  for (const [d, dayRows] of byDay) {
    for (const [domain, report] of buildReports(ctx, d, dayRows)) {
      let ruas: string[];
      try {
        ruas = parseTlsRptRecord(await ctx.dns.txt(`_smtp._tls.${domain}`));
      } catch (err) {
        ctx.log.warn('TLS report not sent: DNS unavailable', { domain, error: (err as Error).message });
        continue;
      }
      const json = Buffer.from(JSON.stringify(report));
      for (const rua of ruas) {
        try {
          const problem = rua.toLowerCase().startsWith('mailto:')
            ? await mailReport(ctx, decodeURIComponent(rua.slice(7)), reportMessage(ctx, domain, report, json, decodeURIComponent(rua.slice(7))))
            : await postReport(ctx, rua, gzipSync(json));
          if (problem) ctx.log.warn('TLS report not accepted', { domain, rua, error: problem });
          else sent++;
        } catch (err) {
          ctx.log.warn('TLS report not sent', { domain, rua, error: (err as Error).message });
        }
      }
    }
  }
  return sent;
}
