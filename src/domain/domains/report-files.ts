// The file of a report mail (DMARC aggregate, TLS-RPT): receivers attach it as XML or JSON,
// gzip-compressed (.gz: Microsoft, TLS-RPT) or in a zip archive (.zip: Google's DMARC reports).
// Anyone can mail a report address, and its file is parsed on the main thread (about 0.23 s per
// MB of XML), so what one mail can make it parse is bounded: the first MAX_REPORT_PARTS
// candidates only, `[inbound] report_max_bytes` unpacked for the whole mail, and a compressed
// file may expand MAX_EXPANSION times at most. Past a bound the mail is refused (550 5.7.1).
// Before, four 10 KB gzip attachments of 10 MB of XML that was no report held the event loop
// for 9.7 s, and a mail may have a thousand parts.
import { gunzipSync } from 'node:zlib';
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { AppError } from '../errors.ts';

/** 550 5.7.1 at the end of DATA: a report mail whose report cannot be taken; nothing is stored. */
export const refusedReport = (why: string): AppError => new AppError('FORBIDDEN', why);

/** Parts of one mail looked at for its report (receivers attach one file). */
export const MAX_REPORT_PARTS = 4;
/** How many times its size a compressed report may expand: real reports compress 10–30 times; what compresses further is a bomb. */
export const MAX_EXPANSION = 100;

const tooLarge = (max: number) => refusedReport(`the report expands to more than ${max} bytes (inbound.report_max_bytes)`);
const tooCompressed = () => refusedReport(`the report expands more than ${MAX_EXPANSION} times its compressed size`);

async function unzipFirst(buf: Buffer, max: number, wanted: RegExp): Promise<Buffer | undefined> {
  const { default: JSZip } = await import('jszip');
  let zip;
  try {
    zip = await JSZip.loadAsync(buf, { checkCRC32: false });
  } catch {
    throw refusedReport('the zip attachment cannot be read');
  }
  const entry = Object.values(zip.files).find((f) => !f.dir && wanted.test(f.name)) ?? Object.values(zip.files).find((f) => !f.dir);
  if (!entry) return undefined;
  // Streamed and counted: the size an entry declares is not trusted.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stream = entry.nodeStream('nodebuffer');
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max || size > buf.length * MAX_EXPANSION) {
        (stream as unknown as { destroy?: () => void }).destroy?.();
        (stream as unknown as { pause: () => void }).pause();
        return reject(size > max ? tooLarge(max) : tooCompressed());
      }
      chunks.push(c);
    });
    stream.on('error', () => reject(refusedReport('the zip attachment cannot be read')));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
  });
}

/** The bytes of `buf` unpacked (gzip or zip, detected by their magic numbers) within `max`, or as they are. */
async function unpackReport(buf: Buffer, max: number, wanted: RegExp): Promise<Buffer | undefined> {
  if (buf[0] === 0x1f && buf[1] === 0x8b) {
    const limit = Math.min(max, buf.length * MAX_EXPANSION);
    try {
      return gunzipSync(buf, { maxOutputLength: limit });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) throw limit === max ? tooLarge(max) : tooCompressed();
      throw refusedReport('the gzip attachment cannot be read');
    }
  }
  if (buf[0] === 0x50 && buf[1] === 0x4b && buf[2] === 0x03 && buf[3] === 0x04) return unzipFirst(buf, max, wanted);
  if (buf.length > max) throw tooLarge(max);
  return buf;
}

/**
 * The candidate files of a report mail, unpacked, in order: its attachments (mailparser lists
 * every non-text part there), then its text body (some reporters put the XML or JSON inline);
 * the first MAX_REPORT_PARTS of them, within one `inbound.report_max_bytes` for the mail.
 */
export async function* reportFiles(ctx: AppContext, parsed: ParsedMail, wanted: RegExp): AsyncGenerator<Buffer> {
  const max = ctx.config.inbound.report_max_bytes;
  let left = max;
  const parts = parsed.attachments.map((a) => a.content);
  if (parsed.text) parts.push(Buffer.from(parsed.text));
  for (const part of parts.slice(0, MAX_REPORT_PARTS)) {
    if (left <= 0) throw tooLarge(max);
    const file = await unpackReport(part, left, wanted);
    if (!file) continue;
    left -= file.length;
    yield file;
  }
}
