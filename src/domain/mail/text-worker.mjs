// The worker thread that turns an attachment's bytes into text (PDF with unpdf, DOCX with
// mammoth, HTML with html-to-text). It runs off the main thread with a memory limit and is
// terminated at a deadline by src/domain/mail/attachment-text.ts: a hostile file can exhaust only
// this thread. Plain JavaScript so that it loads the same way from source (under tsx) and
// inside the single executable (bundled on its own, build/build.ts), without a TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';

/** @param {string} text @param {number} max */
const cut = (text, max) => (text.length > max ? { text: text.slice(0, max), truncated: true } : { text, truncated: false });

/** Page by page, stopping once `max` characters are collected (a 100,000-page file stops early). */
async function pdfText(bytes, max) {
  const { getDocumentProxy } = await import('unpdf');
  // verbosity 0: pdf.js's warnings about broken files would go to the server's log.
  const doc = await getDocumentProxy(bytes, { isEvalSupported: false, verbosity: 0 });
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
  const result = await mammoth.extractRawText({ buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) });
  return cut(result.value.replace(/\n{3,}/g, '\n\n').trim(), max);
}

/** `html` arrives decoded (its charset was worked out on the main thread). */
async function htmlText(html, max) {
  const { convert } = await import('html-to-text');
  return cut(convert(html, { wordwrap: false, selectors: [{ selector: 'img', format: 'skip' }, { selector: 'a', options: { ignoreHref: true } }] }).trim(), max);
}

const EXTRACTORS = { pdf: pdfText, docx: docxText, html: htmlText };

// No top-level await: the single executable bundles this file as CommonJS.
async function main() {
  const { kind, input, maxChars } = workerData;
  return EXTRACTORS[kind](input, maxChars);
}

main().then(
  (ok) => parentPort.postMessage({ ok }),
  // The library's own words (pdf.js: "Invalid PDF structure"), never a stack: the main thread
  // puts them in a 422's message.
  (err) => parentPort.postMessage({ error: String(err?.message ?? err).slice(0, 200) }),
);
