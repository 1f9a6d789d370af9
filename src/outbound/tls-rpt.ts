// TLS-RPT (RFC 8460), sending side: what one delivery to a recipient domain saw of its
// transport-security policy (a session that succeeded, or failed with an RFC 8460 §4.3 type).
import type { AppContext } from '../context.ts';
import type { Db } from '../db/client.ts';
import { addTlsResults, type TlsResultRow } from '../store/repo/transport.ts';
import type { StsFailure, StsPolicy } from './mta-sts.ts';

/** RFC 8460 §4.3 result types this sender reports. */
export type TlsFailureType =
  | StsFailure
  | 'starttls-not-supported'
  | 'certificate-host-mismatch'
  | 'certificate-expired'
  | 'certificate-not-trusted'
  | 'validation-failure'
  | 'tlsa-invalid'
  | 'dnssec-invalid'
  | 'dane-required';

/** The RFC 8460 type of a failed STARTTLS or certificate check, from the error nodemailer gave. */
export function tlsFailureType(error: string): TlsFailureType {
  if (/altname|does not match/i.test(error)) return 'certificate-host-mismatch';
  if (/expired/i.test(error)) return 'certificate-expired';
  if (/self[- ]signed|unable to (verify|get)|not trusted|unknown ca/i.test(error)) return 'certificate-not-trusted';
  if (/upgrading connection with STARTTLS|STARTTLS/i.test(error)) return 'starttls-not-supported';
  return 'validation-failure';
}

/** The sessions of one delivery attempt to a domain, saved with the attempt's outcome. */
export class TlsSessions {
  policy: StsPolicy | undefined;
  private readonly results = new Map<string, TlsResultRow>();
  constructor(
    readonly ctx: AppContext,
    readonly domain: string,
  ) {}

  /** The MTA-STS lookup's outcome: the policy in force, or why a published one is not. */
  usePolicy(policy: StsPolicy | undefined, fetchFailure?: { type: StsFailure; detail: string }): void {
    this.policy = policy;
    if (fetchFailure) this.add(fetchFailure.type, '', '', fetchFailure.detail, 'sts');
  }

  success(): void {
    this.add('', '', '', null);
  }

  failure(type: TlsFailureType, mx: string, ip: string, detail: string): void {
    this.ctx.log.warn('TLS policy failure', { domain: this.domain, type, mx, detail });
    this.add(type, mx, ip, detail);
  }

  private add(resultType: string, mx: string, ip: string, detail: string | null, type?: string): void {
    const policyType = type ?? (this.policy ? 'sts' : 'no-policy-found');
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
      policyStrings: JSON.stringify(this.policy && policyType === 'sts' ? this.policy.text.split(/\r?\n/).filter((l) => l.trim()) : []),
      mxHosts: JSON.stringify(this.policy && policyType === 'sts' ? this.policy.mx : []),
      sessions: 1,
      detail: detail?.slice(0, 500) ?? null,
    });
  }

  /** Adds the counts to the day's rows, in the transaction that records the attempt. */
  async save(tx: Db): Promise<void> {
    if (this.results.size) await addTlsResults(tx, [...this.results.values()]);
  }
}
