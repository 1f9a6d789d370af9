// The IMAP listeners (`[imap] listen` with STARTTLS, `[imap] tls_listen` with implicit TLS; both
// off by default): the certificate of the SMTP listeners (smtp.tls_cert, smtp.tls_key, reloaded
// when renewed), the connection limits (in all, per client address, logged-in sessions per
// account), and BYE to every session at shutdown. Sessions live in ./session.ts.
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type SecureContext, type TLSSocket } from 'node:tls';
import type { ListenAddress } from '../config.ts';
import type { AppContext, Service } from '../context.ts';
import { clientKey, OpenPerClient } from '../client-address.ts';
import { errorFields } from '../log.ts';
import { AuthFailures } from '../smtp/auth-failures.ts';
import { KEY_RECHECK_MS } from '../smtp/submission.ts';
import { TlsCertificate } from '../smtp/tls.ts';
import { contextOf, ImapSession, type SessionHost } from './session.ts';
import { asApiWork } from '../store/store.ts';

export interface ImapService extends Service {
  /** The ports bound (0 when off or before start). */
  port: number;
  tlsPort: number;
}

export function createImapService(ctx: AppContext): ImapService {
  const cfg = ctx.config.imap;
  const servers: Server[] = [];
  const perClient = new OpenPerClient();
  const perAccount = new OpenPerClient();
  let open = 0;
  let cert: TlsCertificate | undefined;
  let context: SecureContext | undefined;

  /** The current context, rebuilt when the certificate files changed. */
  const tlsContext = (): SecureContext | undefined => {
    if (!cert) return undefined;
    const renewed = cert.reloadIfChanged();
    if (renewed || !context) {
      try {
        context = contextOf(renewed ?? cert.current);
      } catch (err) {
        ctx.log.warn('imap tls certificate rejected; keeping the previous one', errorFields(err));
      }
    }
    return context;
  };

  const host: SessionHost = {
    ctx,
    tlsContext,
    failures: new AuthFailures(ctx.clock),
    takeAccountSlot(accountId) {
      if (perAccount.count(accountId) >= cfg.connections_per_account) return false;
      perAccount.add(accountId);
      return true;
    },
    releaseAccountSlot: (accountId) => perAccount.remove(accountId),
    sessions: new Set(),
    keyRecheckMs: KEY_RECHECK_MS,
  };

  const accept = (socket: Socket, secure: boolean) => {
    const who = clientKey(socket.remoteAddress);
    socket.on('error', () => socket.destroy());
    if (open >= cfg.max_connections || perClient.count(who) >= cfg.max_connections_per_ip) {
      socket.end('* BYE too many connections, try again later\r\n');
      return;
    }
    open++;
    perClient.add(who);
    socket.once('close', () => {
      open--;
      perClient.remove(who);
    });
    const session = new ImapSession(host, socket, { secure, remoteAddress: socket.remoteAddress });
    // API work: on PostgreSQL the session's statements use the API's connections (asApiWork).
    void asApiWork(() => session.run());
  };

  const listen = async (server: Server, address: ListenAddress): Promise<number> => {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(address.port, address.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => ctx.log.error('imap server error', errorFields(err)));
    servers.push(server);
    return (server.address() as AddressInfo).port;
  };

  const service: ImapService = {
    name: 'imap',
    port: 0,
    tlsPort: 0,
    async start() {
      if (!cfg.listen && !cfg.tls_listen) return;
      const smtp = ctx.config.smtp;
      if (smtp.tls_cert && smtp.tls_key) cert = new TlsCertificate(smtp.tls_cert, smtp.tls_key, ctx.log);
      if (cfg.listen) {
        service.port = await listen(
          createServer((socket) => accept(socket, false)),
          cfg.listen,
        );
        if (!cert) ctx.log.warn('imap listens without STARTTLS (smtp.tls_cert and smtp.tls_key are not set): only loopback clients can log in');
        ctx.log.info('imap listening', { host: cfg.listen.host, port: service.port, starttls: Boolean(cert) });
      }
      if (cfg.tls_listen) {
        if (!cert) throw new Error('imap.tls_listen needs smtp.tls_cert and smtp.tls_key');
        const server = createTlsServer({ key: cert.current.key, cert: cert.current.cert, SNICallback: (_name, cb) => cb(null, tlsContext()) }, (socket: TLSSocket) => accept(socket, true));
        server.on('tlsClientError', () => undefined);
        service.tlsPort = await listen(server, cfg.tls_listen);
        ctx.log.info('imap listening with implicit TLS', { host: cfg.tls_listen.host, port: service.tlsPort });
      }
    },
    async stop() {
      const closed = servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())));
      for (const session of [...host.sessions]) session.bye('server shutting down');
      await Promise.all(closed);
    },
  };
  return service;
}
