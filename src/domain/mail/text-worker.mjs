// The process that turns an attachment's bytes into text (PDF with unpdf, DOCX with mammoth,
// HTML with html-to-text). src/domain/mail/attachment-text.ts starts one per extraction, under
// an address-space bound (RLIMIT_DATA, set by `ulimit -d` before exec) and a deadline: what a
// hostile file makes the libraries allocate (a zip bomb inflated by JSZip, a Flate stream
// decoded by pdf.js: outside the V8 heap, which resourceLimits never bounded) ends this process,
// never the server. It reads the file on stdin, what to do from the MAILROOM_TEXT_WORKER
// environment variable, and writes one JSON answer on fd 3 (stdout and stderr are dropped: the
// libraries' chatter never reaches the server's log). Plain JavaScript so that it runs the same
// way from source and inside the single executable (bundled on its own by build/build.ts; the
// executable runs it when it finds MAILROOM_TEXT_WORKER, see src/sea-loader.ts).
import { createWriteStream } from 'node:fs';

/** @param {string} text @param {number} max */
const cut = (text, max) => (text.length > max ? { text: text.slice(0, max), truncated: true } : { text, truncated: false });

/** Page by page, stopping once `max` characters are collected (a 100,000-page file stops early). */
async function pdfText(bytes, max) {
  const { getDocumentProxy } = await import('unpdf');
  // verbosity 0: pdf.js's warnings about broken files would go to the server's log.
  const doc = await getDocumentProxy(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), { isEvalSupported: false, verbosity: 0 });
  const pages = [];
  let length = 0;
  let next = 1;
  try {
    for (; next <= doc.numPages && length <= max; next++) {
      const page = await doc.getPage(next);
      const content = await page.getTextContent();
      let text = '';
      for (const item of content.items) {
        if (typeof item.str !== 'string') continue;
        text += item.str + (item.hasEOL ? '\n' : '');
      }
      page.cleanup();
      text = text.trim();
      pages.push(text);
      length += text.length + 2;
    }
  } finally {
    await doc.cleanup?.();
  }
  const text = pages.join('\n\n').trim();
  // Pages left unread: the text goes on past the limit.
  return next <= doc.numPages ? { text: text.slice(0, max), truncated: true } : cut(text, max);
}

async function docxText(bytes, max) {
  const mammoth = (await import('mammoth')).default;
  const result = await mammoth.extractRawText({ buffer: bytes });
  return cut(result.value.replace(/\n{3,}/g, '\n\n').trim(), max);
}

/** HTML arrives as UTF-8 (its charset was worked out by the server). */
async function htmlText(bytes, max) {
  const { convert } = await import('html-to-text');
  return cut(
    convert(bytes.toString('utf8'), {
      wordwrap: false,
      selectors: [
        { selector: 'img', format: 'skip' },
        { selector: 'a', options: { ignoreHref: true } },
      ],
    }).trim(),
    max,
  );
}

const EXTRACTORS = { pdf: pdfText, docx: docxText, html: htmlText };

/**
 * Allocation failures that JavaScript can catch (an ArrayBuffer or string the address-space
 * bound refused): the file expands too much, as when the process is killed for it.
 */
const MEMORY = /allocation failed|invalid (typed )?array length|invalid string length|out of memory|buffer.*too large/i;

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks);
}

// No top-level await: the single executable bundles this file as CommonJS.
async function main() {
  const { kind, maxChars } = JSON.parse(process.env.MAILROOM_TEXT_WORKER);
  return EXTRACTORS[kind](await readStdin(), maxChars);
}

function answer(message) {
  const out = createWriteStream('', { fd: 3 });
  out.end(JSON.stringify(message), () => process.exit(0));
}

main().then(
  (ok) => answer({ ok }),
  // The library's own words (pdf.js: "Invalid PDF structure"), never a stack: the server puts
  // them in a 422's message.
  (err) => answer({ error: String(err?.message ?? err).slice(0, 200), memory: err instanceof RangeError && MEMORY.test(String(err.message)) }),
);
