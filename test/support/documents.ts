// Hand-built documents for the attachment text tests: minimal PDFs (with a correct xref table,
// so pdf.js reads them without repair), DOCX files (a ZIP written here with node:zlib) and the
// hostile variants: huge page counts, deep nesting, broken xrefs, zip bombs, Flate bombs.
import { constants, crc32, deflateRawSync, deflateSync } from 'node:zlib';

/** A PDF from numbered object bodies (object 1 must be the catalog), with a valid xref table. */
export function pdfFromObjects(objects: Array<string | Buffer>, opts: { xref?: 'valid' | 'garbage' } = {}): Buffer {
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  let length = parts[0].length;
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(length);
    const chunk = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), Buffer.isBuffer(body) ? body : Buffer.from(body, 'latin1'), Buffer.from('\nendobj\n')]);
    parts.push(chunk);
    length += chunk.length;
  });
  const xrefAt = length;
  if (opts.xref === 'garbage') {
    parts.push(Buffer.from(`xref\nthis is not a cross-reference table\ntrailer\n<< /Size 99 /Root 77 0 R >>\nstartxref\n${xrefAt + 999999}\n%%EOF\n`));
  } else {
    const rows = offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('');
    parts.push(Buffer.from(`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${rows}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xrefAt}\n%%EOF\n`));
  }
  return Buffer.concat(parts);
}

const pdfString = (s: string) => `(${s.replace(/[\\()]/g, (c) => '\\' + c)})`;

/** A PDF with one page per string, each line of it drawn in Helvetica. */
export function pdfWithText(pages: string[]): Buffer {
  const n = pages.length;
  // 1 catalog, 2 pages, 3 font, then per page: page object, content stream.
  const kids = pages.map((_, i) => `${4 + i * 2} 0 R`).join(' ');
  const objects: string[] = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${kids}] /Count ${n} >>`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>',
  ];
  pages.forEach((text, i) => {
    const lines = text
      .split('\n')
      .map((l, j) => `BT /F1 12 Tf 72 ${720 - j * 16} Td ${pdfString(l)} Tj ET`)
      .join('\n');
    objects.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${5 + i * 2} 0 R >>`);
    objects.push(`<< /Length ${Buffer.byteLength(lines, 'latin1')} >>\nstream\n${lines}\nendstream`);
  });
  return pdfFromObjects(objects);
}

/** A page tree that claims `count` pages, all the same page object. */
export function pdfHugePageCount(count: number): Buffer {
  const kids = Array.from({ length: count }, () => '3 0 R').join(' ');
  const content = 'BT /F1 12 Tf 72 720 Td (again) Tj ET';
  return pdfFromObjects([
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${kids}] /Count ${count} >>`,
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>',
    `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ]);
}

/** A catalog whose page tree is `depth` nested arrays and dictionaries deep. */
export function pdfDeepNesting(depth: number): Buffer {
  const nested = '[<< /A '.repeat(depth) + '0' + ' >>]'.repeat(depth);
  return pdfFromObjects(['<< /Type /Catalog /Pages 2 0 R >>', `<< /Type /Pages /Kids ${nested} /Count 1 >>`]);
}

/** Stored (method 8, deflate) ZIP entries: what DOCX files are. */
export function zip(entries: Array<{ name: string; data: Buffer; deflated?: Buffer; size?: number; crc?: number }>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name);
    const body = e.deflated ?? deflateRawSync(e.data);
    const crc = e.crc ?? crc32(e.data);
    const size = e.size ?? e.data.length;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    centrals.push(central, name);
    offset += local.length + name.length + body.length;
  }
  const dir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(dir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, dir, end]);
}

const CONTENT_TYPES = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`;
const RELS = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`;

const escapeXml = (s: string) => s.replace(/[<>&]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;' })[c]!);

/** A DOCX whose document.xml is `documentXml` (given already deflated for bombs). */
export function docxFromDocument(document: { data: Buffer; deflated?: Buffer; size?: number; crc?: number }): Buffer {
  return zip([
    { name: '[Content_Types].xml', data: Buffer.from(CONTENT_TYPES) },
    { name: '_rels/.rels', data: Buffer.from(RELS) },
    { name: 'word/document.xml', ...document },
  ]);
}

/** A DOCX with one paragraph per string. */
export function docxWithParagraphs(paragraphs: string[]): Buffer {
  const body = paragraphs.map((p) => `<w:p><w:r><w:t xml:space="preserve">${escapeXml(p)}</w:t></w:r></w:p>`).join('');
  const xml = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`;
  return docxFromDocument({ data: Buffer.from(xml) });
}

/**
 * Raw deflate of `head`, then `chunk` `times` over, then `tail`, never holding the whole in
 * memory: each piece is compressed on its own and flushed to a byte boundary (Z_SYNC_FLUSH, no
 * final bit), so the one compressed chunk can repeat; an empty final block ends the stream.
 * With its CRC-32 and size, for a ZIP entry.
 */
export function deflateRepeated(head: string, chunk: string, times: number, tail: string): { deflated: Buffer; size: number; crc: number } {
  const piece = (s: string) => deflateRawSync(Buffer.from(s), { level: 9, finishFlush: constants.Z_SYNC_FLUSH });
  const body = piece(chunk);
  const chunkBytes = Buffer.from(chunk);
  let crc = crc32(head);
  for (let i = 0; i < times; i++) crc = crc32(chunkBytes, crc);
  crc = crc32(tail, crc);
  const deflated = Buffer.concat([piece(head), ...Array.from({ length: times }, () => body), piece(tail), deflateRawSync(Buffer.alloc(0))]);
  return { deflated, size: Buffer.byteLength(head) + chunkBytes.length * times + Buffer.byteLength(tail), crc };
}

/** A zip bomb: document.xml inflates to `megabytes` MB of paragraphs from about 1 KB per MB. */
export function docxBomb(megabytes: number): Buffer {
  const head = '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>';
  const tail = '</w:body></w:document>';
  const para = '<w:p><w:r><w:t>bomb</w:t></w:r></w:p>';
  return docxFromDocument({ data: Buffer.alloc(0), ...deflateRepeated(head, para.repeat(Math.floor(1_048_576 / para.length)), megabytes, tail) });
}

/**
 * A one-page PDF whose content stream is a Flate stream (zlib) of `megabytes` MB of spaces,
 * about 1 KB per MB: pdf.js decodes it whole into one growing buffer.
 */
export function pdfFlateBomb(megabytes: number): Buffer {
  const { deflated, crc: _ } = deflateRepeated('BT ', ' '.repeat(1_048_576), megabytes, ' ET');
  // zlib framing around the raw deflate: a header, and an Adler-32 pdf.js does not check.
  const zlibHeader = deflateSync(Buffer.alloc(0)).subarray(0, 2);
  const stream = Buffer.concat([zlibHeader, deflated, Buffer.alloc(4)]);
  return pdfFromObjects([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>',
    Buffer.concat([Buffer.from(`<< /Length ${stream.length} /Filter /FlateDecode >>\nstream\n`), stream, Buffer.from('\nendstream')]),
  ]);
}
