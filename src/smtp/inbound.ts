// The MX-facing SMTP listener (smtp-server): EHLO with `hostname`, SIZE, optional STARTTLS,
// recipient checks (never an open relay) and DATA answered 250 only once the message is on disk:
// processed and committed, or spooled (src/domain/spool.ts). Callbacks stay thin; the rules
// live in domain/.
import type { SMTPServer, SMTPServerAddress, SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import type { AppContext } from '../context.ts';
import type { BounceTarget } from '../domain/bounce-address.ts';
import { resolveBounceRecipient, resolveRecipient } from '../domain/inbound.ts';
import { receiveInbound } from '../domain/spool.ts';
import type { InboxRow } from '../domain/inboxes.ts';
import { errorFields } from '../log.ts';
import type { Service } from '../main.ts';
import { countSmtpLimited, countSmtpMessage, countSmtpRecipient } from '../metrics.ts';
import { MemoryBudget } from './memory-budget.ts';
import { refuseMessage, replyFor, smtpReply } from './replies.ts';
import { closeSmtp, createSmtpServer, listenSmtp } from './listener.ts';
import { TlsCertificate } from './tls.ts';

type Recipient = SMTPServerAddress & { inbox?: InboxRow; bounce?: BounceTarget };

export interface SmtpService extends Service {
  /** The port bound (known after start; 0 before). */
  port: number;
}

export function createSmtpService(ctx: AppContext): SmtpService {
  const cfg = ctx.config.smtp;
  const maxBytes = cfg.max_message_bytes;
  const tls = cfg.tls_cert && cfg.tls_key ? new TlsCertificate(cfg.tls_cert, cfg.tls_key, ctx.log) : undefined;
  let server: SMTPServer | undefined;
  const memory = new MemoryBudget(cfg.memory_budget);

  const onData = (stream: SMTPServerDataStream, session: SMTPServerSession, callback: (err?: Error | null, message?: string) => void) => {
    // One answer per DATA, whichever of 'error' and 'end' comes first.
    let answered = false;
    const done = (err: Error | null, message?: string) => {
      if (answered) return;
      answered = true;
      callback(err, message);
    };
    const chunks: Buffer[] = [];
    let size = 0;
    let held = 0;
    let overBudget = false;
    const release = () => {
      memory.release(held);
      held = 0;
    };
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Past the limit the rest is read and dropped (the client must finish DATA to hear 552),
      // and so is the rest of a transaction the memory budget cannot hold (452 at the end).
      if (size > maxBytes || overBudget) return;
      if (!memory.take(held, chunk.length)) {
        overBudget = true;
        chunks.length = 0;
        return release();
      }
      held += chunk.length;
      chunks.push(chunk);
    });
    stream.on('error', (err) => {
      release();
      done(replyFor(err));
    });
    stream.on('end', () => {
      if (stream.sizeExceeded || size > maxBytes) {
        release();
        countSmtpMessage(ctx, 'rejected');
        return done(smtpReply(552, '5.3.4', `message exceeds the maximum size of ${maxBytes} bytes`));
      }
      if (overBudget) {
        countSmtpLimited(ctx, 'memory_budget');
        return done(smtpReply(452, '4.3.1', 'too much mail in progress, try again later'));
      }
      const rcpts = session.envelope.rcptTo as Recipient[];
      const recipients = rcpts.flatMap((r) => (r.inbox ? [r.inbox] : []));
      const bounces = rcpts.flatMap((r) => (r.bounce ? [r.bounce] : []));
      const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
      const raw = Buffer.concat(chunks, size);
      chunks.length = 0; // the pieces are garbage now, not held until the reply
      receiveInbound(ctx, {
        raw,
        mailFrom,
        recipients,
        bounces,
        remoteAddress: session.remoteAddress,
        heloName: session.hostNameAppearsAs,
        secure: session.secure,
      })
        .finally(release)
        .then(
          ({ messageIds, spooledAs }) => {
            countSmtpMessage(ctx, 'accepted');
            ctx.log.info('smtp message accepted', { session: session.id, remote: session.remoteAddress, size, messageIds, spooledAs });
            done(null, spooledAs ? `2.0.0 OK: queued as ${spooledAs}` : `2.0.0 OK: stored as ${messageIds?.join(' ') || 'report'}`);
          },
          (err) => {
            countSmtpMessage(ctx, 'rejected');
            done(refuseMessage(ctx, err, session.id, 'smtp message'));
          },
        );
    });
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
            return cb(smtpReply(452, '4.3.1', 'too much mail in progress, try again later'));
          }
          cb();
        },
        onRcptTo(address, _session, cb) {
          try {
            const bounce = resolveBounceRecipient(ctx, address.address);
            if (bounce) (address as Recipient).bounce = bounce;
            else (address as Recipient).inbox = resolveRecipient(ctx, address.address);
            countSmtpRecipient(ctx, 'accepted');
            cb();
          } catch (err) {
            countSmtpRecipient(ctx, 'rejected');
            cb(replyFor(err));
          }
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
