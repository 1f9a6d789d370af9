// Limits that keep one SMTP client from holding the listener (docs/security.md): connections
// per client address, an absolute session lifetime, and a cap on commands that do not advance
// a transaction (NOOP, RSET, VRFY, HELP: a client sending NOOP every few seconds never hits the
// idle timeout). smtp-server offers only a total connection cap, so this wraps the connection
// objects it creates: `connect` (its entry point per accepted socket) and their command
// handlers, which it looks up by name on the connection (eachConnection).
import type { Socket } from 'node:net';
import type { SMTPServer } from 'smtp-server';
import type { AppContext } from '../context.ts';
import { countSmtpLimited } from '../metrics.ts';
import { clientKey, OpenPerClient } from '../client-address.ts';

export { clientKey };

/** The parts of smtp-server's SMTPConnection used here and in submission.ts. */
export interface Connection {
  send(code: number, text: string): void;
  close(): void;
  secure: boolean;
  remoteAddress: string;
  session: { disabledCommands?: string[] };
  [handler: `handler_${string}`]: (command: Buffer, callback: () => void) => void;
}

/** The connections smtp-server has open (its own set, in the order they came). */
export const connectionsOf = (server: SMTPServer): Set<Connection> => (server as unknown as { connections: Set<Connection> }).connections;

/**
 * Calls `fn` with each connection smtp-server creates, right after it is created (before its
 * greeting): `connect` is its entry point per accepted socket, and the connection's command
 * handlers, which it looks up by name, can be wrapped there.
 */
export function eachConnection(server: SMTPServer, fn: (conn: Connection, socket: Socket) => void): void {
  const internals = server as unknown as { connect(socket: Socket, options: unknown): void };
  const connect = internals.connect.bind(server);
  internals.connect = (socket, options) => {
    connect(socket, options);
    let conn: Connection | undefined;
    for (const c of connectionsOf(server)) conn = c; // the one just added (a Set keeps insertion order)
    if (conn) fn(conn, socket);
  };
}

const JUNK = ['NOOP', 'RSET', 'VRFY', 'HELP'] as const;

export interface SessionLimits {
  /** True when this client address has more connections open than allowed (the current one counted). */
  overPerIpLimit(address: string | undefined): boolean;
}

export function limitSessions(ctx: AppContext, server: SMTPServer): SessionLimits {
  const cfg = ctx.config.smtp;
  const open = new OpenPerClient();
  const refuse = (conn: Connection, reason: 'session_time' | 'junk_commands', text: string) => {
    countSmtpLimited(ctx, reason);
    conn.send(421, text);
    conn.close();
  };

  eachConnection(server, (conn, socket) => {
    const key = clientKey(socket.remoteAddress);
    open.add(key);
    const lifetime = setTimeout(() => refuse(conn, 'session_time', '4.4.2 session time limit reached, closing'), cfg.max_session_time);
    lifetime.unref();
    socket.once('close', () => {
      clearTimeout(lifetime);
      open.remove(key);
    });

    let junk = 0;
    for (const name of JUNK) {
      const handler = conn[`handler_${name}`];
      conn[`handler_${name}`] = (command, callback) => {
        if (++junk > cfg.max_junk_commands) return refuse(conn, 'junk_commands', '4.7.0 too many commands without mail, closing');
        handler.call(conn, command, callback);
      };
    }
    const mail = conn.handler_MAIL;
    conn.handler_MAIL = (command, callback) => {
      junk = 0;
      mail.call(conn, command, callback);
    };
  });

  return {
    overPerIpLimit(address) {
      const over = open.count(clientKey(address)) > cfg.max_connections_per_ip;
      if (over) countSmtpLimited(ctx, 'per_ip');
      return over;
    },
  };
}
