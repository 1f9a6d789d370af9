// What the two SMTP listeners (inbound.ts on port 25, submission.ts on 587) share: the server
// with its session limits, STARTTLS certificate and replies written after a client half-closes;
// binding; stopping.
import type { AddressInfo, Socket } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import type { ListenAddress } from '../config.ts';
import type { AppContext } from '../context.ts';
import { countSmtpSession } from '../metrics.ts';
import { smtpReply } from './replies.ts';
import { connectionsOf, limitSessions } from './session-limits.ts';
import type { TlsCertificate } from './tls.ts';

/**
 * RFC 5321 §4.1.1.4 and §4.1.1.10: every command gets its reply, QUIT gets 221, and the server
 * closes only after replying. Exim pipelines the final "." with QUIT and half-closes its side at
 * once. Node's default (allowHalfOpen false) then ended our side too, and smtp-server writes a
 * reply only while `readyState` is 'open', so the 250 for the data was never written: Exim
 * deferred and redelivered, and every message was stored twice. The listener runs with
 * allowHalfOpen, and each socket (the TCP one, and the TLS one after STARTTLS) reports 'open'
 * for as long as our side can still be written. QUIT (or the idle timeout, for a client that
 * half-closes without QUIT) closes it once the replies are written.
 */
export function answerAfterHalfClose(socket: Socket): void {
  Object.defineProperty(socket, 'readyState', {
    configurable: true,
    get: () => (socket.destroyed ? 'closed' : socket.writable ? 'open' : 'readOnly'),
  });
}

/**
 * smtp-server builds a TLS context in its constructor, with a certificate of its own when given
 * none, and with it loads Node's tls module and its store of root certificates: 2.6 MB of an
 * idle server's RSS (docs/performance.md, "Idle memory"). Without tls_cert and tls_key both
 * listeners disable STARTTLS, so that context would never serve: this server builds none.
 */
class SMTPServerWithoutTls extends SMTPServer {
  override updateSecureContext(): void {
    this.secureContext = new Map();
  }
}

/**
 * An smtp-server with what both listeners use (the smtp.* limits, STARTTLS with `tls` when
 * given, the per-address connection limit and the rest of session-limits.ts), plus `options`.
 */
export function createSmtpServer(ctx: AppContext, tls: TlsCertificate | undefined, options: SMTPServerOptions): SMTPServer {
  const cfg = ctx.config.smtp;
  const server: SMTPServer = new (tls ? SMTPServer : SMTPServerWithoutTls)({
    name: ctx.config.hostname,
    allowHalfOpen: true,
    size: cfg.max_message_bytes,
    ...(tls ? { key: tls.current.key, cert: tls.current.cert } : {}),
    maxClients: cfg.max_connections,
    socketTimeout: cfg.idle_timeout,
    closeTimeout: ctx.config.http.shutdown_grace,
    logger: false,
    onConnect(session, cb) {
      if (limits.overPerIpLimit(session.remoteAddress)) return cb(smtpReply(421, '4.7.0', 'too many connections from your address, try again later'));
      countSmtpSession(ctx);
      tls?.refresh(server);
      cb();
    },
    onSecure(socket, _session, cb) {
      answerAfterHalfClose(socket as Socket);
      cb();
    },
    ...options,
    ...(options.onData && { onData: receiving(options.onData) }),
  });
  const limits = limitSessions(ctx, server);
  return server;
}

/** Binds `server` to `address` and returns the port bound (port 0 picks one). */
export async function listenSmtp(server: SMTPServer, address: ListenAddress): Promise<number> {
  server.server.on('connection', answerAfterHalfClose);
  await new Promise<void>((resolve, reject) => {
    const s = server.server;
    s.once('error', reject);
    server.listen(address.port, address.host, () => {
      s.off('error', reject);
      resolve();
    });
  });
  return (server.server.address() as AddressInfo).port;
}

/** Sessions from their DATA command until the reply to it is decided (receiving.onData). */
const inTransaction = new WeakSet<object>();

/** `onData` that marks its session as in a transaction until it answers. */
function receiving(onData: NonNullable<SMTPServerOptions['onData']>): NonNullable<SMTPServerOptions['onData']> {
  return (stream, session, callback) => {
    inTransaction.add(session);
    onData(stream, session, (err, message) => {
      inTransaction.delete(session);
      callback(err, message);
    });
  };
}

/**
 * Stops accepting; a session between transactions is told 421 and closed at once, as Postfix's
 * smtpd does when it is stopped, so an idle client does not hold the shutdown for the whole
 * grace period; a message being received or stored gets until smtp-server's closeTimeout
 * (http.shutdown_grace) to be answered, after which it is cut with a 421 too.
 */
export function closeSmtp(server: SMTPServer | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const conn of connectionsOf(server)) {
    if (inTransaction.has(conn.session)) continue;
    conn.send(421, '4.3.2 service shutting down, try again later');
    conn.close();
  }
  return closed;
}
