// The file of a report mail (DMARC aggregate, TLS-RPT): receivers attach it as XML or JSON,
// gzip-compressed (.gz: Microsoft, TLS-RPT) or in a zip archive (.zip: Google's DMARC reports).
// Unpacked with a bound on the bytes it expands to (`[inbound] report_max_bytes`), so a small
// compressed attachment cannot expand into gigabytes; past it the mail is refused (550 5.7.1).
import { gunzipSync } from 'node:zlib';
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { AppError } from '../errors.ts';

/** 550 5.7.1 at the end of DATA: a report mail whose report cannot be taken; nothing is stored. */
export const refusedReport = (why: string): AppError => new AppError('FORBIDDEN', why);

const tooLarge = (max: number) => refusedReport(`the report expands to more than ${max} bytes (inbound.report_max_bytes)`);

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
      if (size > max) {
        (stream as unknown as { destroy?: () => void }).destroy?.();
        (stream as unknown as { pause: () => void }).pause();
        return reject(tooLarge(max));
      }
      chunks.push(c);
    });
    stream.on('error', () => reject(refusedReport('the zip attachment cannot be read')));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
  });
}

/** The bytes of `buf` unpacked (gzip or zip, detected by their magic numbers), or as they are. */
export async function unpackReport(ctx: AppContext, buf: Buffer, wanted: RegExp): Promise<Buffer | undefined> {
  const max = ctx.config.inbound.report_max_bytes;
  if (buf[0] === 0x1f && buf[1] === 0x8b) {
    try {
      return gunzipSync(buf, { maxOutputLength: max });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) throw tooLarge(max);
      throw refusedReport('the gzip attachment cannot be read');
    }
  }
  if (buf[0] === 0x50 && buf[1] === 0x4b && buf[2] === 0x03 && buf[3] === 0x04) return unzipFirst(buf, max, wanted);
  if (buf.length > max) throw tooLarge(max);
  return buf;
}

/**
 * The candidate files of a report mail: its attachments (mailparser lists every non-text part
 * there), then its text body (some reporters put the XML or JSON inline).
 */
export function reportParts(parsed: ParsedMail): Buffer[] {
  const parts = parsed.attachments.map((a) => a.content);
  if (parsed.text) parts.push(Buffer.from(parsed.text));
  return parts;
}
