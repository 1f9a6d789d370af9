// The MIME structure of a stored source, as IMAP FETCH shows it (RFC 9051 §7.5.2): ENVELOPE,
// BODYSTRUCTURE and the bytes of BODY[section]. Parts are views into the source (no copies);
// hostile nesting stops at MAX_DEPTH and MAX_PARTS (deeper parts read as plain text).
import addressparser from 'nodemailer/lib/addressparser';

/** Deeper multiparts than this are shown as one opaque part (a hostile message cannot recurse us away). */
const MAX_DEPTH = 32;
/** Parts of one multipart shown at most; the rest are left out of BODYSTRUCTURE. */
const MAX_PARTS = 1000;

export interface MimeNode {
  /** The whole part: header and body. */
  whole: Buffer;
  header: Buffer;
  body: Buffer;
  fields: Array<[name: string, value: string]>;
  type: string;
  subtype: string;
  params: Array<[string, string]>;
  children: MimeNode[];
  /** message/rfc822: the message inside. */
  inner?: MimeNode;
}

/** Splits a part into header and body at the first empty line. */
function splitPart(buf: Buffer): { header: Buffer; body: Buffer } {
  let i = 0;
  for (;;) {
    const nl = buf.indexOf(10, i);
    if (nl === -1) return { header: buf, body: buf.subarray(buf.length) };
    // An empty line: "\n" right after the previous line end (or "\r\n").
    const line = buf.subarray(i, nl);
    if (line.length === 0 || (line.length === 1 && line[0] === 13)) return { header: buf.subarray(0, nl + 1), body: buf.subarray(nl + 1) };
    if (i === 0 && nl === 0) return { header: buf.subarray(0, 1), body: buf.subarray(1) };
    i = nl + 1;
  }
}

/** Header fields, unfolded, names lowercase, values as UTF-8 text (encoded words stay encoded). */
function parseFields(header: Buffer): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const line of header.toString('utf8').split(/\r?\n/)) {
    if (/^[ \t]/.test(line) && out.length) out[out.length - 1][1] += ' ' + line.trim();
    else {
      const colon = line.indexOf(':');
      if (colon > 0) out.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]);
    }
  }
  return out;
}

const field = (node: { fields: Array<[string, string]> }, name: string): string | undefined => node.fields.find((f) => f[0] === name)?.[1];

/** `value; a=b; c="d"` → value and parameters (names lowercase). */
export function parseStructured(text: string): { value: string; params: Array<[string, string]> } {
  const parts: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') quoted = !quoted;
    if (c === '\\' && quoted && i + 1 < text.length) {
      cur += c + text[++i];
      continue;
    }
    if (c === ';' && !quoted) {
      parts.push(cur);
      cur = '';
    } else cur += c;
  }
  parts.push(cur);
  const params: Array<[string, string]> = [];
  for (const p of parts.slice(1)) {
    const eq = p.indexOf('=');
    if (eq <= 0) continue;
    let v = p.slice(eq + 1).trim();
    if (v.startsWith('"') && v.endsWith('"') && v.length >= 2) v = v.slice(1, -1).replace(/\\(.)/g, '$1');
    params.push([p.slice(0, eq).trim().toLowerCase(), v]);
  }
  return { value: parts[0].trim(), params };
}

/** The MIME tree of `buf`; `digest` parts default to message/rfc822 (RFC 2046 §5.1.5). */
export function parseMime(buf: Buffer, depth = 0, digest = false): MimeNode {
  const { header, body } = splitPart(buf);
  const fields = parseFields(header);
  const ct = parseStructured(field({ fields }, 'content-type') ?? (digest ? 'message/rfc822' : 'text/plain'));
  let [type, subtype] = ct.value.toLowerCase().split('/');
  if (!type || !subtype) [type, subtype] = ['text', 'plain'];
  const params = ct.params.length || type !== 'text' ? ct.params : [['charset', 'us-ascii'] as [string, string]];
  const node: MimeNode = { whole: buf, header, body, fields, type, subtype, params, children: [] };
  if (depth >= MAX_DEPTH) return node;
  if (type === 'multipart') {
    const boundary = params.find((p) => p[0] === 'boundary')?.[1];
    if (boundary) node.children = splitMultipart(body, boundary).map((p) => parseMime(p, depth + 1, subtype === 'digest'));
    if (!node.children.length) node.children = [parseMime(Buffer.alloc(0), depth + 1)];
  } else if (type === 'message' && subtype === 'rfc822') {
    node.inner = parseMime(body, depth + 1);
  }
  return node;
}

/** The parts between the delimiter lines of `--boundary` (the CRLF before each delimiter belongs to it). */
function splitMultipart(body: Buffer, boundary: string): Buffer[] {
  const delim = Buffer.from(`--${boundary}`);
  const starts: Array<{ lineStart: number; after: number; close: boolean }> = [];
  let i = 0;
  while (starts.length <= MAX_PARTS) {
    const at = body.indexOf(delim, i);
    if (at === -1) break;
    const atLineStart = at === 0 || body[at - 1] === 10;
    const next = at + delim.length;
    if (atLineStart) {
      const close = body[next] === 45 && body[next + 1] === 45;
      const nl = body.indexOf(10, next);
      const lineStart = at === 0 ? 0 : at - (at >= 2 && body[at - 2] === 13 ? 2 : 1);
      starts.push({ lineStart, after: nl === -1 ? body.length : nl + 1, close });
      if (close) break;
    }
    i = next;
  }
  const parts: Buffer[] = [];
  for (let k = 0; k + 1 < starts.length || (k < starts.length && !starts[k].close); k++) {
    if (starts[k].close) break;
    const end = k + 1 < starts.length ? starts[k + 1].lineStart : body.length;
    parts.push(body.subarray(starts[k].after, Math.max(starts[k].after, end)));
  }
  return parts;
}

/** An IMAP value: a string, a number, NIL (null), a list, or an atom (already IMAP text). */
export type ImapValue = string | Buffer | number | null | ImapValue[] | { atom: string };

const nstring = (v: string | undefined): string | null => (v === undefined || v === '' ? null : v);

function addresses(text: string | undefined): ImapValue {
  if (!text) return null;
  const out: ImapValue[] = [];
  const walk = (list: ReturnType<typeof addressparser>) => {
    for (const a of list) {
      if ('group' in a && a.group) {
        out.push([null, null, nstring(a.name) ?? '', null]);
        walk(a.group);
        out.push([null, null, null, null]);
      } else if ('address' in a) {
        const address = a.address ?? '';
        const at = address.lastIndexOf('@');
        out.push([nstring(a.name), null, at === -1 ? address : address.slice(0, at), at === -1 ? null : address.slice(at + 1)]);
      }
    }
  };
  walk(addressparser(text));
  return out.length ? out : null;
}

/** ENVELOPE (RFC 9051 §7.5.2): sender and reply-to default to from. */
export function envelopeOf(node: MimeNode): ImapValue[] {
  const from = addresses(field(node, 'from'));
  const sender = addresses(field(node, 'sender')) ?? from;
  const replyTo = addresses(field(node, 'reply-to')) ?? from;
  return [
    nstring(field(node, 'date')),
    nstring(field(node, 'subject')),
    from,
    sender,
    replyTo,
    addresses(field(node, 'to')),
    addresses(field(node, 'cc')),
    addresses(field(node, 'bcc')),
    nstring(field(node, 'in-reply-to')),
    nstring(field(node, 'message-id')),
  ];
}

const paramList = (params: Array<[string, string]>): ImapValue => (params.length ? params.flat() : null);
const feeds = (buf: Buffer): number => {
  let n = 0;
  for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) n++;
  return n;
};
/** Lines of a part's body: its line feeds, and a last line without one. */
const lines = (node: MimeNode): number => {
  const last = node.body.length && node.body[node.body.length - 1] !== 10 ? 1 : 0;
  return feedsOfBody(node) + last;
};

/**
 * Line feeds of a part's body, each part's counted once: a message/rfc822 body is the message
 * inside, a multipart's body its parts (views of it, in order) and what lies between them.
 * Counting each level's body anew was depth × size (31 nested messages over 8 MB of line feeds: 6 s).
 */
const feedsMemo = new WeakMap<MimeNode, number>();
function feedsOfBody(node: MimeNode): number {
  let n = feedsMemo.get(node);
  if (n !== undefined) return n;
  if (node.inner) n = feeds(node.inner.header) + feedsOfBody(node.inner);
  else if (node.type === 'multipart') {
    n = 0;
    let at = 0;
    for (const child of node.children) {
      // The stand-in part of a multipart without parts is no view of the body.
      if (!child.whole.length) continue;
      const start = child.whole.byteOffset - node.body.byteOffset;
      n += feeds(node.body.subarray(at, start)) + feeds(child.header) + feedsOfBody(child);
      at = start + child.whole.length;
    }
    n += feeds(node.body.subarray(at));
  } else n = feeds(node.body);
  feedsMemo.set(node, n);
  return n;
}

function disposition(node: MimeNode): ImapValue {
  const d = field(node, 'content-disposition');
  if (!d) return null;
  const parsed = parseStructured(d);
  return [parsed.value.toLowerCase(), paramList(parsed.params)];
}

/** BODYSTRUCTURE (`extended`) or BODY: the part's type, parameters, size, and its parts. */
export function bodyStructureOf(node: MimeNode, extended: boolean): ImapValue[] {
  if (node.type === 'multipart') {
    const list: ImapValue[] = node.children.map((c) => bodyStructureOf(c, extended));
    list.push(node.subtype);
    if (extended) list.push(paramList(node.params), disposition(node), nstring(field(node, 'content-language')), nstring(field(node, 'content-location')));
    return list;
  }
  const basic: ImapValue[] = [
    node.type,
    node.subtype,
    paramList(node.params),
    nstring(field(node, 'content-id')),
    nstring(field(node, 'content-description')),
    (field(node, 'content-transfer-encoding') ?? '7bit').toLowerCase(),
    node.body.length,
  ];
  if (node.inner) basic.push(envelopeOf(node.inner), bodyStructureOf(node.inner, extended), lines(node));
  else if (node.type === 'text') basic.push(lines(node));
  if (extended) basic.push(nstring(field(node, 'content-md5')), disposition(node), nstring(field(node, 'content-language')), nstring(field(node, 'content-location')));
  return basic;
}

/** The node at part path `path` ("1.2"), or undefined. A non-multipart message's part 1 is its body. */
function nodeAt(root: MimeNode, path: number[]): MimeNode | undefined {
  let node: MimeNode | undefined = root;
  for (const n of path) {
    if (!node) return undefined;
    // Inside a message/rfc822 part, numbering continues in the message it holds.
    const container: MimeNode = node.inner && node !== root ? node.inner : node;
    if (container.type === 'multipart') node = container.children[n - 1];
    else node = n === 1 ? container : undefined;
  }
  return node;
}

/**
 * The bytes of BODY[`section`] (the section text as the client wrote it, uppercase), or undefined
 * when the message has no such part (RFC 9051: an empty string then).
 */
export function sectionOf(root: MimeNode, section: string, headerFields: string[] = []): Buffer | undefined {
  if (section === '') return root.whole;
  const m = /^((?:\d+\.)*\d+)?\.?(HEADER\.FIELDS\.NOT|HEADER\.FIELDS|HEADER|TEXT|MIME)?$/.exec(section);
  if (!m) return undefined;
  const path = m[1] ? m[1].split('.').map(Number) : [];
  const what = m[2] ?? '';
  let node = nodeAt(root, path);
  if (!node) return undefined;
  if (what === '') return path.length ? node.body : node.whole;
  if (what === 'MIME') return path.length ? node.header : undefined;
  // HEADER and TEXT of a part path name the message inside a message/rfc822 part.
  if (path.length) {
    if (!node.inner) return undefined;
    node = node.inner;
  }
  if (what === 'TEXT') return node.body;
  if (what === 'HEADER') return node.header;
  return headerLines(node.header, new Set(headerFields.map((h) => h.toLowerCase())), what === 'HEADER.FIELDS.NOT');
}

/** The header's fields named (or, `not`, not named) in `names`, followed by the empty line. */
function headerLines(header: Buffer, names: ReadonlySet<string>, not: boolean): Buffer {
  const text = header.toString('latin1');
  const out: string[] = [];
  let keep = false;
  for (const line of text.split(/(?<=\n)/)) {
    if (line === '\r\n' || line === '\n') break;
    if (!/^[ \t]/.test(line)) {
      const name = line
        .slice(0, Math.max(0, line.indexOf(':')))
        .trim()
        .toLowerCase();
      keep = names.has(name) !== not;
    }
    if (keep) out.push(line.endsWith('\n') ? line : line + '\r\n');
  }
  out.push('\r\n');
  return Buffer.from(out.join(''), 'latin1');
}

/** Quoted-printable (RFC 2045 §6.7) to bytes. */
function decodeQuotedPrintable(body: Buffer): Buffer {
  const text = body.toString('latin1').replace(/=\r?\n/g, '');
  const out = Buffer.alloc(text.length);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const hex = text[i] === '=' ? text.slice(i + 1, i + 3) : '';
    if (/^[0-9A-Fa-f]{2}$/.test(hex)) {
      out[n++] = parseInt(hex, 16);
      i += 2;
    } else out[n++] = text.charCodeAt(i);
  }
  return out.subarray(0, n);
}

/**
 * BINARY[`section`] (RFC 3516): the part's body with its Content-Transfer-Encoding undone;
 * undefined when there is no such part; 'unknown' for an encoding it cannot undo (UNKNOWN-CTE).
 */
export function binarySectionOf(root: MimeNode, section: string): Buffer | undefined | 'unknown' {
  if (section === '') return root.whole;
  if (!/^\d+(\.\d+)*$/.test(section)) return undefined;
  const node = nodeAt(root, section.split('.').map(Number));
  if (!node) return undefined;
  const cte = (field(node, 'content-transfer-encoding') ?? '7bit').toLowerCase();
  if (cte === 'base64') return Buffer.from(node.body.toString('latin1').replace(/[^A-Za-z0-9+/=]/g, ''), 'base64');
  if (cte === 'quoted-printable') return decodeQuotedPrintable(node.body);
  if (cte === '7bit' || cte === '8bit' || cte === 'binary') return node.body;
  return 'unknown';
}
