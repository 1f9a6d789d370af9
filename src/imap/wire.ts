// IMAP on the wire: framing commands (a line, plus the literals it announces, RFC 9051 §4.3 and
// RFC 7888 LITERAL+) within the line and literal budgets, then parsing them with imap-handler
// (docs/imap.md says why that library); and writing responses (strings quoted when they are
// short 7-bit text, else sent as literals, counted in bytes).
import type { Duplex } from 'node:stream';
import imapHandler from 'imap-handler';
import type { ImapValue } from './mime.ts';

/** A parsed command: the tag, the command name uppercase, its arguments as imap-handler gives them. */
export interface ImapCommand {
  tag: string;
  command: string;
  attributes: ImapNode[];
}

export type ImapNode = { type: string; value: string; section?: ImapNode[]; partial?: number[] } | ImapNode[] | null;

/** Why reading stopped: the peer went away, or it broke a bound (answered `* BYE` by the session). */
export class WireError extends Error {}

/** Commands whose ATOMs may carry a [section] (imap-handler's allowSection). */
const SECTION_ATOMS = ['BODY', 'BODY.PEEK', 'BINARY', 'BINARY.PEEK', 'BINARY.SIZE'];

export function parseCommand(text: string): ImapCommand {
  const parsed = imapHandler.parser(text, { literalPlus: true, allowSection: SECTION_ATOMS }) as { tag: string; command: string; attributes?: ImapNode[] };
  // It reads "UID FETCH" and "AUTHENTICATE PLAIN" as one command name: the second word is an argument here.
  const [command, sub] = String(parsed.command ?? '')
    .toUpperCase()
    .split(' ');
  const attributes = parsed.attributes ?? [];
  return { tag: parsed.tag, command, attributes: sub ? [{ type: 'ATOM', value: sub }, ...attributes] : attributes };
}

/** The tag of a command line that did not parse, for its BAD answer ("*" when there is none). */
export function tagOf(text: string): string {
  const m = /^([^\s(){%*"\\\]]+)\s/.exec(text);
  return m ? m[1] : '*';
}

export interface Limits {
  maxLine: number;
  maxLiteral: number;
}

/**
 * Reads whole commands from a socket, one at a time on demand: while nobody asks for the next
 * command the socket is paused, so a client pipelining commands is held by TCP, not by our memory.
 * A command is latin1 text (one char per byte) with its literals inline, as imap-handler wants it.
 */
export class CommandReader {
  private buf: Buffer = Buffer.alloc(0);
  private command = '';
  private literalLeft = 0;
  private literalParts: string[] = [];
  private ready: string[] = [];
  private waiter?: { resolve: (v: string | null) => void; reject: (e: Error) => void };
  private ended = false;
  private failure?: WireError;
  private source?: Duplex;
  private readonly onData = (chunk: Buffer) => this.feed(chunk);
  private readonly onEnd = () => this.finish();

  private readonly limits: Limits;
  /** Says something to the client while a command comes in (`+` continuation, NO [TOOBIG]). */
  private readonly say: (line: string) => void;

  constructor(limits: Limits, say: (line: string) => void) {
    this.limits = limits;
    this.say = say;
  }

  /** Reads from `source` from now on (a new socket after STARTTLS); what was buffered is dropped (RFC 9051 §6.2.1). */
  attach(source: Duplex): void {
    this.source?.off('data', this.onData).off('end', this.onEnd).off('close', this.onEnd);
    this.buf = Buffer.alloc(0);
    this.command = '';
    this.literalLeft = 0;
    this.literalParts = [];
    this.ready = [];
    this.source = source;
    source.on('data', this.onData).on('end', this.onEnd).on('close', this.onEnd);
    if (!this.waiter) source.pause();
  }

  /** The next whole command (or line, for IDLE's DONE and AUTHENTICATE's answer); null at the end. */
  next(): Promise<string | null> {
    if (this.failure) return Promise.reject(this.failure);
    const line = this.ready.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (this.ended) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      this.source?.resume();
    });
  }

  private deliver(line: string): void {
    const w = this.waiter;
    if (w) {
      this.waiter = undefined;
      w.resolve(line);
    } else this.ready.push(line);
    if (!this.waiter) this.source?.pause();
  }

  private fail(err: WireError): void {
    this.failure = err;
    this.source?.pause();
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(err);
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    const w = this.waiter;
    this.waiter = undefined;
    w?.resolve(null);
  }

  private feed(chunk: Buffer): void {
    if (this.failure) return;
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    while (this.buf.length && !this.failure) {
      if (this.literalLeft > 0) {
        const take = Math.min(this.literalLeft, this.buf.length);
        this.literalParts.push(this.buf.subarray(0, take).toString('latin1'));
        this.literalLeft -= take;
        this.buf = this.buf.subarray(take);
        if (this.literalLeft === 0) {
          this.command += this.literalParts.join('');
          this.literalParts = [];
        }
        continue;
      }
      const nl = this.buf.indexOf(10);
      if (nl === -1) {
        if (this.buf.length > this.limits.maxLine) this.fail(new WireError('command line too long'));
        return;
      }
      if (nl > this.limits.maxLine) return this.fail(new WireError('command line too long'));
      const line = this.buf.subarray(0, nl > 0 && this.buf[nl - 1] === 13 ? nl - 1 : nl).toString('latin1');
      this.buf = this.buf.subarray(nl + 1);
      const literal = /\{(\d{1,20})(\+?)\}$/.exec(line);
      if (!literal) {
        const whole = this.command + line;
        this.command = '';
        this.deliver(whole);
        continue;
      }
      const size = Number(literal[1]);
      const tag = tagOf(this.command + line);
      if (size > this.limits.maxLiteral) {
        // A non-synchronizing literal is on its way already: nothing but closing stops it (RFC 7888 §4).
        if (literal[2]) return this.fail(new WireError(`literal of ${size} bytes is over the ${this.limits.maxLiteral} byte limit`));
        this.command = '';
        this.say(`${tag} NO [TOOBIG] literal of ${size} bytes is over the ${this.limits.maxLiteral} byte limit\r\n`);
        continue;
      }
      if (this.command.length + line.length > this.limits.maxLiteral + this.limits.maxLine) return this.fail(new WireError('command too long'));
      this.command += line + '\r\n';
      this.literalLeft = size;
      if (!literal[2]) this.say('+ go ahead\r\n');
      if (size === 0) continue;
    }
  }
}

/** A value as IMAP writes it (RFC 9051 §4): NIL, a number, an atom, a quoted string or a literal, a list. */
export function encode(value: ImapValue, out: Buffer[] = []): Buffer[] {
  if (value === null) out.push(Buffer.from('NIL'));
  else if (typeof value === 'number') out.push(Buffer.from(String(value)));
  else if (Array.isArray(value)) {
    out.push(Buffer.from('('));
    value.forEach((v, i) => {
      if (i) out.push(Buffer.from(' '));
      encode(v, out);
    });
    out.push(Buffer.from(')'));
  } else if (typeof value === 'object' && !Buffer.isBuffer(value)) out.push(Buffer.from(value.atom));
  else {
    const bytes = Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8');
    if (bytes.length < 1024 && isQuotable(bytes)) out.push(Buffer.from(`"${bytes.toString('latin1').replace(/(["\\])/g, '\\$1')}"`, 'latin1'));
    // literal8 (RFC 3516) for what holds NUL: only BINARY[] can.
    else out.push(Buffer.from(`${bytes.includes(0) ? '~' : ''}{${bytes.length}}\r\n`), bytes);
  }
  return out;
}

/** 7-bit text without CR, LF or NUL goes quoted; the rest as a literal. */
function isQuotable(bytes: Buffer): boolean {
  for (const b of bytes) if (b < 0x20 || b > 0x7e) return false;
  return true;
}

/** An atom, written as is. */
export const atom = (text: string): { atom: string } => ({ atom: text });

/** Text a client sent as latin1 (one char per byte), read as the UTF-8 it was. */
export const utf8 = (latin1: string): string => Buffer.from(latin1, 'latin1').toString('utf8');
