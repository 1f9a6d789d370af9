// /attachments: upload (multipart/form-data read with busboy, the `file` part streamed to disk),
// get (with a fresh presigned URL), its text (src/domain/mail/attachment-text.ts), and the public signed download route (no API key).
import busboy from 'busboy';
import type { AppContext } from '../../context.ts';
import { assertUploadFits, getAttachment, openDownload, storeUpload, type Attachment } from '../../domain/mail/attachments.ts';
import { attachmentText } from '../../domain/mail/attachment-text.ts';
import { AppError, isAppError } from '../../domain/errors.ts';
import type { ApiRequest, Routes } from '../routes.ts';

/** Multipart overhead allowed on top of the file itself (boundaries, part headers, small fields). */
const MULTIPART_SLACK = 1_048_576;

/**
 * Streams the `file` part of a multipart/form-data request into storeUpload, after the quotas
 * that need no byte of it (uploads, stored bytes against a declared Content-Length): refused
 * there, the body is still unread and the client hears the 403 (src/http/routes.ts).
 */
async function receiveUpload(ctx: AppContext, req: ApiRequest): Promise<Attachment> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (/^multipart\/form-data\s*;/i.test(req.headers['content-type'] ?? '')) await assertUploadFits(ctx, req.principal.accountId, Math.max(0, declared - MULTIPART_SLACK));
  return readUpload(ctx, req);
}

function readUpload(ctx: AppContext, req: ApiRequest): Promise<Attachment> {
  const contentType = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(contentType)) {
    return Promise.reject(new AppError('UNSUPPORTED_MEDIA_TYPE', 'upload with Content-Type: multipart/form-data and one part named `file`'));
  }
  const max = ctx.config.limits.max_attachment_bytes;
  if (Number(req.headers['content-length'] ?? 0) > max + MULTIPART_SLACK) {
    return Promise.reject(new AppError('PAYLOAD_TOO_LARGE', `attachment exceeds the limit of ${max} bytes`));
  }
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({
        headers: req.headers,
        defParamCharset: 'utf8',
        // One byte over the limit is enough to know the upload is too large (storeUpload refuses it).
        limits: { files: 1, fileSize: max + 1, fields: 20, fieldSize: 65_536, parts: 40, headerPairs: 50 },
      });
    } catch {
      return reject(new AppError('VALIDATION_ERROR', 'malformed multipart/form-data request: missing boundary'));
    }
    let upload: Promise<Attachment> | undefined;
    bb.on('file', (name, stream, info) => {
      // A form cut short errors its open part after the request has been answered: heard here.
      stream.on('error', () => {});
      if (name !== 'file' || upload) {
        stream.resume();
        return;
      }
      upload = storeUpload(ctx, req.principal.accountId, { filename: info.filename, contentType: info.mimeType, source: stream });
      upload.catch(reject);
    });
    bb.on('error', () => reject(new AppError('VALIDATION_ERROR', 'malformed multipart/form-data body')));
    bb.on('close', () => {
      if (!upload) reject(new AppError('VALIDATION_ERROR', '`file` is required: send one file part named `file` (with a filename)'));
      else upload.then(resolve, reject);
    });
    const source = req.readBody?.() ?? req.raw;
    source.pipe(bb);
  });
}

export function registerAttachmentRoutes(r: Routes, ctx: AppContext): void {
  r.post('/attachments', async (req) => ({ status: 201, body: await receiveUpload(ctx, req) }), { multipart: true });
  r.get('/attachments/:id', async (req) => ({ status: 200, body: await getAttachment(ctx, req.principal.accountId, req.params.id) }));
  r.get('/attachments/:id/text', async (req) => {
    // The client may leave while its extraction waits or runs: it is dropped or stopped then.
    const socket = req.raw.socket;
    const gone = new AbortController();
    const left = () => gone.abort(new Error('the client closed the connection'));
    if (socket.destroyed) left();
    socket.once('close', left);
    try {
      return { status: 200, body: await attachmentText(ctx, req.principal.accountId, req.params.id, gone.signal) };
    } catch (err) {
      if (!isAppError(err) || err.code !== 'TEXT_EXTRACTION_BUSY') throw err;
      // A worker frees within attachments.text_timeout at the latest.
      const retryAfter = String(Math.ceil(ctx.config.attachments.text_timeout / 1000));
      return { status: err.status, headers: { 'Retry-After': retryAfter }, body: { error: { code: err.code, message: err.message, status: err.status, requestId: req.requestId } } };
    } finally {
      // A keep-alive connection carries many requests: no listener per request may stay on it.
      socket.off('close', left);
    }
  });
  r.get(
    '/attachments/:id/download',
    async (req) => {
      const d = await openDownload(ctx, req.params.id, req.query.get('expires'), req.query.get('signature'));
      return { status: 200, stream: d.stream, headers: d.headers };
    },
    { public: true },
  );
}
