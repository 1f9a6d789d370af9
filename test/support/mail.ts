// Sending test mail to the server's SMTP listener with nodemailer, the way a remote MTA would:
// plain SMTP on loopback, one pooled connection (smtp-server waits 100 ms before greeting each
// new connection, so tests reuse one).
import nodemailer, { type SendMailOptions, type Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';

/** A transport to 127.0.0.1:`port`; close it when done. */
export function smtpTransport(port: number): Transporter<SMTPTransport.SentMessageInfo> {
  return nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, pool: true, maxConnections: 1 });
}

/** Delivers one message and returns the message id of its 250 reply ("stored as msg_…"). */
export async function deliverMail(port: number, mail: SendMailOptions): Promise<string> {
  const transport = smtpTransport(port);
  try {
    const info = await transport.sendMail(mail);
    const id = /stored as (\S+)/.exec(info.response ?? '')?.[1];
    if (!id) throw new Error(`no stored message id in the reply: ${info.response}`);
    return id;
  } finally {
    transport.close();
  }
}
