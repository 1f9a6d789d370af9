// Builds the RFC 5322 / MIME source of an outbound message with nodemailer's MailComposer.
// Bcc recipients are never given to the composer: they exist only in the SMTP envelope, so no
// header can ever reveal them. When only HTML is given, a text part is generated from it.
import type { Readable } from 'node:stream';

// html-to-text is loaded by the first HTML-only send, not at start-up (bench/: ~8-11 MB of
// resident memory for a module most appliances rarely need).
let htmlToText: Promise<typeof import('html-to-text')> | undefined;
// The composer by the first send too (in the single executable it travels in a chunk: see build/build.ts).
let mailComposer: Promise<typeof import('nodemailer/lib/mail-composer/index.js')> | undefined;

export interface MailAddress {
  name?: string | null;
  address: string;
}

export interface ComposeInput {
  from: MailAddress;
  to: MailAddress[];
  cc: MailAddress[];
  subject: string;
  text: string | null;
  html: string | null;
  /** With angle brackets. */
  messageId: string;
  date: Date;
  inReplyTo?: string | null;
  references?: string[];
  /** Stored bytes, streamed into the message; `cid` for an inline part the HTML names (cid: URLs). */
  attachments: Array<{ filename: string; contentType: string; content: Readable; cid?: string }>;
  /** Further header fields (List-Unsubscribe). */
  headers?: Record<string, string>;
}

/** The text alternative of an HTML body (what a text-only client shows). */
export async function textFromHtml(html: string): Promise<string> {
  const { convert } = await (htmlToText ??= import('html-to-text'));
  return convert(html, { wordwrap: 78, selectors: [{ selector: 'img', format: 'skip' }] }).trim();
}

const addr = (a: MailAddress) => (a.name ? { name: a.name, address: a.address } : a.address);

async function compose(input: ComposeInput) {
  const { default: MailComposer } = await (mailComposer ??= import('nodemailer/lib/mail-composer/index.js'));
  const composer = new MailComposer({
    from: addr(input.from),
    to: input.to.map(addr),
    cc: input.cc.length ? input.cc.map(addr) : undefined,
    subject: input.subject,
    text: input.text ?? undefined,
    html: input.html ?? undefined,
    messageId: input.messageId,
    date: input.date,
    inReplyTo: input.inReplyTo ?? undefined,
    references: input.references?.length ? input.references : undefined,
    ...(input.headers ? { headers: input.headers } : {}),
    attachments: input.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content, ...(a.cid ? { cid: a.cid } : {}) })),
    // Only the streams given above are read: no file, no URL.
    disableUrlAccess: true,
    disableFileAccess: true,
    // RFC 5322 §2.3: CRLF line endings throughout, so the stored source is byte-for-byte what
    // is signed and sent (bodies from JSON usually have bare LF).
    newline: 'windows',
  });
  return composer.compile();
}

/** The source of `input`, whole. */
export async function buildMime(input: ComposeInput): Promise<Buffer> {
  return (await compose(input)).build();
}

/** The source of `input` as a stream: attachments are read and encoded as it is consumed. */
export async function mimeStream(input: ComposeInput): Promise<Readable> {
  return (await compose(input)).createReadStream();
}
