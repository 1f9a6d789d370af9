// Messages: the API shape of a stored message (inbound or outbound). Listing, reading and
// deleting messages live here too; receiving is in inbound.ts, sending in sending.ts.
import type { messages } from '../db/schema.ts';

export type MessageRow = typeof messages.$inferSelect;

export interface AttachmentMeta {
  id: string;
  filename: string;
  contentType: string;
  size: number;
}

export interface RecipientOutcome {
  address: string;
  /** 'queued' | 'sending' | 'sent' | 'delivered' | 'failed' | 'bounced' | 'complained' | 'deferred' */
  status: string;
  /** The remote server's last reply, or what happened instead. */
  response: string | null;
}

export interface Message {
  id: string;
  inboxId: string;
  threadId: string;
  direction: 'inbound' | 'outbound';
  fromAddress: string;
  fromName: string | null;
  toAddresses: string[];
  ccAddresses: string[];
  bccAddresses?: string[];
  subject: string;
  bodyText: string | null;
  bodyHtml: string | null;
  delivery?: string;
  status: string;
  attachments: AttachmentMeta[];
  messageIdHeader: string;
  inReplyTo: string | null;
  recipients?: RecipientOutcome[];
  authentication?: unknown;
  size: number;
  createdAt: string;
  updatedAt: string;
}

export function messageView(row: MessageRow, attachments: AttachmentMeta[]): Message {
  const m: Message = {
    id: row.id,
    inboxId: row.inboxId,
    threadId: row.threadId,
    direction: row.direction as Message['direction'],
    fromAddress: row.fromAddress,
    fromName: row.fromName,
    toAddresses: JSON.parse(row.toAddresses),
    ccAddresses: JSON.parse(row.ccAddresses),
    subject: row.subject,
    bodyText: row.bodyText,
    bodyHtml: row.bodyHtml,
    status: row.status,
    attachments,
    messageIdHeader: row.messageIdHeader,
    inReplyTo: row.inReplyTo,
    size: row.size,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
  if (row.direction === 'outbound') {
    m.bccAddresses = JSON.parse(row.bccAddresses);
    m.delivery = row.delivery ?? 'email';
    m.recipients = JSON.parse(row.recipients);
  } else {
    m.authentication = row.authentication ? JSON.parse(row.authentication) : null;
  }
  return m;
}
