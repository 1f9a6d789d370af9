// The MTA-STS policy (RFC 8461 §3.2) of a verified custom domain, served at
// https://mta-sts.<domain>/.well-known/mta-sts.txt: senders that find the domain's `_mta-sts`
// TXT record fetch it and then deliver only over TLS to the MX it names (`enforce`) or report
// failures without refusing (`testing`, `[inbound] mta_sts_mode`). The policy's id in the TXT
// record (domain-check.ts mtaStsId) changes with it. HTTPS is the operator's reverse proxy's:
// it must hold a certificate for mta-sts.<domain> and pass the Host header on.
import type { AppContext } from '../../context.ts';
import { findVerifiedClaim } from '../../store/repo/domains.ts';
import { AppError } from '../errors.ts';
import { normalizeHost } from './domain-check.ts';

/** How long senders may cache the policy (RFC 8461 §3.2 suggests weeks): one week. */
export const MTA_STS_MAX_AGE = 604_800;

/** The policy text for a request whose Host is mta-sts.<domain>; 404 NOT_FOUND for any other host. */
export async function mtaStsPolicy(ctx: AppContext, hostHeader: string | undefined): Promise<string> {
  // Host: name[:port], any case, perhaps with the root's trailing dot.
  const host = normalizeHost((hostHeader ?? '').replace(/:\d+$/, ''));
  const domain = host.startsWith('mta-sts.') ? host.slice('mta-sts.'.length) : '';
  if (!domain || !(await findVerifiedClaim(ctx.db, domain))) throw new AppError('NOT_FOUND', 'no MTA-STS policy is served for this host name');
  return `version: STSv1\r\nmode: ${ctx.config.inbound.mta_sts_mode}\r\nmx: ${normalizeHost(ctx.config.hostname)}\r\nmax_age: ${MTA_STS_MAX_AGE}\r\n`;
}
