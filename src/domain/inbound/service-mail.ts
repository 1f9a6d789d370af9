// The handler of mail at service addresses (service-address.ts), registered with
// prepareInbound: an unsubscribe by mail suppresses its recipient, a DMARC or TLS-RPT report is
// parsed and stored. Such mail is consumed (no inbox gets it) unless inboxes are among its
// recipients too; a report that cannot be taken refuses the mail (550 5.7.1, report-files.ts).
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { ingestDmarcReport } from '../domains/dmarc-reports.ts';
import { ingestTlsReport } from '../domains/tls-reports.ts';
import { unsubscribe } from '../sending/unsubscribe.ts';
import { INBOUND_REPORT_HANDLERS, type InboundInput } from './inbound.ts';

export async function handleServiceMail(ctx: AppContext, parsed: ParsedMail, input: InboundInput): Promise<boolean> {
  const services = input.services ?? [];
  if (!services.length) return false;
  for (const target of services) {
    if (target.kind === 'unsubscribe') await unsubscribe(ctx, target, 'mail');
    else if (target.kind === 'dmarc') await ingestDmarcReport(ctx, target, parsed);
    else await ingestTlsReport(ctx, target, parsed);
  }
  return input.recipients.length === 0 && !input.bounces?.length;
}

// First: a mail at a service address and a bounce address alike is taken here, then by the
// bounce handler (which returns false when inboxes are among the recipients).
INBOUND_REPORT_HANDLERS.unshift(handleServiceMail);
