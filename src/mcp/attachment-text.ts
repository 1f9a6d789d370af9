// The text of an attachment, for the get_attachment tool: text/* files as UTF-8 for now.
// Text extraction of PDF and DOCX files is being built for GET /attachments/{id}/text with the
// same contract ({text}, or UNSUPPORTED_MEDIA_TYPE for other types); when it lands, this file
// gives way to it: src/mcp/tools.ts calls attachmentText in exactly one place.
import type { AppContext } from '../context.ts';
import { findAttachmentRow } from '../domain/attachments.ts';
import { AppError } from '../domain/errors.ts';

export async function attachmentText(ctx: AppContext, accountId: string, id: string): Promise<{ text: string }> {
  const row = findAttachmentRow(ctx, accountId, id);
  if (!row.contentType.startsWith('text/')) throw new AppError('UNSUPPORTED_MEDIA_TYPE', `attachment ${id} is ${row.contentType}; text is given for text/* files`);
  // The charset parameter is not kept (cleanContentType): UTF-8, with U+FFFD for what is not.
  return { text: new TextDecoder('utf-8').decode(await ctx.blobs.read(row.storagePath)) };
}
