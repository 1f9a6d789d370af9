// The MX-facing SMTP listener (smtp-server): EHLO with `hostname`, SIZE, optional STARTTLS,
// recipient checks (never an open relay) and DATA answered 250 only once the message is on disk:
// processed and committed, or spooled (src/domain/inbound/spool.ts). Callbacks stay thin; the rules
// live in domain/.
import type { SMTPServer, SMTPServerAddress, SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import type { AppContext } from '../context.ts';
import type { BounceTarget } from '../domain/inbound/bounce-address.ts';
import { resolveServiceRecipient, type ServiceTarget } from '../domain/inbound/service-address.ts';
import { resolveBounceRecipient, resolveRecipient } from '../domain/inbound/inbound.ts';
import { receiveInbound } from '../domain/inbound/spool.ts';
import type { InboxRow } from '../domain/inboxes/inboxes.ts';
import { errorFields } from '../log.ts';
import type { Service } from '../context.ts';
import { countSmtpLimited, countSmtpMessage, countSmtpRecipient } from '../metrics.ts';
import { memoryBudgetOf } from './memory-budget.ts';
import { refuseMessage, replyFor, tooMuchInProgress } from './replies.ts';
import { receiveData } from './data-stream.ts';
import { closeSmtp, createSmtpServer, listenSmtp } from './listener.ts';
import { TlsCertificate } from './tls.ts';

type Recipient = SMTPServerAddress & { inbox?: InboxRow; bounce?: BounceTarget; service?: ServiceTarget };

export interface SmtpService extends Service {
  /** The port bound (known after start; 0 before). */
  port: number;
}

export function createSmtpService(ctx: AppContext): SmtpService {
  const cfg = ctx.config.smtp;
  const maxBytes = cfg.max_message_bytes;
  const tls = cfg.tls_cert && cfg.tls_key ? new TlsCertificate(cfg.tls_cert, cfg.tls_key, ctx.log) : undefined;
  let server: SMTPServer | undefined;
  const memory = memoryBudgetOf(ctx);

  const onData = (stream: SMTPServerDataStream, session: SMTPServerSession, callback: (err?: Error | null, message?: string) => void) => {
    const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
    const envelope = { mailFrom, remoteAddress: session.remoteAddress, heloName: session.hostNameAppearsAs, secure: session.secure };
    receiveData(
      ctx,
      stream,
      {
        session: session.id,
        envelope,
        rejected: () => countSmtpMessage(ctx, 'rejected'),
        async take(raw, size) {
          const rcpts = session.envelope.rcptTo as Recipient[];
          const recipients = rcpts.flatMap((r) => (r.inbox ? [r.inbox] : []));
          const bounces = rcpts.flatMap((r) => (r.bounce ? [r.bounce] : []));
          const services = rcpts.flatMap((r) => (r.service ? [r.service] : []));
          // A staged message's file is the stored raw file once renamed.
          const { messageIds, spooledAs } = await receiveInbound(ctx, { ...envelope, raw, recipients, bounces, services }).catch((err: unknown) => {
            throw refuseMessage(ctx, err, session.id, 'smtp message');
          });
          countSmtpMessage(ctx, 'accepted');
          ctx.log.info('smtp message accepted', { session: session.id, remote: session.remoteAddress, size, messageIds, spooledAs });
          return spooledAs ? `2.0.0 OK: queued as ${spooledAs}` : `2.0.0 OK: stored as ${messageIds?.join(' ') || 'report'}`;
        },
      },
      callback,
    );
  };

  const service: SmtpService = {
    name: 'smtp',
    port: 0,
    async start() {
      server = createSmtpServer(ctx, tls, {
        // smtp-server writes "<name> ESMTP <banner>": the banner adds only the product's name.
        banner: 'mailroom',
        authOptional: true,
        disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
        maxRecipients: cfg.max_recipients,
        onMailFrom(address, _session, cb) {
          // A sender announcing a size the budget cannot hold now hears so before sending it.
          const announced = Number((address.args || {}).SIZE ?? 0);
          if (announced > 0 && announced <= maxBytes && !memory.fits(announced)) {
            countSmtpLimited(ctx, 'memory_budget');
            return cb(tooMuchInProgress());
          }
          cb();
        },
        onRcptTo(address, session, cb) {
          void (async () => {
            const bounce = await resolveBounceRecipient(ctx, address.address);
            // Unsubscribe and report addresses (src/domain/inbound/service-address.ts).
            const service = bounce ? undefined : await resolveServiceRecipient(ctx, address.address);
            if (bounce) (address as Recipient).bounce = bounce;
            else if (service) (address as Recipient).service = service;
            // The sender is checked against the inbox's receive lists here, before any data, and
            // then 452 4.2.2 (mailbox full) once the account stores its quota (src/domain/accounts/quotas.ts).
            else (address as Recipient).inbox = await resolveRecipient(ctx, address.address, session.envelope.mailFrom ? session.envelope.mailFrom.address : '', { storage: true });
          })().then(
            () => {
              countSmtpRecipient(ctx, 'accepted');
              cb();
            },
            (err: unknown) => {
              countSmtpRecipient(ctx, 'rejected');
              cb(replyFor(err));
            },
          );
        },
        onData,
      });
      server.on('error', (err) => ctx.log.error('smtp server error', errorFields(err)));
      service.port = await listenSmtp(server, cfg.listen!);
      ctx.log.info('smtp listening', { host: cfg.listen!.host, port: service.port, starttls: Boolean(tls) });
    },
    async stop() {
      await closeSmtp(server);
    },
  };
  return service;
}
