// TLS-RPT (RFC 8460), sending side: what one delivery to a recipient domain saw of its
// transport-security policy (a session that succeeded, or failed with an RFC 8460 §4.3 type).
import type { AppContext } from '../context.ts';
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

export interface TlsFailure {
  type: TlsFailureType;
  mx: string;
  detail: string;
}

/** The sessions of one delivery attempt to a domain, recorded once it ends. */
export class TlsSessions {
  successes = 0;
  readonly failures: TlsFailure[] = [];
  constructor(
    readonly domain: string,
    readonly policy: StsPolicy | undefined,
    fetchFailure?: { type: StsFailure; detail: string },
  ) {
    if (fetchFailure) this.failures.push({ type: fetchFailure.type, mx: '', detail: fetchFailure.detail });
  }
  success(): void {
    this.successes++;
  }
  failure(type: TlsFailureType, mx: string, detail: string): void {
    this.failures.push({ type, mx, detail });
  }
  async record(ctx: AppContext): Promise<void> {
    for (const f of this.failures) ctx.log.warn('TLS policy failure', { domain: this.domain, type: f.type, mx: f.mx, detail: f.detail });
  }
}
