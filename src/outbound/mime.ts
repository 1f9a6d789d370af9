// Builds the RFC 5322 / MIME source of an outbound message with nodemailer's MailComposer.
// Bcc recipients are never given to the composer: they exist only in the SMTP envelope, so no
// header can ever reveal them. When only HTML is given, a text part is generated from it.
import type { Readable } from 'node:stream';

// html-to-text is loaded by the first HTML-only send, not at start-up (bench/: ~8-11 MB of
// resident memory for a module most appliances rarely need).
let htmlToText: Promise<typeof import('html-to-text')> | undefined;
// The composer and nodemailer's encoders by the first send too (in the single executable they
// travel in a chunk: see build/build.ts).
let nodemailerParts: Promise<[typeof import('nodemailer/lib/mail-composer/index.js'), typeof import('nodemailer/lib/qp/index.js'), typeof import('nodemailer/lib/base64/index.js')]> | undefined;
const loadParts = () => (nodemailerParts ??= Promise.all([import('nodemailer/lib/mail-composer/index.js'), import('nodemailer/lib/qp/index.js'), import('nodemailer/lib/base64/index.js')]));

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

/** The MIME tree of `input` (nodemailer's MailComposer). */
export async function composeMime(input: ComposeInput) {
  const [{ default: MailComposer }] = await loadParts();
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
  const tree = await composeMime(input);
  return (await sourceInMemory(tree)) ?? tree.build();
}

/** The source of `input` as a stream: attachments are read and encoded as it is consumed. */
export async function mimeStream(input: ComposeInput): Promise<Readable> {
  return (await composeMime(input)).createReadStream();
}

type MimeTree = Awaited<ReturnType<typeof composeMime>>;

/**
 * The source of a message tree whose parts are all text held in memory (no attachment), as
 * `tree.build()` writes it: each part's header block and transfer encoding are nodemailer's,
 * its body is encoded by nodemailer's quoted-printable or base64 encoder, the parts stand
 * between their boundaries in order, then the line endings are made CRLF and the source ends
 * with one, as the `windows` newline option does. Undefined for any other tree (an attachment
 * is a stream), which build() writes. build() streams even text: a stream per part, one per
 * encoder, two pipelines and a wait for the next turn of the event loop between steps, four to
 * five times the CPU of this for a message of a few KB (test/unit/mime-source.test.ts holds
 * both to the same bytes).
 */
export async function sourceInMemory(tree: MimeTree): Promise<Buffer | undefined> {
  const [, qp, base64] = await loadParts();
  const out: Buffer[] = [];
  const write = (node: MimeTree): boolean => {
    // Sets contentType, multipart and boundary too.
    const headers = node.buildHeaders();
    const { content } = node;
    if (content !== undefined && (typeof content !== 'string' || !/^text\//i.test(node.contentType ?? ''))) return false;
    out.push(Buffer.from(`${headers}\r\n\r\n`));
    if (content) {
      const encoding = node.getTransferEncoding();
      out.push(
        encoding === 'quoted-printable'
          ? Buffer.from(qp.wrap(qp.encode(content), 76), 'latin1')
          : encoding === 'base64'
            ? Buffer.from(base64.wrap(base64.encode(content), 76), 'latin1')
            : Buffer.from(content),
      );
    }
    if (!node.multipart) return true;
    let first = true;
    for (const child of node.childNodes) {
      out.push(Buffer.from(`${first ? '' : '\r\n'}--${node.boundary}\r\n`));
      first = false;
      if (!write(child)) return false;
    }
    out.push(Buffer.from(`\r\n--${node.boundary}--\r\n`));
    return true;
  };
  if (!write(tree)) return undefined;
  // Byte for byte through latin1: a lone LF becomes CRLF (a lone CR stays), and a last CRLF is added.
  let text = Buffer.concat(out).toString('latin1');
  if (!text.endsWith('\n')) text += text.endsWith('\r') ? '\n' : '\r\n';
  return Buffer.from(text.replace(/(?<!\r)\n/g, '\r\n'), 'latin1');
}
