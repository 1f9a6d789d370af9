// Addresses mailroom itself answers on the domains it serves, besides bounce addresses
// (bounce-address.ts): what arrives there is acted on and never stored in an inbox.
//   unsubscribe+<token>@<domain>   one-click unsubscribe by mail (src/domain/sending/unsubscribe.ts)
//   dmarc-reports@<custom domain>  DMARC aggregate reports, the rua of the domain's _dmarc record
//   tls-reports@<custom domain>    TLS-RPT reports, the rua of the domain's _smtp._tls record
// Report addresses exist only for a custom domain whose claim is verified (its owner proved the
// name), so an account cannot read reports about a domain it does not hold. An address in the
// unsubscribe namespace with a wrong token is an unknown mailbox (550 5.1.1 at RCPT).
import type { AppContext } from '../../context.ts';
import { findVerifiedClaim } from '../../store/repo/domains.ts';
import { splitAddress } from '../addresses.ts';
import { AppError } from '../errors.ts';
import { readUnsubscribeToken, UNSUBSCRIBE_PREFIX, type UnsubscribeTarget } from '../sending/unsubscribe.ts';
import { servesDomain } from './inbound.ts';

export const DMARC_REPORT_LOCAL = 'dmarc-reports';
export const TLS_REPORT_LOCAL = 'tls-reports';

export type ServiceTarget = ({ kind: 'unsubscribe' } & UnsubscribeTarget) | { kind: 'dmarc' | 'tls-rpt'; domainId: string; accountId: string; domain: string };

/** True for local parts no inbox may take (they belong to the handlers above). */
export function isServiceLocalPart(local: string): boolean {
  const l = local.toLowerCase();
  return l.startsWith(UNSUBSCRIBE_PREFIX) || l === DMARC_REPORT_LOCAL || l === TLS_REPORT_LOCAL;
}

/** The report address of `kind` for a domain (what its DNS records name as rua). */
export const reportAddress = (kind: 'dmarc' | 'tls-rpt', domain: string): string => `${kind === 'dmarc' ? DMARC_REPORT_LOCAL : TLS_REPORT_LOCAL}@${domain.toLowerCase()}`;

/** What an RCPT TO names when it is a service address of ours; undefined for any other address. */
export async function resolveServiceRecipient(ctx: AppContext, address: string): Promise<ServiceTarget | undefined> {
  const parts = splitAddress(address.trim());
  if (!parts || !isServiceLocalPart(parts.local)) return undefined;
  const domain = parts.domain.toLowerCase().replace(/\.$/, '');
  if (!(await servesDomain(ctx, domain))) return undefined;
  const local = parts.local.toLowerCase();
  if (local.startsWith(UNSUBSCRIBE_PREFIX)) {
    const target = await readUnsubscribeToken(ctx, local.slice(UNSUBSCRIBE_PREFIX.length));
    if (!target) throw new AppError('INBOX_NOT_FOUND', 'no such mailbox here');
    return { kind: 'unsubscribe', ...target };
  }
  const claim = await findVerifiedClaim(ctx.db, domain);
  if (!claim) throw new AppError('INBOX_NOT_FOUND', 'no such mailbox here');
  return { kind: local === DMARC_REPORT_LOCAL ? 'dmarc' : 'tls-rpt', domainId: claim.id, accountId: claim.accountId, domain };
}
