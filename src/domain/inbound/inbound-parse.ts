// What is read from a received message before anything is stored: mailparser's parse (loaded
// on first use), what is kept when it fails, and the trace fields the receiving server adds.
// Shared by the small-message path (src/domain/inbound/inbound.ts) and the large one (inbound-large.ts).
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import type { InboundInput } from './inbound.ts';

// mailparser is loaded by the first inbound message, not at start-up (bench/: ~20 MB of
// resident memory and ~0.3 s of start time an idle appliance does not need).
let mailparser: Promise<typeof import('mailparser')> | undefined;
export const loadMailparser = () => (mailparser ??= import('mailparser'));

/** Parses with mailparser; a parser failure still yields a message built from what can be read. */
export async function parseMessage(raw: Buffer): Promise<ParsedMail> {
  const { simpleParser } = await loadMailparser();
  try {
    return await simpleParser(raw, { skipTextToHtml: true, skipImageLinks: true, keepCidLinks: true, skipHtmlToText: false });
  } catch {
    return unparsedMessage(raw);
  }
}

/**
 * A decoded header value (subject, display name) as one line of text. RFC 2047 encoded words
 * can carry any byte once decoded (`=?UTF-8?B?...?=` with CR LF inside), and a value stored
 * with them would split a header or a log line wherever it is written again: each run of
 * control characters (C0, DEL, C1, U+2028/2029; NUL included) becomes one space.
 */
export const headerText = (s: string): string => s.replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029]+/g, ' ');

/** What is kept of a message mailparser fails on: the raw bytes, and the subject if the header block shows one. */
export function unparsedMessage(raw: Buffer): ParsedMail {
  const head = raw.subarray(0, 65_536).toString('latin1');
  const subject = /^subject:[ \t]*(.*(?:\r?\n[ \t].*)*)/im
    .exec(head)?.[1]
    ?.replace(/\r?\n[ \t]+/g, ' ')
    .trim();
  return { attachments: [], headers: new Map(), headerLines: [], html: false, subject, text: undefined } as unknown as ParsedMail;
}

/**
 * Trace fields for a message that arrived over SMTP (RFC 5321 §4.4: the receiving server MUST
 * add a Received line, and the delivering one a Return-Path). Local deliveries carry none.
 */
export function traceHeaders(ctx: AppContext, input: Pick<InboundInput, 'mailFrom' | 'remoteAddress' | 'heloName' | 'secure'>, id: string, at: Date): Buffer {
  if (!input.remoteAddress) return Buffer.alloc(0);
  // Controls, spaces and angle brackets cannot be in these fields; UTF-8 (RFC 6531) can.
  const clean = (v: string) => v.replace(/[\x00-\x20\x7f<>]/g, '').slice(0, 255);
  const ip = input.remoteAddress.replace(/^::ffff:/, '');
  const date = at.toUTCString().replace(/GMT$/, '+0000');
  const proto = input.secure ? 'ESMTPS' : 'ESMTP';
  return Buffer.from(
    `Return-Path: <${clean(input.mailFrom)}>\r\n` +
      `Received: from ${clean(input.heloName || 'unknown')} ([${clean(ip)}])\r\n\tby ${ctx.config.hostname} (mailroom) with ${proto} id ${id};\r\n\t${date}\r\n`,
  );
}
