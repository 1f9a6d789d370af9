// A minimal line-level SMTP client for tests that must send exact bytes or exact commands
// (malformed MIME, relay tricks, limits) which nodemailer would normalise or refuse to send.
import { connect, type Socket } from 'node:net';

export interface SmtpReply {
  code: number;
  text: string;
}

export class SmtpClient {
  private buf = '';
  private waiters: Array<(r: SmtpReply) => void> = [];
  private replies: SmtpReply[] = [];
  closed: Promise<void>;

  readonly socket: Socket;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      this.buf += d;
      let m: RegExpExecArray | null;
      // A reply ends with a line "NNN text" (a space after the code, RFC 5321 §4.2.1).
      while ((m = /^((?:\d{3}-[^\r\n]*\r?\n)*)(\d{3})(?: ([^\r\n]*))?\r?\n/.exec(this.buf))) {
        this.buf = this.buf.slice(m[0].length);
        const reply = { code: Number(m[2]), text: (m[1] + (m[3] ?? '')).replace(/\d{3}-/g, '').trim() };
        const w = this.waiters.shift();
        if (w) w(reply);
        else this.replies.push(reply);
      }
    });
    socket.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      socket.on('close', () => {
        // A reply that will never come reads as code 0, so a test fails instead of hanging.
        for (const w of this.waiters.splice(0)) w({ code: 0, text: 'connection closed' });
        resolve();
      }),
    );
  }

  static async open(port: number, host = '127.0.0.1'): Promise<{ client: SmtpClient; greeting: SmtpReply }> {
    const socket = connect(port, host);
    const client = new SmtpClient(socket);
    const greeting = await client.read();
    return { client, greeting };
  }

  read(): Promise<SmtpReply> {
    const r = this.replies.shift();
    if (r) return Promise.resolve(r);
    if (this.socket.destroyed) return Promise.resolve({ code: 0, text: 'connection closed' });
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  async cmd(line: string): Promise<SmtpReply> {
    this.socket.write(line + '\r\n');
    return this.read();
  }

  /** DATA with the body dot-stuffed (RFC 5321 §4.5.2) and terminated; returns the final reply. */
  async data(body: Buffer): Promise<SmtpReply> {
    const go = await this.cmd('DATA');
    if (go.code !== 354) return go;
    const text = body.toString('latin1').replace(/(^|\r?\n)\./g, '$1..');
    // The terminator is CRLF.CRLF: a body ending in a bare LF still needs its CRLF.
    const end = text.endsWith('\r\n') ? '.\r\n' : '\r\n.\r\n';
    this.socket.write(Buffer.from(text + end, 'latin1'));
    return this.read();
  }

  /** MAIL, RCPTs and DATA in one go. */
  async send(from: string, to: string[], body: Buffer): Promise<SmtpReply> {
    const mail = await this.cmd(`MAIL FROM:<${from}>`);
    if (mail.code !== 250) return mail;
    for (const rcpt of to) {
      const r = await this.cmd(`RCPT TO:<${rcpt}>`);
      if (r.code !== 250) {
        await this.cmd('RSET');
        return r;
      }
    }
    return this.data(body);
  }

  async quit(): Promise<void> {
    this.socket.write('QUIT\r\n');
    this.socket.end();
    await this.closed;
  }
}
