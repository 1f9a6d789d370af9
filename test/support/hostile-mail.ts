// Hostile SMTP input shared by the seed-corpus test (test/e2e/hostile-smtp.test.ts) and the
// long fuzz run (test/reliability/fuzz.ts): generated malformed messages, the MIME fixtures,
// a mutator for randomised variants, and raw session attacks against the listener.
import { readdirSync, readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'mime');
const CRLF = '\r\n';

function nested(depth: number): string {
  let body = 'innermost';
  for (let i = depth; i > 0; i--) {
    body = `Content-Type: multipart/mixed; boundary="b${i}"${CRLF}${CRLF}--b${i}${CRLF}${body}${CRLF}--b${i}--`;
  }
  return `Subject: deep${CRLF}MIME-Version: 1.0${CRLF}${body}${CRLF}`;
}

function nestedRfc822(depth: number): string {
  let msg = `Subject: inner${CRLF}${CRLF}bottom${CRLF}`;
  for (let i = 0; i < depth; i++) msg = `Subject: level ${i}${CRLF}MIME-Version: 1.0${CRLF}Content-Type: message/rfc822${CRLF}${CRLF}${msg}`;
  return msg;
}

function manyParts(n: number): string {
  const parts = Array.from({ length: n }, (_v, i) => `--p${CRLF}Content-Type: text/plain; name="p${i}.txt"${CRLF}Content-Disposition: attachment; filename="p${i}.txt"${CRLF}${CRLF}part ${i}`);
  return `Subject: many parts${CRLF}MIME-Version: 1.0${CRLF}Content-Type: multipart/mixed; boundary="p"${CRLF}${CRLF}${parts.join(CRLF)}${CRLF}--p--${CRLF}`;
}

/** One Subject folded over `lines` continuation lines. */
export function foldedHeader(lines: number): Buffer {
  return Buffer.from(`Subject: start${CRLF}${' x\r\n'.repeat(lines)}${CRLF}body${CRLF}`);
}

/** Generated malformed messages (name → raw bytes). Sizes stay under 2 MB. */
export function seedMessages(): Array<[string, Buffer]> {
  const out: Array<[string, Buffer]> = [
    ['deep multipart (200 levels)', Buffer.from(nested(200))],
    ['deep multipart (3000 levels)', Buffer.from(nested(3000))],
    ['nested message/rfc822 (300 levels)', Buffer.from(nestedRfc822(300))],
    ['2000 tiny attachments', Buffer.from(manyParts(2000))],
    ['one 1 MB header line', Buffer.from(`Subject: ${'A'.repeat(1_000_000)}${CRLF}${CRLF}body${CRLF}`)],
    ['20k headers', Buffer.from(Array.from({ length: 20_000 }, (_v, i) => `X-H${i}: v`).join(CRLF) + `${CRLF}Subject: many headers${CRLF}${CRLF}body${CRLF}`)],
    ['header folded over 3000 lines', foldedHeader(3000)],
    ['boundary never used', Buffer.from(`Subject: b${CRLF}MIME-Version: 1.0${CRLF}Content-Type: multipart/mixed; boundary="nope"${CRLF}${CRLF}--other${CRLF}${CRLF}text${CRLF}--other--${CRLF}`)],
    ['empty boundary', Buffer.from(`Subject: b${CRLF}Content-Type: multipart/mixed; boundary=""${CRLF}${CRLF}--${CRLF}${CRLF}x${CRLF}----${CRLF}`)],
    [
      'boundary of 5000 characters',
      Buffer.from(`Subject: b${CRLF}Content-Type: multipart/mixed; boundary="${'b'.repeat(5000)}"${CRLF}${CRLF}--${'b'.repeat(5000)}${CRLF}${CRLF}x${CRLF}--${'b'.repeat(5000)}--${CRLF}`),
    ],
    ['boundary that is a prefix of the body', Buffer.from(`Subject: b${CRLF}Content-Type: multipart/mixed; boundary="a"${CRLF}${CRLF}--a${CRLF}${CRLF}--ab --a-- --a${CRLF}--a--${CRLF}`)],
    ['8-bit and UTF-8 headers', Buffer.from(`Subject: caf\u00e9 \u2603 \u{1F4A9}${CRLF}From: J\u00fcrgen <j@example.org>${CRLF}X-Latin1: `.concat(CRLF).concat(CRLF).concat('body') + CRLF, 'utf8')],
    ['latin-1 bytes in headers', Buffer.concat([Buffer.from(`Subject: `), Buffer.from([0xe9, 0xff, 0xfe, 0x80, 0x81]), Buffer.from(`${CRLF}${CRLF}body${CRLF}`)])],
    ['NUL bytes in headers and body', Buffer.from(`Subject: a\0b${CRLF}From: \0@\0${CRLF}Content-Type: text/plain; charset="\0"${CRLF}${CRLF}x\0y\0z${CRLF}`)],
    ['bare LF only', Buffer.from(`Subject: bare lf\nFrom: a@b\n\nline\nline\n`)],
    ['bare CR only', Buffer.from(`Subject: bare cr\rFrom: a@b\r\rline\r`)],
    [
      'base64 with garbage',
      Buffer.from(
        `Subject: b64${CRLF}Content-Type: application/octet-stream${CRLF}Content-Transfer-Encoding: base64${CRLF}Content-Disposition: attachment; filename="x.bin"${CRLF}${CRLF}!!!!====@@@@${'A'.repeat(10_000)}====${CRLF}`,
      ),
    ],
    ['quoted-printable soft breaks forever', Buffer.from(`Subject: qp${CRLF}Content-Transfer-Encoding: quoted-printable${CRLF}${CRLF}${'=\r\n'.repeat(100_000)}end${CRLF}`)],
    ['encoded-word bomb', Buffer.from(`Subject: ${'=?utf-8?B?' + Buffer.from('\u00e9'.repeat(30)).toString('base64') + '?= '.repeat(1)}`.repeat(2000) + `${CRLF}${CRLF}x${CRLF}`)],
    [
      'unknown charset and transfer encoding',
      Buffer.from(`Subject: cs${CRLF}Content-Type: text/plain; charset=x-does-not-exist${CRLF}Content-Transfer-Encoding: x-uuencode-9${CRLF}${CRLF}hello${CRLF}`),
    ],
    ['content-type parameter explosion', Buffer.from(`Subject: params${CRLF}Content-Type: text/plain; ${Array.from({ length: 5000 }, (_v, i) => `p${i}*${i}="v"`).join('; ')}${CRLF}${CRLF}x${CRLF}`)],
    [
      'RFC 2231 filename continuations',
      Buffer.from(
        `Subject: 2231${CRLF}Content-Type: multipart/mixed; boundary="z"${CRLF}${CRLF}--z${CRLF}Content-Disposition: attachment; ${Array.from({ length: 5000 }, (_v, i) => `filename*${i}*=utf-8''%2e%2e%2f`).join('; ')}${CRLF}${CRLF}x${CRLF}--z--${CRLF}`,
      ),
    ],
    ['header without a colon, then a body', Buffer.from(`this is not a header${CRLF}neither is this${CRLF}${CRLF}body${CRLF}`)],
    ['a lone dot line inside (dot-stuffing)', Buffer.from(`Subject: dots${CRLF}${CRLF}.${CRLF}..${CRLF}...${CRLF}`)],
    ['empty message', Buffer.from('')],
  ];
  for (const f of readdirSync(FIXTURES)
    .filter((n) => n.endsWith('.eml'))
    .sort())
    out.push([`fixture ${f}`, readFileSync(join(FIXTURES, f))]);
  return out;
}

const TOKENS = [
  '\r\n',
  '\n',
  '\r',
  '\0',
  '--',
  '--b',
  '"',
  ';',
  ':',
  '=?',
  '?=',
  '=\r\n',
  'Content-Type: multipart/mixed; boundary="b"\r\n',
  '\r\n\r\n',
  '\xff',
  '\x80',
  'Content-Transfer-Encoding: base64\r\n',
  '\t',
  ' ',
];

/** A randomised variant: 1–6 mutations (byte flips, token inserts, cuts, duplications, splices). */
export function mutate(input: Buffer, random: () => number): Buffer {
  let buf = Buffer.from(input);
  const at = () => Math.floor(random() * (buf.length + 1));
  const rounds = 1 + Math.floor(random() * 6);
  for (let i = 0; i < rounds; i++) {
    const op = Math.floor(random() * 6);
    if (op === 0 && buf.length) {
      const p = Math.min(at(), buf.length - 1);
      buf[p] = Math.floor(random() * 256);
    } else if (op === 1) {
      const p = at();
      const tok = Buffer.from(TOKENS[Math.floor(random() * TOKENS.length)], 'latin1');
      buf = Buffer.concat([buf.subarray(0, p), tok, buf.subarray(p)]);
    } else if (op === 2) {
      const a = at();
      const b = Math.min(buf.length, a + Math.floor(random() * 200));
      buf = Buffer.concat([buf.subarray(0, a), buf.subarray(b)]);
    } else if (op === 3 && buf.length) {
      const a = at();
      const b = Math.min(buf.length, a + Math.floor(random() * 400));
      const times = 1 + Math.floor(random() * 20);
      buf = Buffer.concat([buf.subarray(0, b), ...Array(times).fill(buf.subarray(a, b)), buf.subarray(b)]);
    } else if (op === 4) {
      buf = buf.subarray(0, at());
    } else {
      const p = at();
      buf = Buffer.concat([buf.subarray(0, p), Buffer.from(`\r\nX-Fuzz-${i}: ${'y'.repeat(Math.floor(random() * 3000))}\r\n`), buf.subarray(p)]);
    }
  }
  return buf.length > 3_000_000 ? buf.subarray(0, 3_000_000) : buf;
}

/** Raw bytes to the listener; resolves what came back when the server closes or after `waitMs`. */
export function rawSession(port: number, chunks: Array<string | Buffer | { pauseMs: number }>, waitMs = 800): Promise<{ text: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const socket: Socket = connect(port, '127.0.0.1');
    let text = '';
    let done = false;
    const finish = (closedByServer: boolean) => {
      if (done) return;
      done = true;
      socket.destroy();
      resolve({ text, closedByServer });
    };
    socket.on('data', (d) => (text += d.toString('latin1')));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
    socket.once('data', async () => {
      for (const c of chunks) {
        if (done) return;
        if (typeof c === 'object' && 'pauseMs' in c) await new Promise((r) => setTimeout(r, c.pauseMs));
        else socket.write(c);
      }
      setTimeout(() => finish(false), waitMs);
    });
  });
}

/** Replies codes in order, from a raw transcript. */
export const replyCodes = (text: string) => [...text.matchAll(/^(\d{3}) /gm)].map((m) => Number(m[1]));

/** Session-level attacks; each names what a sane listener must do. */
export function sessionAttacks(
  rcpt: string,
): Array<{ name: string; chunks: Array<string | Buffer | { pauseMs: number }>; check: (r: { text: string; closedByServer: boolean }) => string | undefined }> {
  const msg = `Subject: pipelined${CRLF}${CRLF}body${CRLF}.${CRLF}`;
  return [
    {
      name: 'pipelining abuse: the whole transaction and garbage in one write before any reply',
      chunks: [`EHLO p.example${CRLF}MAIL FROM:<a@example.org>${CRLF}RCPT TO:<${rcpt}>${CRLF}DATA${CRLF}${msg}NOOP${CRLF}GARBAGE${CRLF}QUIT${CRLF}`],
      check: (r) => (replyCodes(r.text).includes(421) || /^5\d\d /m.test(r.text) || replyCodes(r.text).includes(250) ? undefined : `no sane reply: ${r.text.slice(0, 200)}`),
    },
    {
      name: '10,000 pipelined NOOPs',
      chunks: [`EHLO p.example${CRLF}`, 'NOOP\r\n'.repeat(10_000), `QUIT${CRLF}`],
      check: (r) => (replyCodes(r.text).length > 1 ? undefined : 'no replies'),
    },
    {
      name: 'a 1 MB command line without CRLF',
      chunks: [`EHLO p.example${CRLF}`, `MAIL FROM:<${'a'.repeat(1_000_000)}`],
      check: (r) => (r.closedByServer || /^5\d\d /m.test(r.text) ? undefined : 'kept reading an endless command line'),
    },
    {
      name: 'NUL and 8-bit bytes in commands',
      chunks: [Buffer.from(`EHLO \0\xff\xfe${CRLF}MAIL FROM:<a\0@example.org>${CRLF}RCPT TO:<\xe9@agents.test>${CRLF}QUIT${CRLF}`, 'latin1')],
      check: (r) => (/^[45]\d\d /m.test(r.text) || r.closedByServer ? undefined : `accepted: ${r.text.slice(0, 200)}`),
    },
    {
      name: 'DATA before MAIL/RCPT, then the body as commands',
      chunks: [`EHLO p.example${CRLF}DATA${CRLF}Subject: x${CRLF}${CRLF}body${CRLF}.${CRLF}QUIT${CRLF}`],
      check: (r) => (/^503 /m.test(r.text) ? undefined : `no 503: ${r.text.slice(0, 200)}`),
    },
    {
      name: 'STARTTLS and AUTH when not offered',
      chunks: [`EHLO p.example${CRLF}STARTTLS${CRLF}AUTH PLAIN AGFAYg==${CRLF}QUIT${CRLF}`],
      check: (r) => (/^5\d\d /m.test(r.text) ? undefined : `not refused: ${r.text.slice(0, 200)}`),
    },
    {
      name: 'disconnect in the middle of DATA',
      chunks: [`EHLO p.example${CRLF}MAIL FROM:<a@example.org>${CRLF}RCPT TO:<${rcpt}>${CRLF}DATA${CRLF}`, { pauseMs: 100 }, `Subject: cut${CRLF}${CRLF}half a mess`],
      check: () => undefined,
    },
    {
      name: 'slowloris: one byte every 100 ms',
      chunks: [...'EHLO slow\r\n'].flatMap((ch) => [ch, { pauseMs: 100 }]),
      check: () => undefined,
    },
    {
      name: 'a TLS ClientHello on the plain port',
      chunks: [Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, ...Array(200).fill(0x41)])],
      check: () => undefined,
    },
    {
      name: 'HTTP request on the SMTP port',
      chunks: [`GET / HTTP/1.1${CRLF}Host: x${CRLF}${CRLF}`, `POST /inboxes HTTP/1.1${CRLF}Content-Length: 2${CRLF}${CRLF}{}`],
      check: (r) => (/^5\d\d /m.test(r.text) || r.closedByServer ? undefined : 'treated HTTP as SMTP'),
    },
  ];
}
