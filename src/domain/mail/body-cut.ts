// Bodies in list answers and event frames are cut to `[limits] list_body_bytes`, so a page of
// large mails (or one 14 MB mail in a stream) never becomes one huge string. The single-message
// read (GET /messages/{id}) is the place to get a body whole.

const BODY_FIELDS = ['bodyText', 'bodyHtml', 'extractedText', 'extractedHtml'] as const;

/** `text` cut to at most `maxBytes` bytes of UTF-8, never inside a character. */
export function cutText(text: string, maxBytes: number): string {
  // A UTF-16 unit is at most 3 UTF-8 bytes; short strings need no measuring.
  if (text.length * 3 <= maxBytes || Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const bytes = Buffer.from(text, 'utf8').subarray(0, maxBytes);
  // Drop a trailing partial sequence (decoding would turn it into U+FFFD).
  let end = bytes.length;
  let back = 0;
  while (back < 4 && end - back - 1 >= 0 && (bytes[end - back - 1] & 0xc0) === 0x80) back++;
  const lead = bytes[end - back - 1];
  if (lead !== undefined && lead >= 0xc0) {
    const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
    if (back + 1 < need) end -= back + 1;
  }
  return bytes.subarray(0, end).toString('utf8');
}

type WithBodies = { [K in (typeof BODY_FIELDS)[number]]?: string | null } & { bodyTruncated?: boolean };

/** Cuts each body field of `m` (in place) to `maxBytes`; `bodyTruncated` says whether any was cut. */
export function cutBodies<T extends WithBodies>(m: T, maxBytes: number): T & { bodyTruncated: boolean } {
  let cut = false;
  for (const field of BODY_FIELDS) {
    const value = m[field];
    if (typeof value !== 'string') continue;
    const short = cutText(value, maxBytes);
    if (short !== value) {
      (m as WithBodies)[field] = short;
      cut = true;
    }
  }
  m.bodyTruncated = cut;
  return m as T & { bodyTruncated: boolean };
}
