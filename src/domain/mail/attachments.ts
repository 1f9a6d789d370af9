// Attachments: files of an account, either uploaded (POST /attachments, messageId null, later
// linked to sent messages through message_attachments) or arrived with an inbound message
// (messageId set). Bytes live on disk; downloads go through presigned, time-limited URLs.
import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import type { AppContext } from '../../context.ts';
import type { Db } from '../../store/client.ts';
import { newId } from '../../ids.ts';
import { findAttachmentById, insertAttachment, listAttachmentsOfAccount, listAttachmentsOfMessage, listAttachmentsOfMessages, type AttachmentRow } from '../../store/repo/attachments.ts';
import { Blobs } from '../../store/blobs/blobs.ts';
import { downloadUrl, urlSigningSecret, verifyDownload } from '../../store/signed-url.ts';
import { assertUploadRoom, storageFull, storageRoom } from '../accounts/quotas.ts';
import { AppError } from '../errors.ts';
import { isoNow } from '../time.ts';
import { releaseBlobs } from '../../store/blobs/blob-refs.ts';

export interface AttachmentMeta {
  id: string;
  filename: string;
  contentType: string;
  size: number;
  /** A fresh presigned download URL: in API answers, not in event payloads (which are kept). */
  url?: string;
}

export type { AttachmentRow };

export interface Attachment extends AttachmentMeta {
  url: string;
  expiresAt: string;
  createdAt: string;
}

/** A display filename: no directories, no control characters, bounded length. Never a path. */
export function cleanFilename(raw: unknown, fallback = 'attachment'): string {
  let name = (typeof raw === 'string' ? raw : '').normalize('NFC');
  name = name.replace(/[\u0000-\u001f\u007f-\u009f]/g, '');
  name = name.split(/[\\/]/).pop() ?? '';
  name = name.replace(/^[.\s]+/, '').trim();
  if (name.length > 200) {
    const dot = name.lastIndexOf('.');
    const ext = dot > 0 && name.length - dot <= 16 ? name.slice(dot) : '';
    name = name.slice(0, 200 - ext.length) + ext;
  }
  return name || fallback;
}

/** `type/subtype` lowercased and without parameters, or application/octet-stream. */
export function cleanContentType(raw: unknown): string {
  // mailparser reports a part's contentType as `false` when its Content-Type has no type/subtype
  // (found by the SMTP fuzz run); anything but a string is treated as absent.
  const t = (typeof raw === 'string' ? raw : '').split(';')[0].trim().toLowerCase();
  return /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/.test(t) ? t : 'application/octet-stream';
}

/** Types a browser would run or render as a document; served as octet-stream instead. */
const ACTIVE_TYPE =
  /^(?:text\/(?:html|xml|xsl|javascript|ecmascript|css|vtt)|application\/(?:xhtml\+xml|xml|javascript|ecmascript|x-javascript|rss\+xml|atom\+xml|x-shockwave-flash|pdf\+html)|image\/svg\+xml|multipart\/.*|message\/.*)$/;

/** The Content-Type a download is served with: the stored type unless it is an active one. */
export function downloadContentType(contentType: string): string {
  const t = cleanContentType(contentType);
  if (ACTIVE_TYPE.test(t) || t.endsWith('+xml')) return 'application/octet-stream';
  return t.startsWith('text/') ? `${t}; charset=utf-8` : t;
}

/** RFC 6266 §4.3 / RFC 8187: an ASCII fallback `filename` plus the exact UTF-8 `filename*`. */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\%]/g, '_');
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

export function attachmentMeta(row: AttachmentRow): AttachmentMeta {
  return { id: row.id, filename: row.filename, contentType: row.contentType, size: row.size };
}

/** A fresh presigned URL for an attachment, valid for attachments.url_ttl. */
export function presignAttachment(ctx: AppContext, id: string): { url: string; expiresAt: string } {
  const expires = Math.floor((ctx.clock.now().getTime() + ctx.config.attachments.url_ttl) / 1000);
  return {
    url: downloadUrl(ctx.config.http.public_url, urlSigningSecret(ctx), id, expires),
    expiresAt: new Date(expires * 1000).toISOString(),
  };
}

export function attachmentView(ctx: AppContext, row: AttachmentRow): Attachment {
  return { ...attachmentMeta(row), ...presignAttachment(ctx, row.id), createdAt: row.createdAt };
}

export async function findAttachmentRow(ctx: AppContext, accountId: string, id: string): Promise<AttachmentRow> {
  const row = await findAttachmentById(ctx.db, id);
  if (!row || row.accountId !== accountId) throw new AppError('ATTACHMENT_NOT_FOUND', `attachment ${id} not found`);
  return row;
}

export async function getAttachment(ctx: AppContext, accountId: string, id: string): Promise<Attachment> {
  return attachmentView(ctx, await findAttachmentRow(ctx, accountId, id));
}

/**
 * The rows of attachment ids named in a send request, in the given order. An id that is not an
 * attachment of the account is a 400 naming it (PRODUCT.md), not a 404: the request is at fault.
 */
export async function getAttachmentRows(ctx: AppContext, accountId: string, ids: string[], db: Db = ctx.db): Promise<AttachmentRow[]> {
  if (ids.length === 0) return [];
  const unique = [...new Set(ids)];
  const rows = await listAttachmentsOfAccount(db, accountId, unique);
  const byId = new Map(rows.map((r) => [r.id, r]));
  const missing = unique.find((id) => !byId.has(id));
  if (missing !== undefined) {
    throw new AppError('VALIDATION_ERROR', `\`attachmentIds\` names an unknown attachment: ${JSON.stringify(missing).slice(0, 80)}`);
  }
  return unique.map((id) => byId.get(id)!);
}

/** Attachments listed on messages: those that arrived with them and those linked when sent. */
export async function attachmentMetaForMany(ctx: AppContext, messageIds: string[]): Promise<Map<string, AttachmentMeta[]>> {
  const out = new Map<string, AttachmentMeta[]>(messageIds.map((id) => [id, []]));
  if (messageIds.length === 0) return out;
  const { own, linked } = await listAttachmentsOfMessages(ctx.db, messageIds);
  for (const row of own) out.get(row.messageId!)?.push(attachmentMeta(row));
  for (const l of linked) out.get(l.messageId)?.push(attachmentMeta(l.row));
  return out;
}

export async function attachmentMetaFor(ctx: AppContext, messageId: string): Promise<AttachmentMeta[]> {
  return (await attachmentMetaForMany(ctx, [messageId])).get(messageId) ?? [];
}

/**
 * The attachments of a message as its source carries them: those it arrived with (or a forward
 * carried over) and those it was sent with, in order.
 */
export async function messageAttachmentRows(ctx: AppContext, messageId: string): Promise<AttachmentRow[]> {
  return listAttachmentsOfMessage(ctx.db, messageId);
}

/** Counts bytes and fails the stream with `tooLarge` (413) as soon as the limit is crossed. */
function sizeLimit(limit: number, onChunk: (chunk: Buffer) => void, tooLarge = () => new AppError('PAYLOAD_TOO_LARGE', `attachment exceeds the limit of ${limit} bytes`)): Transform {
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (size > limit) return cb(tooLarge());
      onChunk(chunk);
      cb(null, chunk);
    },
  });
}

/**
 * Stores an uploaded file: streamed to disk (fsynced) with a size limit, then its row. When the
 * limit is crossed or the client goes away, nothing is left on disk or in the database.
 */
/**
 * The upload quotas checked before any byte is read: the account's uploads, and its stored bytes
 * against `atLeast` (what the request declares it will send, beyond its multipart framing).
 */
export async function assertUploadFits(ctx: AppContext, accountId: string, atLeast: number): Promise<void> {
  await assertUploadRoom(ctx, accountId);
  const room = await storageRoom(ctx, accountId);
  if (room === 0 || atLeast > room) throw storageFull(ctx);
}

export async function storeUpload(ctx: AppContext, accountId: string, input: { filename: string | undefined; contentType: string | undefined; source: Readable }): Promise<Attachment> {
  // Quotas (src/domain/accounts/quotas.ts): uploads not sent yet, and the account's stored bytes,
  // which this upload may fill but not pass. The file is drained so the client hears the 403.
  let room: number;
  try {
    await assertUploadRoom(ctx, accountId);
    room = await storageRoom(ctx, accountId);
    if (room === 0) throw storageFull(ctx);
  } catch (err) {
    // Drained, and its late errors (a form cut short) heard: nobody reads it any more.
    input.source.on('error', () => {});
    input.source.resume();
    throw err;
  }
  const id = newId('att');
  const storagePath = Blobs.key('attachments', id);
  const hash = createHash('sha256');
  let size = 0;
  const max = ctx.config.limits.max_attachment_bytes;
  const onChunk = (chunk: Buffer) => {
    size += chunk.length;
    hash.update(chunk);
  };
  const counter = room < max ? sizeLimit(room, onChunk, () => storageFull(ctx)) : sizeLimit(max, onChunk);
  input.source.on('error', (err) => counter.destroy(err));
  await ctx.blobs.writeStream(storagePath, input.source.pipe(counter));
  const row: AttachmentRow = {
    id,
    accountId,
    messageId: null,
    filename: cleanFilename(input.filename),
    contentType: cleanContentType(input.contentType),
    size,
    sha256: hash.digest('hex'),
    storagePath,
    createdAt: isoNow(ctx.clock),
  };
  try {
    await insertAttachment(ctx.db, row);
  } catch (err) {
    await releaseBlobs(ctx, [storagePath]);
    throw err;
  }
  return attachmentView(ctx, row);
}

export interface Download {
  row: AttachmentRow;
  headers: Record<string, string>;
  stream: Readable;
}

/**
 * Opens a download presented with a presigned URL (no API key). The signature is checked before
 * the expiry so a forged URL never learns whether an id exists: 403 INVALID_SIGNATURE, then
 * 410 URL_EXPIRED, then 404 when the attachment was deleted since the URL was made.
 */
export async function openDownload(ctx: AppContext, id: string, expiresRaw: string | null, signature: string | null): Promise<Download> {
  const expires = expiresRaw !== null && /^\d{1,12}$/.test(expiresRaw) ? Number(expiresRaw) : NaN;
  if (!Number.isFinite(expires) || !signature || !verifyDownload(urlSigningSecret(ctx), id, expires, signature)) {
    throw new AppError('INVALID_SIGNATURE', 'the download signature is missing or invalid; get a fresh URL from GET /attachments/{id}');
  }
  if (ctx.clock.now().getTime() >= expires * 1000) {
    throw new AppError('URL_EXPIRED', 'this download URL has expired; get a fresh one from GET /attachments/{id}');
  }
  const row = await findAttachmentById(ctx.db, id);
  if (!row) throw new AppError('ATTACHMENT_NOT_FOUND', `attachment ${id} not found`);
  return {
    row,
    stream: ctx.blobs.stream(row.storagePath),
    headers: {
      'Content-Type': downloadContentType(row.contentType),
      'Content-Length': String(row.size),
      'Content-Disposition': contentDisposition(row.filename),
      'X-Content-Type-Options': 'nosniff',
      // The URL is a bearer credential for a short time; keep it out of shared caches.
      'Cache-Control': 'private, no-store',
      'Content-Security-Policy': "default-src 'none'; sandbox",
    },
  };
}
