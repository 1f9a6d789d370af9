// What the API answers, as the dashboard reads it: the server's own types (type-only imports,
// which the browser bundle leaves out), so a field renamed on the server fails tsc here.
import type { ApiKeyView, CreatedApiKey } from '../../../domain/accounts/apikeys.ts';
import type { AuditEntry } from '../../../domain/audit/audit.ts';
import type { DmarcSummary } from '../../../domain/domains/dmarc-reports.ts';
import type { tlsReportList } from '../../../domain/domains/tls-reports.ts';
import type { Domain, VerifiedDomain } from '../../../domain/domains/domains.ts';
import type { Inbox } from '../../../domain/inboxes/inboxes.ts';
import type { AttachmentMeta } from '../../../domain/mail/attachments.ts';
import type { Message } from '../../../domain/mail/messages.ts';
import type { Thread as ThreadSummary } from '../../../domain/mail/threads.ts';
import type { PageResult } from '../../../domain/pagination.ts';
import type { Draft } from '../../../domain/sending/drafts.ts';
import type { Suppression } from '../../../domain/sending/suppressions.ts';
import type { DeliveryLogEntry as Delivery, Webhook } from '../../../domain/webhooks/webhooks.ts';

export type { ApiKeyView as ApiKey, AuditEntry, CreatedApiKey, Delivery, DmarcSummary, Draft, Inbox, Message, Suppression, Webhook };

/** GET /domains/{id}/tls-reports. */
export type TlsReports = Awaited<ReturnType<typeof tlsReportList>>;

/** A list answer; a refused search shows as an empty one. */
export type Page<T> = Pick<PageResult<T>, 'data' | 'total'> & Partial<PageResult<T>>;

/** An attachment as listed on a message (GET /attachments/{id} answers more). */
export type Attachment = AttachmentMeta;

/** GET /threads/{id}: the thread and a page of its messages. */
export type Thread = ThreadSummary & { messages: Message[] };

/** GET /domains lists Domains; POST /domains/{id}/verify adds what DNS answered. */
export type DomainWithCheck = Domain & Partial<Pick<VerifiedDomain, 'dnsCheck'>>;
