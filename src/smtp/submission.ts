// The SMTP submission listener (`submission.listen`, RFC 6409; off by default): mail clients and
// agents send through it as one of their inboxes. STARTTLS with the MX listener's certificate;
// AUTH PLAIN or LOGIN with an inbox address and a writing API key of its account, offered only
// over TLS unless the client is on loopback (RFC 8314 §3, RFC 4954 §4); failed logins counted
// per (username, client address) and refused for a while past a few; a revoked key's session
// ended within seconds; MAIL FROM the inbox's own address; the message queued through the send
// pipeline before the 250 (src/domain/sending/submission.ts). The callbacks stay thin: the rules
// live in domain/.
import type { Socket } from 'node:net';
import type { SMTPServer, SMTPServerAuthentication, SMTPServerAuthenticationResponse, SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import type { AppContext, Service } from '../context.ts';
import { MAX_RECIPIENTS } from '../domain/sending/sending.ts';
import { authenticateSubmitter, checkSubmissionRecipient, checkSubmissionSender, submitMessage, submitterStillValid, type Submitter } from '../domain/sending/submission.ts';
import { isAppError } from '../domain/errors.ts';
import { errorFields } from '../log.ts';
import { countSubmission, countSubmissionAuth } from '../metrics.ts';
import { AuthFailures, loginKey } from './auth-failures.ts';
import { receiveData } from './data-stream.ts';
import { closeSmtp, createSmtpServer, listenSmtp } from './listener.ts';
import { refuseMessage, replyFor, smtpReply } from './replies.ts';
import { clientKey, eachConnection, type Connection } from './session-limits.ts';
import { TlsCertificate } from './tls.ts';

/** 127.0.0.0/8 and ::1 (also as IPv4-mapped): the only clients that may log in without TLS. */
export function isLoopback(address: string | undefined): boolean {
  const a = (address ?? '').replace(/^::ffff:(?=\d+\.)/i, '');
  return a === '::1' || /^127\.\d+\.\d+\.\d+$/.test(a);
}

type SubmissionSession = SMTPServerSession & { user?: Submitter };

/**
 * How often a logged-in session's key is checked again. Not a budget but the bound of PRODUCT.md
 * "Bounded cost" (a revoked key's sessions end within 5 s): with the auth cache a check costs a
 * map lookup, so it is cheap enough to run well inside that bound.
 */
export const KEY_RECHECK_MS = 2_000;
const KEY_REVOKED = 'the API key of this session was revoked or expired; log in again';

export interface SubmissionService extends Service {
  /** The port bound (0 when off or before start). */
  port: number;
}

export function createSubmissionService(ctx: AppContext): SubmissionService {
  const cfg = ctx.config.smtp;
  let server: SMTPServer | undefined;
  const failures = new AuthFailures(ctx.clock);

  /** A client that must STARTTLS before it may log in. */
  const needsTls = (conn: Connection) => !conn.secure && !isLoopback(conn.remoteAddress);

  /**
   * Per connection, before its greeting: EHLO lists AUTH only where logging in is allowed (so a
   * client never sends its key in clear), and AUTH itself is answered 538 before STARTTLS,
   * before any credentials are sent.
   */
  const guardAuth = (tls: boolean) => (conn: Connection, socket: Socket) => {
    const ehlo = conn.handler_EHLO;
    conn.handler_EHLO = (command, callback) => {
      if (!needsTls(conn)) return ehlo.call(conn, command, callback);
      // smtp-server reads the session's list (when set) instead of the server's while it
      // writes the EHLO reply, synchronously.
      conn.session.disabledCommands = tls ? ['AUTH'] : ['AUTH', 'STARTTLS'];
      try {
        ehlo.call(conn, command, callback);
      } finally {
        delete conn.session.disabledCommands;
      }
    };
    const auth = conn.handler_AUTH;
    conn.handler_AUTH = (command, callback) => {
      if (needsTls(conn)) {
        // RFC 4954 §6: 538 5.7.11, encryption required for the requested mechanism.
        conn.send(538, '5.7.11 encryption required: issue STARTTLS before AUTH');
        return callback();
      }
      auth.call(conn, command, callback);
    };
    watchKey(conn, socket);
  };

  /**
   * A logged-in session whose key is revoked (API, CLI or another node), expires or turns
   * read-only ends within KEY_RECHECK_MS plus a lookup: 421 4.7.0 and the connection closed, so
   * nothing more is sent with it. A check that cannot read the database leaves the session be
   * (MAIL FROM and the end of DATA check again before anything is queued).
   */
  const watchKey = (conn: Connection, socket: Socket) => {
    let checking = false;
    const timer = setInterval(() => {
      const who = (conn.session as SubmissionSession).user;
      if (!who || checking) return;
      checking = true;
      void stillValid(who)
        .then(
          (valid) => valid || endRevoked(conn, who),
          () => undefined,
        )
        .finally(() => (checking = false));
    }, KEY_RECHECK_MS);
    timer.unref();
    socket.once('close', () => clearInterval(timer));
  };

  /** The key each logged-in session presented, for the re-checks (never logged). */
  const presented = new WeakMap<Submitter, string>();
  const stillValid = (who: Submitter) => submitterStillValid(ctx, who, presented.get(who) ?? '');
  const endRevoked = (conn: Connection, who: Submitter) => {
    ctx.log.info('submission session ended: key no longer valid', { remote: conn.remoteAddress, inboxId: who.inboxId, keyId: who.keyId });
    // smtp-server closes the connection after any 421.
    conn.send(421, `4.7.0 ${KEY_REVOKED}`);
  };

  const onAuth = (auth: SMTPServerAuthentication, session: SMTPServerSession, cb: (err: Error | null | undefined, response?: SMTPServerAuthenticationResponse) => void) => {
    const pair = loginKey(auth.username ?? '', clientKey(session.remoteAddress));
    if (failures.blocked(pair)) {
      countSubmissionAuth(ctx, 'rate_limited');
      return cb(smtpReply(454, '4.7.0', 'too many failed logins for this user from your address, try again later'));
    }
    void authenticateSubmitter(ctx, auth.username ?? '', auth.password ?? '').then(
      (who) => {
        failures.succeeded(pair);
        presented.set(who, auth.password ?? '');
        countSubmissionAuth(ctx, 'accepted');
        ctx.log.info('submission login', { session: session.id, remote: session.remoteAddress, inboxId: who.inboxId, keyId: who.keyId });
        cb(null, { user: who });
      },
      (err: unknown) => {
        if (!isAppError(err) || err.code !== 'UNAUTHORIZED') {
          // The credentials could not be checked (the database failing): a temporary answer,
          // and no failure counted, so correct credentials work as soon as it is back.
          countSubmissionAuth(ctx, 'unavailable');
          ctx.log.error('submission login not checked', { session: session.id, remote: session.remoteAddress, ...errorFields(err) });
          return cb(smtpReply(454, '4.7.0', 'authentication temporarily unavailable, try again later'));
        }
        failures.failed(pair);
        countSubmissionAuth(ctx, 'rejected');
        ctx.log.info('submission login refused', { session: session.id, remote: session.remoteAddress, method: auth.method });
        cb(smtpReply(535, '5.7.8', 'authentication credentials invalid'));
      },
    );
  };

  const onData = (stream: SMTPServerDataStream, session: SubmissionSession, callback: (err?: Error | null, message?: string) => void) => {
    // The same DATA path as the MX listener's (data-stream.ts): a large message goes to a staged
    // file as it arrives, with no trace fields (the message is rebuilt before it is sent).
    receiveData(
      ctx,
      stream,
      {
        session: session.id,
        envelope: { mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '' },
        rejected: () => countSubmission(ctx, 'rejected'),
        async take(raw, size) {
          const submit = async () => {
            // The key may have been revoked while the message came in: nothing is queued with it.
            if (!(await stillValid(session.user!))) return null;
            return submitMessage(ctx, session.user!, { raw, recipients: session.envelope.rcptTo.map((r) => r.address) });
          };
          const message = await submit().catch((err: unknown) => {
            throw refuseMessage(ctx, err, session.id, 'submission');
          });
          if (!message) throw smtpReply(421, '4.7.0', KEY_REVOKED);
          countSubmission(ctx, 'accepted');
          ctx.log.info('submission accepted', { session: session.id, inboxId: message.inboxId, messageId: message.id, size });
          // The Message and its jobs are committed: only now is the message the server's.
          // A send the outbound policy held (src/domain/sending/holds.ts) says so: the client must not send it again.
          const held = message.status === 'held' ? `, held for a person (${message.hold?.reasons.map((r) => r.code).join(', ')}): not sent until released` : '';
          return `2.0.0 OK: queued as ${message.id}${held}`;
        },
      },
      callback,
    );
  };

  const service: SubmissionService = {
    name: 'submission',
    port: 0,
    async start() {
      const address = ctx.config.submission.listen;
      if (!address) return;
      const tls = cfg.tls_cert && cfg.tls_key ? new TlsCertificate(cfg.tls_cert, cfg.tls_key, ctx.log) : undefined;
      if (!tls) ctx.log.warn('submission listens without STARTTLS (smtp.tls_cert and smtp.tls_key are not set): only loopback clients can log in');
      server = createSmtpServer(ctx, tls, {
        banner: 'mailroom submission',
        authMethods: ['PLAIN', 'LOGIN'],
        // Whether a client may log in without TLS is decided per connection (guardAuth).
        allowInsecureAuth: true,
        authRequiredMessage: '5.7.0 authentication required',
        disabledCommands: tls ? [] : ['STARTTLS'],
        maxRecipients: MAX_RECIPIENTS,
        onAuth,
        onMailFrom(address, session: SubmissionSession, cb) {
          const check = async () => {
            // A revoked key sends nothing more: 421 (smtp-server then closes the connection).
            if (!(await stillValid(session.user!))) return smtpReply(421, '4.7.0', KEY_REVOKED);
            await checkSubmissionSender(ctx, session.user!, address.address);
            return undefined;
          };
          void check().then(
            (refusal) => cb(refusal),
            // Postfix's reject_sender_login_mismatch answers the same: 553 5.7.1.
            (err: unknown) => cb((err as { code?: string }).code === 'FORBIDDEN' ? smtpReply(553, '5.7.1', (err as Error).message) : replyFor(err)),
          );
        },
        onRcptTo(address, session: SubmissionSession, cb) {
          void checkSubmissionRecipient(ctx, session.user!, address.address).then(
            () => cb(),
            (err: unknown) => cb(replyFor(err)),
          );
        },
        onData,
      });
      eachConnection(server, guardAuth(Boolean(tls)));
      server.on('error', (err) => ctx.log.error('submission server error', errorFields(err)));
      service.port = await listenSmtp(server, address);
      ctx.log.info('submission listening', { host: address.host, port: service.port, starttls: Boolean(tls) });
    },
    async stop() {
      await closeSmtp(server);
    },
  };
  return service;
}
