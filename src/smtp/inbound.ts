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
import { assertStorageRoom } from '../domain/accounts/quotas.ts';
import { LARGE_MESSAGE_BYTES, stageInbound, type InboundStage } from '../domain/inbound/inbound-large.ts';
import type { InboundInput } from '../domain/inbound/inbound.ts';
import type { InboxRow } from '../domain/inboxes/inboxes.ts';
import { errorFields } from '../log.ts';
import type { Service } from '../context.ts';
import { countSmtpLimited, countSmtpMessage, countSmtpRecipient } from '../metrics.ts';
import { memoryBudgetOf } from './memory-budget.ts';
import { messageTooLarge, refuseMessage, replyFor, smtpReply, tooMuchInProgress } from './replies.ts';
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
    // One answer per DATA, whichever of 'error' and 'end' comes first, and only once a
    // dropped staged file is gone (a client told 552 finds nothing of its message left).
    let answered = false;
    let discarding: Promise<void> | undefined;
    const done = (err: Error | null, message?: string) => {
      if (answered) return;
      answered = true;
      void Promise.resolve(discarding).catch(() => undefined).then(() => callback(err, message));
    };
    const chunks: Buffer[] = [];
    let size = 0;
    let held = 0;
    let overBudget = false;
    /** A message past LARGE_MESSAGE_BYTES goes on to a staged file (src/domain/inbound/inbound-large.ts). */
    let stage: InboundStage | undefined;
    let head: Buffer | undefined;
    let unstaged = false;
    const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
    const envelope = { mailFrom, remoteAddress: session.remoteAddress, heloName: session.hostNameAppearsAs, secure: session.secure };
    const release = () => {
      memory.release(held);
      held = 0;
    };
    const drop = () => {
      chunks.length = 0;
      head = undefined;
      if (stage) discarding = stage.discard();
      stage = undefined;
    };
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Past the limit the rest is read and dropped (the client must finish DATA to hear 552),
      // and so is the rest of a transaction the memory budget cannot hold (452 at the end).
      if (size > maxBytes || overBudget || unstaged) return drop();
      if (!stage) {
        if (!memory.take(held, chunk.length)) {
          overBudget = true;
          drop();
          return release();
        }
        held += chunk.length;
        chunks.push(chunk);
        if (size <= LARGE_MESSAGE_BYTES) return;
        // From here on the bytes go to disk as they come; memory keeps the first ones (the
        // header section, for authentication) and no more.
        stage = stageInbound(ctx, envelope);
        head = Buffer.concat(chunks.splice(0));
        chunk = head;
      }
      // The client waits while the disk catches up (smtp-server stops reading its socket).
      const wait = stage.write(chunk);
      if (wait) {
        stream.pause();
        wait.catch((err: unknown) => {
          // A full or failing disk: the rest is read and dropped, and the sender retries later.
          ctx.log.error('smtp message not staged', { session: session.id, ...errorFields(err) });
          unstaged = true;
          drop();
        }).finally(() => stream.resume());
      }
    });
    stream.on('error', (err) => {
      release();
      drop();
      done(replyFor(err));
    });
    stream.on('end', () => {
      if (stream.sizeExceeded || size > maxBytes) {
        release();
        countSmtpMessage(ctx, 'rejected');
        return done(messageTooLarge(maxBytes));
      }
      if (overBudget) {
        countSmtpLimited(ctx, 'memory_budget');
        return done(tooMuchInProgress());
      }
      if (unstaged) {
        release();
        countSmtpMessage(ctx, 'rejected');
        return done(smtpReply(451, '4.3.0', 'local error in processing, try again later'));
      }
      const rcpts = session.envelope.rcptTo as Recipient[];
      const recipients = rcpts.flatMap((r) => (r.inbox ? [r.inbox] : []));
      const bounces = rcpts.flatMap((r) => (r.bounce ? [r.bounce] : []));
      const services = rcpts.flatMap((r) => (r.service ? [r.service] : []));
      // A staged message's file is the stored raw file once renamed; if it never is (refused,
      // failed), it is removed here.
      const staging = stage;
      const raw: Promise<InboundInput['raw']> = staging ? staging.finish(head!) : Promise.resolve(Buffer.concat(chunks.splice(0), size));
      raw
        .then((message) => receiveInbound(ctx, { ...envelope, raw: message, recipients, bounces, services }))
        .finally(() => {
          release();
          return staging?.discard();
        })
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
            // The sender is checked against the inbox's receive lists here, before any data.
            else (address as Recipient).inbox = await resolveRecipient(ctx, address.address, session.envelope.mailFrom ? session.envelope.mailFrom.address : '');
            // 452 4.2.2 (mailbox full) once the account stores its quota (src/domain/accounts/quotas.ts).
            const inbox = (address as Recipient).inbox;
            if (inbox) await assertStorageRoom(ctx, inbox.accountId);
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
