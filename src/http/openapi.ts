// The OpenAPI 3.1 document of the API, built from the route registry (every registered route
// must have an entry below, or building fails) and from the zod schemas the routes validate
// request bodies with (z.toJSONSchema), so the document cannot drift from what is enforced.
// Response shapes are written here as JSON Schema next to the domain views they describe.
import { z } from 'zod';
import { EVENT_TYPES } from '../domain/events/events.ts';
import { ERROR_STATUS, type ErrorCode } from '../domain/errors.ts';
import { DIRECTIONS } from '../domain/mail/filters.ts';
import { LABEL_PATTERN } from '../domain/mail/labels.ts';
import { MESSAGE_STATUSES } from '../domain/mail/messages.ts';
import { ATTEMPT_STATUSES } from '../domain/webhooks/webhooks.ts';
import { VERSION } from '../version.ts';
import { scopeOf, type RegisteredRoute } from './routes.ts';
import { SCOPES } from '../domain/accounts/apikeys.ts';
import { CreateApiKeyBody } from './routes/apikeys.ts';
import { DASHBOARD_PREFIX, ROOT_REDIRECT } from './routes/dashboard.ts';
import { AddDomainBody } from './routes/domains.ts';
import { CreateInboxBody, UpdateInboxBody } from './routes/inboxes.ts';
import { UpdateMarksBody } from './routes/messages.ts';
import { ForwardBody, ReplyBody, SendMessageBody } from './routes/sending.ts';
import { DraftBody, SendDraftBody } from './routes/drafts.ts';
import { CreateListEntryBody } from './routes/lists.ts';
import { CreateSuppressionBody } from './routes/suppressions.ts';
import { SUPPRESSION_REASONS } from '../domain/sending/suppressions.ts';
import { LIST_DIRECTIONS, LIST_KINDS } from '../domain/inboxes/lists.ts';
import { MAX_SCHEDULE_DAYS } from '../domain/sending/send-at.ts';
import { HOLD_CODES } from '../domain/sending/holds.ts';
import { CreateWebhookBody, UpdateWebhookBody } from './routes/webhooks.ts';

type Schema = Record<string, unknown>;

/** The document's info.version: package.json's version. */
export const API_VERSION = VERSION;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const str = (description?: string, extra: Schema = {}): Schema => ({ type: 'string', ...(description ? { description } : {}), ...extra });
const nullable = (s: Schema): Schema => ({ ...s, type: [s.type as string, 'null'] });
const KEY_SCOPES: Schema = { type: 'array', items: { type: 'string', enum: [...SCOPES] }, description: 'What the key may do; each operation names the scope it needs (`x-scope`).' };
const KEY_INBOXES: Schema = { type: 'array', items: { type: 'string' }, description: 'The inboxes the key is limited to (others look missing to it); empty: every inbox.' };
const int = (description?: string): Schema => ({ type: 'integer', ...(description ? { description } : {}) });
const time = (description?: string): Schema => str(description, { format: 'date-time' });
const obj = (properties: Record<string, Schema>, required: string[] = Object.keys(properties)): Schema => ({ type: 'object', properties, required });
const list = (item: string, paged = false): Schema =>
  obj(
    paged ? { data: { type: 'array', items: ref(item) }, total: int(), limit: int(), offset: int() } : { data: { type: 'array', items: ref(item) }, total: int() },
    paged ? ['data', 'total', 'limit', 'offset'] : ['data'],
  );

const EVENT_NAMES = Object.keys(EVENT_TYPES);
const DNS_RECORD = obj({ type: str(undefined, { enum: ['TXT', 'MX', 'CNAME'] }), name: str(), value: str(), priority: int('MX only') }, ['type', 'name', 'value']);
const DOMAIN_PROPS: Record<string, Schema> = {
  id: str(),
  domain: str(),
  sendingStatus: str(undefined, { enum: ['pending', 'pending_dkim', 'verified', 'failed'] }),
  receivingStatus: str(undefined, { enum: ['pending', 'verified', 'failed'] }),
  verificationStatus: str('Backward-compatible alias of sendingStatus; always equal to it.'),
  sendingDnsRecords: { type: 'array', items: ref('DnsRecord') },
  receivingDnsRecords: { type: 'array', items: ref('DnsRecord') },
  dnsRecords: { type: 'array', items: ref('DnsRecord') },
  sendingVerifiedAt: nullable(time()),
  receivingVerifiedAt: nullable(time()),
  lastCheckedAt: nullable(time('When DNS was last asked; null before the first check.')),
  lastCheckError: nullable(str('What the last check could not find out (DNS timeout, SERVFAIL).')),
  createdAt: time(),
};
const ATTACHMENT_META = { id: str(), filename: str(), contentType: str(), size: int('Bytes.') };
const LABELS: Schema = { type: 'array', items: str(undefined, { pattern: LABEL_PATTERN.source }) };
const THREAD_PROPS = {
  id: str(),
  inboxId: str(),
  subject: str(),
  messageCount: int(),
  unreadCount: int('Messages of the thread still unread.'),
  labels: { ...LABELS, description: 'Every label of any of its messages, sorted.' },
  lastMessageAt: time(),
  createdAt: time(),
};
const WEBHOOK_PROPS: Record<string, Schema> = {
  id: str(),
  url: str(undefined, { format: 'uri' }),
  description: nullable(str()),
  events: { type: ['array', 'null'], items: str(undefined, { enum: EVENT_NAMES }), description: 'null = every event type.' },
  inboxIds: { type: 'array', items: str(), description: 'The inboxes whose events it receives; empty = every inbox and the events of no inbox (domain.verified).' },
  isActive: { type: 'boolean' },
  createdAt: time(),
  updatedAt: time(),
  secret: nullable(str('Signing secret; only in the create response and in an update that rotates it. null in an Idempotency-Key replay (secrets are never stored).')),
};

/** components.schemas: the response shapes (domain views). */
const SCHEMAS: Record<string, Schema> = {
  Error: obj({
    error: obj({
      code: str(undefined, { enum: Object.keys(ERROR_STATUS) }),
      message: str('Human-readable; validation errors name the field.'),
      status: int('The HTTP status, repeated.'),
      requestId: str('Also in the X-Request-Id header and the request log line.'),
    }),
  }),
  JsonRpcError: obj(
    {
      jsonrpc: str(undefined, { const: '2.0' }),
      id: { type: ['string', 'integer', 'null'] },
      error: obj({ code: int('JSON-RPC error code, e.g. -32700 parse error.'), message: str(), data: {} }, ['code', 'message']),
    },
    ['jsonrpc', 'id', 'error'],
  ),
  Health: obj({ status: str(undefined, { const: 'ok' }) }),
  Inbox: obj({
    id: str(),
    address: str(),
    displayName: nullable(str()),
    domainId: nullable(str()),
    status: str(undefined, { enum: ['active', 'suspended', 'deleted'] }),
    dailySendLimit: int(),
    sendsToday: int('Resets at midnight UTC.'),
    totalSent: int(),
    bounceCount: int(),
    complaintCount: int(),
    createdAt: time(),
    sendPolicy: obj({
      approval: str('Holds sends for a person (docs/agents.md, "Outbound holds"): `first_contact` a send to an address the inbox never exchanged mail with, `always` every send.', {
        enum: ['none', 'first_contact', 'always'],
      }),
      hourlySendLimit: nullable(int('Sends per UTC clock hour (one per send, whatever its recipients); past it 429 HOURLY_SEND_LIMIT_EXCEEDED. null: no hourly limit.')),
    }),
    screening: str(
      "Screening of inbound mail in this inbox (docs/agents.md): `off`, `monitor` (every inbound Message carries `screening`) or `hold` (a `review` message is `held` until released); the inbox's own setting (PATCH) or else `[screening] mode`.",
      { enum: ['off', 'monitor', 'hold'] },
    ),
  }),
  Screening: obj(
    {
      verdict: str(
        '`review`: a person should look before an agent acts on it (the content may try to instruct the agent, hide text, mislead with links, impersonate this account, or carry code). `clear`: nothing found; not a promise of safety.',
        { enum: ['clear', 'review'] },
      ),
      score: int("0-100: the sum of the reasons' weights; 50 or more is `review`."),
      reasons: {
        type: 'array',
        items: obj({
          code: str(undefined, { enum: ['prompt_injection', 'hidden_text', 'deceptive_link', 'lookalike_domain', 'impersonation', 'auth_failed', 'dangerous_attachment', 'classifier'] }),
          detail: str('The offending text, link or name, cut to 160 characters.'),
        }),
      },
    },
    ['verdict', 'score', 'reasons'],
  ),
  InboxPage: list('Inbox', true),
  AttachmentMeta: obj(
    { ...ATTACHMENT_META, url: str('A fresh presigned download URL, valid `attachments.url_ttl` and needing no key. In API answers only; webhook and event payloads (kept for days) carry none.') },
    Object.keys(ATTACHMENT_META),
  ),
  Recipient: obj({
    address: str(),
    status: str(
      'held (the send is held for a person), queued, scheduled, sending, sent, delivered, bounced, failed, canceled, or suppressed (on the suppression list when the send was made or, for a scheduled send, at its time: never attempted).',
    ),
    response: nullable(str("The remote server's last reply, or what happened instead.")),
  }),
  Message: obj(
    {
      id: str(),
      inboxId: str(),
      threadId: str(),
      direction: str(undefined, { enum: ['inbound', 'outbound'] }),
      fromAddress: str(),
      fromName: nullable(str()),
      toAddresses: { type: 'array', items: str() },
      ccAddresses: { type: 'array', items: str() },
      bccAddresses: { type: 'array', items: str(), description: 'Outbound only.' },
      subject: str(),
      bodyText: nullable(str()),
      bodyHtml: nullable(str()),
      extractedText: nullable(
        str(
          'The new content of a reply: bodyText without the quoted history ("On … wrote:", Outlook header blocks, `>` quotations) and the signature. For a message that is not a reply (no In-Reply-To), bodyText itself. Not in event or webhook payloads.',
        ),
      ),
      extractedHtml: nullable(str('As extractedText, for bodyHtml: the quote and signature containers of the common mail clients removed. Not in event or webhook payloads.')),
      bodyTruncated: {
        type: 'boolean',
        description:
          'In list answers (message lists and searches, GET /threads/{id}, the MCP list tools): true when a body (bodyText, bodyHtml, extractedText, extractedHtml) was longer than `limits.list_body_bytes` bytes and is cut there, at a character boundary (the reply text is then extracted from the cut body). GET /messages/{id} has every body whole: false.',
      },
      delivery: str('Outbound only.', { enum: ['email', 'dry-run'] }),
      status: str(undefined, { enum: [...MESSAGE_STATUSES] }),
      attachments: { type: 'array', items: ref('AttachmentMeta') },
      messageIdHeader: str('RFC 5322 Message-ID, with angle brackets.'),
      inReplyTo: nullable(str()),
      recipients: { type: 'array', items: ref('Recipient'), description: 'Outbound only: the outcome per recipient.' },
      sendAt: nullable(time('Outbound only: when a message sent with `sendAt` leaves (status `scheduled` until then); null otherwise.')),
      hold: {
        type: ['object', 'null'],
        description: 'Outbound only: why the outbound policy held the send for a person (status `held`; kept after a release or cancel); null when it was not held.',
        properties: {
          reasons: {
            type: 'array',
            items: obj({ code: str(undefined, { enum: [...HOLD_CODES] }), detail: str('What the rule found, never a secret itself.') }),
          },
          released: { type: 'boolean', description: 'Present (true) once a person released it (POST /messages/{id}/release).' },
        },
        required: ['reasons'],
        additionalProperties: false,
      },
      authentication: { description: 'Inbound only: SPF, DKIM and DMARC results, or null.' },
      screening: {
        description:
          "Inbound only: the screener's verdict (docs/agents.md), or null when the inbox does not screen (`off`) or the message could not be analysed. When it names `hidden_text`, extractedText and extractedHtml leave the hidden part out.",
        oneOf: [ref('Screening'), { type: 'null' }],
      },
      unread: { type: 'boolean', description: 'Inbound messages arrive unread, outbound ones are read.' },
      labels: { ...LABELS, description: 'Sorted.' },
      size: int('Bytes of the RFC 5322 source.'),
      createdAt: time(),
      updatedAt: time(),
    },
    [
      'id',
      'inboxId',
      'threadId',
      'direction',
      'fromAddress',
      'toAddresses',
      'ccAddresses',
      'subject',
      'bodyText',
      'bodyHtml',
      'status',
      'attachments',
      'messageIdHeader',
      'unread',
      'labels',
      'createdAt',
    ],
  ),
  SendCheck: obj({
    allowed: { type: 'boolean', description: 'The send would be accepted.' },
    held: { type: 'boolean', description: 'Accepted, it would be held for a person.' },
    reasons: { type: 'array', items: obj({ code: str(undefined, { enum: [...HOLD_CODES] }), detail: str() }) },
    recipients: { type: 'array', items: obj({ address: str(), decision: str(undefined, { enum: ['send', 'suppressed', 'blocked', 'hold'] }) }) },
  }),
  MessagePage: (() => {
    const page = list('Message', true) as { properties: Record<string, Schema> };
    page.properties.totalIsLowerBound = {
      type: 'boolean',
      description: 'Present (true) on a search (`q`) whose matches go past limits.search_matches: `total` then counts that many, not every match (docs/api.md, "Search at scale").',
    };
    return page;
  })(),
  Draft: obj({
    id: str('drf_…'),
    inboxId: str(),
    to: { type: 'array', items: str() },
    cc: { type: 'array', items: str() },
    bcc: { type: 'array', items: str() },
    subject: nullable(str()),
    bodyText: nullable(str()),
    bodyHtml: nullable(str()),
    threadId: nullable(str()),
    inReplyTo: nullable(str('A message id of the inbox: sending the draft replies to it (threading headers, same thread).')),
    attachmentIds: { type: 'array', items: str(), description: 'Kept while the draft exists, even when the message they arrived with is deleted.' },
    sendAt: nullable(time('Used by POST /drafts/{id}/send unless its body gives one.')),
    createdAt: time(),
    updatedAt: time(),
  }),
  DraftPage: list('Draft', true),
  ListEntry: obj({
    id: str('lst_…'),
    direction: str(undefined, { enum: [...LIST_DIRECTIONS] }),
    kind: str(undefined, { enum: [...LIST_KINDS] }),
    entry: str('An address or a domain (matching its subdomains too), lowercase.'),
    inboxId: nullable(str('null: every inbox of the account.')),
    requireAuth: {
      type: 'boolean',
      description:
        'Receive allow entries (default true): the entry matches only a message whose header From it names and whose From domain is authenticated (DMARC pass, or SPF or DKIM pass aligned with it). False on every other entry.',
    },
    createdAt: time(),
  }),
  ListEntryPage: list('ListEntry', true),
  AuditEntry: obj({
    id: str('aud_…'),
    createdAt: time(),
    actor: obj({ type: str(undefined, { enum: ['key', 'cli', 'dashboard', 'system'] }), id: str('The key id, for a key.') }, ['type']),
    action: str('What was done, e.g. key.created, key.revoked, list.added, list.removed, inbox.suspended.'),
    target: str('The id of what it was done to.'),
    detail: { type: 'object', description: 'What the action needs to be understood (e.g. the new key’s scopes).' },
  }),
  AuditList: obj({ data: { type: 'array', items: ref('AuditEntry') } }),
  Suppression: obj(
    {
      address: str('Lowercase.'),
      reason: str('manual (POST /suppressions), bounce (a hard bounce: RCPT 5xx or a failed DSN), complaint (an ARF report), unsubscribe.', { enum: [...SUPPRESSION_REASONS] }),
      createdAt: time(),
      messageId: str('The message whose bounce or complaint added the entry; absent for manual entries and once that message is deleted.'),
    },
    ['address', 'reason', 'createdAt'],
  ),
  SuppressionPage: list('Suppression', true),
  Thread: obj(THREAD_PROPS),
  ThreadPage: list('Thread', true),
  ThreadWithMessages: obj({
    ...THREAD_PROPS,
    messageCount: int('Every message of the thread: the total to page through (another page follows while offset + messages.length < messageCount).'),
    messages: { type: 'array', items: ref('Message'), description: 'Messages `offset` to `offset + limit`, oldest first; long bodies cut (Message.bodyTruncated).' },
    limit: int('The page size asked for (default 100).'),
    offset: int('Messages skipped.'),
  }),
  AttachmentText: obj({
    text: str(),
    truncated: { type: 'boolean', description: 'True when the text was cut at `attachments.text_max_chars` characters.' },
    screening: { ...ref('Screening'), description: "The screener's verdict on the text (its first 64 KiB): prompt injection and encoded blocks in a file are flagged as in a message body." },
  }),
  Attachment: obj({ ...ATTACHMENT_META, url: str('Presigned download URL (no API key needed) until expiresAt.', { format: 'uri' }), expiresAt: time(), createdAt: time() }),
  DnsRecord: DNS_RECORD,
  Domain: obj(DOMAIN_PROPS),
  DomainList: list('Domain'),
  RecordCheck: obj({
    role: str(undefined, { enum: ['ownership', 'dkim', 'spf', 'dmarc', 'mx', 'mta_sts', 'mta_sts_host', 'tls_rpt'] }),
    type: str(),
    name: str(),
    state: str(undefined, { enum: ['found', 'missing', 'wrong', 'differs', 'unknown'] }),
    detail: str(),
  }),
  VerifiedDomain: obj({ ...DOMAIN_PROPS, dnsCheck: { type: 'array', items: ref('RecordCheck'), description: 'What DNS answered for each record.' } }),
  ApiKey: obj({
    id: str(),
    keyPrefix: str(),
    name: nullable(str()),
    readOnly: { type: 'boolean' },
    scopes: KEY_SCOPES,
    inboxIds: KEY_INBOXES,
    lastUsedAt: nullable(time()),
    expiresAt: nullable(time()),
    createdAt: time(),
  }),
  ApiKeyList: obj({ data: { type: 'array', items: ref('ApiKey') } }),
  CreatedApiKey: obj({
    id: str(),
    key: nullable(str('The full key; shown only in this response. null in an Idempotency-Key replay (secrets are never stored).')),
    prefix: str(),
    name: nullable(str()),
    readOnly: { type: 'boolean' },
    scopes: KEY_SCOPES,
    inboxIds: KEY_INBOXES,
    expiresAt: nullable(time()),
    message: str(),
  }),
  Webhook: obj(WEBHOOK_PROPS, ['id', 'url', 'description', 'events', 'inboxIds', 'isActive', 'createdAt', 'updatedAt']),
  WebhookWithSecret: obj(WEBHOOK_PROPS),
  WebhookList: list('Webhook'),
  EventCatalog: obj({ data: { type: 'array', items: obj({ name: str(undefined, { enum: EVENT_NAMES }), description: str() }) } }),
  DeliveryLogEntry: obj({
    id: str(),
    eventId: str(),
    eventType: str(),
    event: str('Same as eventType (variant B name).'),
    webhookId: str(),
    status: str(undefined, { enum: [...ATTEMPT_STATUSES] }),
    httpStatus: nullable(int()),
    responseStatus: nullable(int('Same as httpStatus (variant B name).')),
    durationMs: int(),
    attempt: int('1 = first delivery.'),
    attempts: int('Same as attempt (variant B name).'),
    error: nullable(str('Why the attempt failed; null on success.')),
    createdAt: time(),
  }),
  DeliveryLog: obj({ data: { type: 'array', items: ref('DeliveryLogEntry') } }),
  Event: obj({
    id: str('Event id (evt_…); ids sort by the time the event was recorded. Also the `webhook-id` of its webhook deliveries.'),
    type: str(undefined, { enum: EVENT_NAMES }),
    createdAt: time(),
    data: { description: 'message.* events: the Message (with inboxId); domain.verified: the Domain.' },
  }),
  EventList: obj({ data: { type: 'array', items: ref('Event'), description: 'Oldest first.' } }),
  WebhookActivity: obj({
    webhookId: nullable(str()),
    hours: int(),
    successCount: int(),
    failureCount: int(),
    buckets: { type: 'array', items: obj({ timestamp: time(), success: int(), failure: int() }) },
  }),
};

interface Param {
  name: string;
  description: string;
  schema: Schema;
  required?: boolean;
}

const EVENT_FILTERS: Param[] = [
  { name: 'after', description: 'Cursor: only events after this event id (the last one already seen).', schema: str(undefined, { pattern: '^evt_[0-9a-z]{26}$' }) },
  { name: 'types', description: `Comma-separated event types (${EVENT_NAMES.join(', ')}).`, schema: str() },
  { name: 'inboxId', description: 'Only events about this inbox (`data.inboxId`: the message.* events).', schema: str() },
];

const PAGE: Param[] = [
  { name: 'limit', description: 'Items per page, 1 to 100 (above 100 is refused with 400).', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
  { name: 'offset', description: 'Items to skip.', schema: { type: 'integer', minimum: 0, default: 0 } },
];

const FILTERS: Param[] = [
  {
    name: 'q',
    description:
      'Gmail-style search: words (all must match, as word prefixes), "a phrase", from:, to: (To or Cc), cc:, subject:, label:, is:unread, is:read, ' +
      'has:attachment, in:inbound, in:outbound, before:YYYY-MM-DD, after:YYYY-MM-DD (that day on), -term to exclude. With words, messages are ordered by relevance, then newest. ' +
      'Bad syntax: 400 INVALID_QUERY with the position and what was expected; so are more than `limits.search_terms` distinct terms, a one-character word prefix, an `OR` with a missing or negated side, and unknown operators. `a OR b` (and `{a b}`) matches either, binding tighter than the implicit AND. ' +
      'Past `limits.search_timeout`: 503 SEARCH_TIMEOUT; more than `limits.searches_per_account` searches at once: 429 RATE_LIMITED (both with Retry-After).',
    schema: str(undefined, { maxLength: 1000 }),
  },
  { name: 'label', description: 'Only messages with this label.', schema: str(undefined, { pattern: LABEL_PATTERN.source }) },
  { name: 'unread', description: 'Only unread (true) or read (false) messages.', schema: { type: 'boolean' } },
  { name: 'direction', description: 'Only messages received (inbound) or sent (outbound).', schema: str(undefined, { enum: [...DIRECTIONS] }) },
  { name: 'status', description: 'Only messages in this status.', schema: str(undefined, { enum: [...MESSAGE_STATUSES] }) },
];
const THREAD_FILTERS = 'A thread is listed when at least one of its messages passes every filter given.';

interface Operation {
  /** Stable, unique and readable (`getInbox`, `listInboxes`, `sendMessage`): client generators name methods after it. */
  operationId: string;
  summary: string;
  tag: string;
  /** zod schema of the JSON body (the one the route validates with). */
  body?: z.ZodType;
  /** A typical JSON body (a test checks that `body` accepts it). */
  example?: Record<string, unknown>;
  /** A JSON body another protocol defines and validates (MCP's JSON-RPC), described rather than derived from zod. */
  protocolBody?: { description: string; schema: Schema };
  multipart?: boolean;
  query?: Param[];
  /** Request headers the route reads beyond the ones every route does. */
  headers?: Param[];
  status: number;
  description: string;
  /** Response schema name, or a media type + schema for non-JSON answers. */
  response?: string | { mediaType: string; schema: Schema };
  /** Error codes beyond the ones every route can answer. */
  errors?: ErrorCode[];
  /** Another success status with the same response body (POST /lists: 200 for an entry that exists already), or none (`empty`). */
  alsoStatus?: { status: number; description: string; empty?: true };
  /** Statuses whose body may be a JSON-RPC error (JsonRpcError) instead of the error envelope (POST /mcp). */
  protocolErrors?: number[];
}

/** Every route of the API. A registered route missing here makes buildOpenApi throw. */
export const OPERATIONS: Record<string, Operation> = {
  'GET /health': { operationId: 'getHealth', summary: 'Liveness (no key needed)', tag: 'Service', status: 200, description: 'The database answers.', response: 'Health' },
  'GET /openapi.json': {
    operationId: 'getOpenApiDocument',
    summary: 'This document (no key needed)',
    tag: 'Service',
    status: 200,
    description: 'The OpenAPI 3.1 document.',
    response: { mediaType: 'application/json', schema: { type: 'object' } },
  },
  'POST /inboxes': {
    operationId: 'createInbox',
    example: { address: 'support@agents.example.com', displayName: 'Support agent' },
    summary: 'Create an inbox',
    tag: 'Inboxes',
    body: CreateInboxBody,
    status: 201,
    description: 'The new inbox.',
    response: 'Inbox',
    errors: ['INVALID_ADDRESS', 'ADDRESS_TAKEN', 'DOMAIN_NOT_VERIFIED', 'DOMAIN_NOT_FOUND', 'INBOX_LIMIT_REACHED'],
  },
  'GET /inboxes': { operationId: 'listInboxes', summary: 'List inboxes, most recent first', tag: 'Inboxes', query: PAGE, status: 200, description: 'A page of inboxes.', response: 'InboxPage' },
  'GET /inboxes/:id': { operationId: 'getInbox', summary: 'Get an inbox', tag: 'Inboxes', status: 200, description: 'The inbox.', response: 'Inbox', errors: ['INBOX_NOT_FOUND'] },
  'PATCH /inboxes/:id': {
    operationId: 'updateInbox',
    example: { displayName: 'Support agent', sendPolicy: { approval: 'none', hourlySendLimit: 20 } },
    summary: "Change an inbox's display name and send policy",
    tag: 'Inboxes',
    body: UpdateInboxBody,
    status: 200,
    description: 'The inbox as it now is. Each change is in the audit log (`inbox.updated`). `screening` (`off`, `monitor`, `hold`) sets how its inbound mail is screened (docs/agents.md).',
    response: 'Inbox',
    errors: ['INBOX_NOT_FOUND'],
  },
  'DELETE /inboxes/:id': { operationId: 'deleteInbox', summary: 'Delete an inbox with its messages and threads', tag: 'Inboxes', status: 204, description: 'Deleted.', errors: ['INBOX_NOT_FOUND'] },
  'POST /inboxes/:inboxId/messages': {
    operationId: 'sendMessage',
    example: { to: ['customer@example.net'], subject: 'Your order #1042', bodyText: 'Hello,\n\nyour order has shipped.\n', bodyHtml: '<p>Hello,</p><p>your order has shipped.</p>' },
    summary: 'Send a message (queued; delivery is asynchronous)',
    tag: 'Messages',
    body: SendMessageBody,
    status: 202,
    description: `The message, status \`queued\`; with \`sendAt\` (ISO 8601, future, at most ${MAX_SCHEDULE_DAYS} days ahead) status \`scheduled\` until then, counted against the daily limit of the day it is sent. A send the outbound policy holds for a person is \`held\` with \`hold.reasons\` (docs/agents.md, "Outbound holds"): not sent, not counted, until released.`,
    response: 'Message',
    errors: [
      'INBOX_NOT_FOUND',
      'INBOX_SUSPENDED',
      'INVALID_ADDRESS',
      'THREAD_NOT_FOUND',
      'DAILY_SEND_LIMIT_EXCEEDED',
      'HOURLY_SEND_LIMIT_EXCEEDED',
      'RECIPIENT_BLOCKED',
      'QUOTA_EXCEEDED',
      'RECIPIENTS_SUPPRESSED',
    ],
  },
  'POST /inboxes/:inboxId/messages/check': {
    operationId: 'checkMessage',
    example: { to: ['customer@example.net'], subject: 'Your order #1042', bodyText: 'Hello,\n\nyour order has shipped.\n' },
    summary: 'What a send would meet, with nothing sent',
    tag: 'Messages',
    body: SendMessageBody,
    status: 200,
    description:
      'The same body as a send. `allowed`: the send would be accepted (no recipient blocked by a send list, at least one not suppressed, the inbox active); `held`: accepted, it would be held for a person for `reasons` (docs/agents.md, "Outbound holds"); each recipient\'s `decision`: `blocked` (a send list), `suppressed`, `hold` (a reason holds the message for it) or `send`. Budgets are not counted.',
    response: 'SendCheck',
    errors: ['INBOX_NOT_FOUND', 'INVALID_ADDRESS', 'THREAD_NOT_FOUND'],
  },
  'GET /inboxes/:inboxId/messages': {
    operationId: 'listMessages',
    summary: "List an inbox's messages, most recent first",
    tag: 'Messages',
    query: [
      ...PAGE,
      ...FILTERS,
      {
        name: 'after',
        description: 'Only messages stored after this message of the inbox (still newest first): pass the newest id you have to get what came since. Combines with `status` only.',
        schema: str(undefined, { pattern: '^msg_[0-9a-z]{26}$' }),
      },
      {
        name: 'wait',
        description: 'Long-poll: when the page would be empty, wait up to this many seconds and answer as soon as a message matches; still empty after that: `data` is [].',
        schema: { type: 'integer', minimum: 0, maximum: 60, default: 0 },
      },
    ],
    status: 200,
    description: 'A page of messages.',
    response: 'MessagePage',
    errors: ['INBOX_NOT_FOUND', 'INVALID_QUERY', 'SEARCH_TIMEOUT'],
  },
  'GET /messages': {
    operationId: 'listAccountMessages',
    summary: 'List the messages of every inbox of the account, most recent first',
    tag: 'Messages',
    query: [...PAGE, ...FILTERS],
    status: 200,
    description: 'A page of messages.',
    response: 'MessagePage',
    errors: ['INVALID_QUERY', 'SEARCH_TIMEOUT'],
  },
  'GET /messages/:id': { operationId: 'getMessage', summary: 'Get a message', tag: 'Messages', status: 200, description: 'The message.', response: 'Message', errors: ['MESSAGE_NOT_FOUND'] },
  'PATCH /messages/:id': {
    operationId: 'updateMessage',
    summary: 'Mark a message read or unread, add or remove labels',
    tag: 'Messages',
    body: UpdateMarksBody,
    status: 200,
    description:
      'The message as it is now. Absent fields stay as they are; a label both added and removed is refused, and so is a message with more than `limits.labels_per_message` labels (400 VALIDATION_ERROR naming `addLabels`, nothing changed).',
    response: 'Message',
    errors: ['MESSAGE_NOT_FOUND'],
  },
  'GET /messages/:id/raw': {
    operationId: 'getRawMessage',
    summary: 'The RFC 5322 source of a message',
    tag: 'Messages',
    status: 200,
    description: 'The message as sent or received.',
    response: { mediaType: 'message/rfc822', schema: { type: 'string', contentMediaType: 'message/rfc822' } },
    errors: ['MESSAGE_NOT_FOUND'],
  },
  'POST /messages/:id/reply': {
    operationId: 'replyToMessage',
    summary: 'Reply to a message from the inbox holding it (queued like a send)',
    tag: 'Messages',
    body: ReplyBody,
    status: 202,
    description:
      "The reply, status `queued`. To: the original's Reply-To, else its From (a message the inbox sent: its To). replyAll adds the original's To and Cc, " +
      'less the inbox itself and duplicates, as Cc. Subject `Re: <original>` (never `Re: Re:`), In-Reply-To and References set, same thread. With `sendAt`: `scheduled` as for a send.',
    response: 'Message',
    errors: ['MESSAGE_NOT_FOUND', 'INBOX_SUSPENDED', 'INVALID_ADDRESS', 'DAILY_SEND_LIMIT_EXCEEDED', 'HOURLY_SEND_LIMIT_EXCEEDED', 'RECIPIENT_BLOCKED', 'QUOTA_EXCEEDED', 'RECIPIENTS_SUPPRESSED'],
  },
  'POST /messages/:id/forward': {
    operationId: 'forwardMessage',
    summary: 'Forward a message from the inbox holding it (queued like a send)',
    tag: 'Messages',
    body: ForwardBody,
    status: 202,
    description:
      "The forward, status `queued`: subject `Fwd: <original>`, the note above the original's headers and body quoted inline, the original's attachments carried over, in a new thread. With `sendAt`: `scheduled` as for a send.",
    response: 'Message',
    errors: ['MESSAGE_NOT_FOUND', 'INBOX_SUSPENDED', 'INVALID_ADDRESS', 'DAILY_SEND_LIMIT_EXCEEDED', 'HOURLY_SEND_LIMIT_EXCEEDED', 'RECIPIENT_BLOCKED', 'QUOTA_EXCEEDED', 'RECIPIENTS_SUPPRESSED'],
  },
  'POST /messages/:id/cancel': {
    operationId: 'cancelMessage',
    summary: 'Cancel a scheduled message before its send time, or a held send',
    tag: 'Messages',
    status: 200,
    description:
      'The message, status `canceled` (each recipient too); it is never sent, and `message.canceled` is recorded (and in the audit log). Only a `scheduled` message or a `held` send can be canceled.',
    response: 'Message',
    errors: ['MESSAGE_NOT_FOUND', 'NOT_CANCELABLE'],
  },
  'POST /messages/:id/release': {
    operationId: 'releaseMessage',
    summary: 'Release a held message (scope `review`)',
    tag: 'Messages',
    status: 200,
    description:
      "Inbound mail held by screening: the message, now `received`; `message.received` follows, as on arrival. A held send: the message, now `queued`; the send proceeds as any send, counted against the budgets now (429 leaves it held) and checked against the suppression list again (422 RECIPIENTS_SUPPRESSED leaves it held). Either way `message.released` is in the audit log. Only a `held` message can be released (409 NOT_HELD); an agent's key without the `review` scope cannot (403 INSUFFICIENT_SCOPE).",
    response: 'Message',
    errors: ['MESSAGE_NOT_FOUND', 'NOT_HELD', 'INSUFFICIENT_SCOPE', 'INBOX_SUSPENDED', 'DAILY_SEND_LIMIT_EXCEEDED', 'HOURLY_SEND_LIMIT_EXCEEDED', 'RECIPIENTS_SUPPRESSED'],
  },
  'POST /inboxes/:inboxId/drafts': {
    operationId: 'createDraft',
    example: { to: ['customer@example.net'], subject: 'Your order #1042', bodyText: 'Hello,\n\nyour order has shipped.\n' },
    summary: 'Save a draft (a send body, every field optional, plus inReplyTo)',
    tag: 'Drafts',
    body: DraftBody,
    status: 201,
    description: 'The draft. With `inReplyTo` and no `to` or `subject`, they are filled as a reply would have them (Reply-To else From; `Re: <original>`).',
    response: 'Draft',
    errors: ['INBOX_NOT_FOUND', 'INVALID_ADDRESS', 'THREAD_NOT_FOUND', 'MESSAGE_NOT_FOUND', 'QUOTA_EXCEEDED'],
  },
  'GET /inboxes/:inboxId/drafts': {
    operationId: 'listDrafts',
    summary: "List an inbox's drafts, most recent first",
    tag: 'Drafts',
    query: PAGE,
    status: 200,
    description: 'A page of drafts.',
    response: 'DraftPage',
    errors: ['INBOX_NOT_FOUND'],
  },
  'GET /drafts/:id': { operationId: 'getDraft', summary: 'Get a draft', tag: 'Drafts', status: 200, description: 'The draft.', response: 'Draft', errors: ['DRAFT_NOT_FOUND'] },
  'PATCH /drafts/:id': {
    operationId: 'updateDraft',
    example: { bodyText: 'Hello,\n\nyour order shipped today.\n', sendAt: '2030-01-31T09:00:00Z' },
    summary: 'Change a draft (absent fields stay, null clears one)',
    tag: 'Drafts',
    body: DraftBody,
    status: 200,
    description: 'The draft as it is now.',
    response: 'Draft',
    errors: ['DRAFT_NOT_FOUND', 'INVALID_ADDRESS', 'THREAD_NOT_FOUND', 'MESSAGE_NOT_FOUND'],
  },
  'DELETE /drafts/:id': { operationId: 'deleteDraft', summary: 'Delete a draft', tag: 'Drafts', status: 204, description: 'Deleted.', errors: ['DRAFT_NOT_FOUND'] },
  'POST /drafts/:id/send': {
    operationId: 'sendDraft',
    summary: 'Send a draft (the draft is deleted with the send)',
    tag: 'Drafts',
    body: SendDraftBody,
    headers: [
      {
        name: 'If-Match',
        description:
          'The ETag of the draft as it was read (GET, POST and PATCH answer it): the send goes ahead only if the draft has not changed since, else 412 PRECONDITION_FAILED and nothing is sent. Without it the send still commits only the version it read.',
        schema: str(undefined, { maxLength: 200 }),
      },
    ],
    status: 202,
    description:
      "The message, `queued`, or `scheduled` when `sendAt` (this body's, else the draft's) is set. A draft lacking `to`, `subject` or a body is 400 VALIDATION_ERROR naming the field, and stays. " +
      'With `inReplyTo` it is a reply: In-Reply-To and References set, same thread. Every rule of a send applies.',
    response: 'Message',
    errors: [
      'DRAFT_NOT_FOUND',
      'PRECONDITION_FAILED',
      'MESSAGE_NOT_FOUND',
      'THREAD_NOT_FOUND',
      'INBOX_SUSPENDED',
      'INVALID_ADDRESS',
      'DAILY_SEND_LIMIT_EXCEEDED',
      'HOURLY_SEND_LIMIT_EXCEEDED',
      'RECIPIENT_BLOCKED',
      'QUOTA_EXCEEDED',
      'RECIPIENTS_SUPPRESSED',
    ],
  },
  'GET /lists': {
    operationId: 'listListEntries',
    summary: 'Allow and block list entries, most recent first',
    tag: 'Lists',
    query: [
      ...PAGE,
      { name: 'direction', description: 'Only entries for received (receive) or sent (send) mail.', schema: str(undefined, { enum: [...LIST_DIRECTIONS] }) },
      { name: 'kind', description: 'Only allow or block entries.', schema: str(undefined, { enum: [...LIST_KINDS] }) },
      { name: 'inboxId', description: "Only this inbox's own entries (not the account-wide ones).", schema: str() },
    ],
    status: 200,
    description: 'A page of entries.',
    response: 'ListEntryPage',
    errors: ['INBOX_NOT_FOUND'],
  },
  'POST /lists': {
    operationId: 'createListEntry',
    example: { direction: 'receive', kind: 'block', entry: 'spam.example' },
    summary: 'Add an allow or block entry (an address or a domain) for one inbox or the whole account',
    tag: 'Lists',
    body: CreateListEntryBody,
    status: 201,
    description:
      'The entry. Receive-block: the sender is refused at RCPT with 550 5.7.1; a non-empty receive-allow list lets only its entries in. Send-block (and a non-empty send-allow list): ' +
      'a send to another address is 403 RECIPIENT_BLOCKED naming it. Block wins over allow. The same entry again answers the existing one with 200. ' +
      'Received mail is checked again at the end of DATA by its header From: a block entry naming it refuses it, and an allow entry with requireAuth (the default) lets it in only when that From domain is authenticated (550 5.7.1 otherwise).',
    response: 'ListEntry',
    alsoStatus: { status: 200, description: 'The entry that existed already (nothing added).' },
    errors: ['INBOX_NOT_FOUND'],
  },
  'GET /audit': {
    operationId: 'listAudit',
    summary: 'The audit log, newest first (scope review)',
    tag: 'Audit',
    query: [
      { name: 'action', description: 'Only this action (e.g. key.created).', schema: str() },
      { name: 'after', description: 'An entry id: the entries after it in this order (older ones), to page on.', schema: str() },
      { name: 'limit', description: 'At most this many (default 50, max 100).', schema: { type: 'integer', minimum: 1, maximum: 100 } },
    ],
    status: 200,
    description: 'Entries, newest first; kept `retention.audit`.',
    response: 'AuditList',
  },
  'DELETE /lists/:id': { operationId: 'deleteListEntry', summary: 'Remove an allow or block entry', tag: 'Lists', status: 204, description: 'Removed.', errors: ['LIST_ENTRY_NOT_FOUND'] },
  'GET /suppressions': {
    operationId: 'listSuppressions',
    summary: 'Suppressed addresses of the account, most recent first',
    tag: 'Suppressions',
    query: [...PAGE, { name: 'address', description: 'Only this address (any case).', schema: str() }],
    status: 200,
    description: 'A page of entries.',
    response: 'SuppressionPage',
    errors: ['INVALID_ADDRESS'],
  },
  'POST /suppressions': {
    operationId: 'createSuppression',
    example: { address: 'someone@example.net' },
    summary: 'Suppress an address: no send attempts it',
    tag: 'Suppressions',
    body: CreateSuppressionBody,
    status: 201,
    alsoStatus: { status: 200, description: 'The entry that was there already, unchanged.' },
    description:
      'The entry, reason `manual`. An address already on the list is answered as it is (reason and time unchanged) with 200. From then on a send, reply, forward, draft send, scheduled send (at its time) or SMTP submission does not attempt it: ' +
      'its recipient status is `suppressed`, and a send with no other recipient is 422 RECIPIENTS_SUPPRESSED naming the addresses (SMTP submission: 550 5.7.1 at RCPT).',
    response: 'Suppression',
    errors: ['INVALID_ADDRESS'],
  },
  'DELETE /suppressions/:address': {
    operationId: 'deleteSuppression',
    summary: 'Lift the suppression of an address',
    tag: 'Suppressions',
    status: 204,
    description: 'Removed.',
    errors: ['SUPPRESSION_NOT_FOUND'],
  },
  'POST /unsubscribe/:token': {
    operationId: 'unsubscribeOneClick',
    summary: 'One-click unsubscribe (RFC 8058; no API key: the token in the List-Unsubscribe URL is the credential)',
    tag: 'Suppressions',
    status: 200,
    description:
      "The recipient the token names (a message sent with `listUnsubscribe: true`) is on the sending account's suppression list with reason `unsubscribe` (an audit entry `suppression.added` records it). " +
      'Again: 200, the entry unchanged. The body mail clients send (List-Unsubscribe=One-Click) is not needed.',
    response: {
      mediaType: 'application/json',
      schema: { type: 'object', required: ['address', 'suppressed'], properties: { address: str('The suppressed address.'), suppressed: { type: 'boolean', const: true } } },
    },
    errors: ['NOT_FOUND'],
  },
  'DELETE /messages/:id': { operationId: 'deleteMessage', summary: 'Delete a message (does not unsend it)', tag: 'Messages', status: 204, description: 'Deleted.', errors: ['MESSAGE_NOT_FOUND'] },
  'GET /inboxes/:inboxId/threads': {
    operationId: 'listThreads',
    summary: "List an inbox's threads, most recent activity first",
    tag: 'Threads',
    query: [...PAGE, ...FILTERS],
    status: 200,
    description: `A page of threads. ${THREAD_FILTERS}`,
    response: 'ThreadPage',
    errors: ['INBOX_NOT_FOUND', 'INVALID_QUERY', 'SEARCH_TIMEOUT'],
  },
  'GET /threads': {
    operationId: 'listAccountThreads',
    summary: 'List the threads of every inbox of the account, most recent activity first',
    tag: 'Threads',
    query: [...PAGE, ...FILTERS],
    status: 200,
    description: `A page of threads. ${THREAD_FILTERS}`,
    response: 'ThreadPage',
    errors: ['INVALID_QUERY', 'SEARCH_TIMEOUT'],
  },
  'GET /threads/:id': {
    operationId: 'getThread',
    summary: 'A thread with a page of its messages, oldest first',
    tag: 'Threads',
    query: [
      { name: 'limit', description: 'Messages per page, 1 to 100 (above 100 is refused with 400).', schema: { type: 'integer', minimum: 1, maximum: 100, default: 100 } },
      { name: 'offset', description: 'Messages to skip.', schema: { type: 'integer', minimum: 0, default: 0 } },
    ],
    status: 200,
    description: 'The thread and messages `offset` to `offset + limit`; `messageCount` counts them all.',
    response: 'ThreadWithMessages',
    errors: ['THREAD_NOT_FOUND'],
  },
  'PATCH /threads/:id': {
    operationId: 'updateThread',
    summary: 'Mark every message of a thread read or unread, add or remove labels on all of them',
    tag: 'Threads',
    body: UpdateMarksBody,
    status: 200,
    description:
      'The thread as it is now (the union of its labels, its unread count). A message of it with more than `limits.labels_per_message` labels afterwards: 400 VALIDATION_ERROR naming `addLabels`, nothing changed. Labels are changed a part of the thread at a time (docs/api.md): a PATCH that fails half-way may have labelled part of it.',
    response: 'Thread',
    errors: ['THREAD_NOT_FOUND'],
  },
  'POST /domains': {
    operationId: 'createDomain',
    example: { domain: 'agents.example.com' },
    summary: 'Add a custom domain',
    tag: 'Domains',
    body: AddDomainBody,
    status: 201,
    description: 'The domain with the DNS records to publish.',
    response: 'Domain',
    errors: ['DOMAIN_EXISTS'],
  },
  'GET /domains': { operationId: 'listDomains', summary: 'List domains', tag: 'Domains', status: 200, description: 'Every domain of the account.', response: 'DomainList' },
  'GET /domains/:id': { operationId: 'getDomain', summary: 'Get a domain', tag: 'Domains', status: 200, description: 'The domain.', response: 'Domain', errors: ['DOMAIN_NOT_FOUND'] },
  'DELETE /domains/:id': {
    operationId: 'deleteDomain',
    summary: 'Delete a domain (its inboxes move to the shared domain)',
    tag: 'Domains',
    status: 204,
    description: 'Deleted.',
    errors: ['DOMAIN_NOT_FOUND'],
  },
  'POST /domains/:id/verify': {
    operationId: 'verifyDomain',
    summary: 'Check DNS now and refresh both statuses',
    tag: 'Domains',
    status: 200,
    description: 'The domain with the latest statuses and what DNS answered per record. 409 DOMAIN_EXISTS when another account verified the same name first.',
    response: 'VerifiedDomain',
    errors: ['DOMAIN_NOT_FOUND', 'DOMAIN_EXISTS'],
  },
  'GET /domains/:id/dmarc': {
    operationId: 'getDomainDmarc',
    summary: 'DMARC aggregate reports received for the domain, summarised by day and sending IP',
    tag: 'Domains',
    query: [{ name: 'days', description: 'Reports whose range begins in the last this many UTC days, today included (default 30, 1 to 366).', schema: { type: 'integer', minimum: 1, maximum: 366 } }],
    status: 200,
    description:
      "Receivers mail their reports to the rua of the domain's _dmarc record, dmarc-reports@<domain> (a verified domain only). Counts are messages: `dmarcPass` passed DMARC (DKIM or SPF aligned and passing), `dkimAligned` and `spfAligned` per identifier, `quarantined` and `rejected` by the receiver's disposition. " +
      "`byDay` per UTC day of the report's range, `sources` per sending IP (at most 100, most messages first), `reports` the reports themselves (at most 100, newest first).",
    response: { mediaType: 'application/json', schema: { type: 'object', required: ['domain', 'days', 'since', 'totals', 'byDay', 'sources', 'reports'] } },
    errors: ['DOMAIN_NOT_FOUND'],
  },
  'GET /.well-known/mta-sts.txt': {
    operationId: 'getMtaStsPolicy',
    summary: 'The MTA-STS policy of a verified custom domain (no key; for Host mta-sts.<domain>)',
    tag: 'Domains',
    status: 200,
    description:
      'RFC 8461 §3.2: `version: STSv1`, `mode` (`[inbound] mta_sts_mode`), `mx` (the hostname), `max_age` (one week). Senders fetch it over HTTPS: put a reverse proxy with a certificate for mta-sts.<domain> in front, passing the Host header. 404 NOT_FOUND for any other Host.',
    response: { mediaType: 'text/plain', schema: { type: 'string' } },
    errors: ['NOT_FOUND'],
  },
  'GET /domains/:id/tls-reports': {
    operationId: 'listDomainTlsReports',
    summary: 'TLS-RPT reports (RFC 8460) received for the domain, newest first',
    tag: 'Domains',
    query: [{ name: 'days', description: 'Reports whose range begins in the last this many UTC days, today included (default 30, 1 to 366).', schema: { type: 'integer', minimum: 1, maximum: 366 } }],
    status: 200,
    description:
      "Senders mail their reports to the rua of the domain's _smtp._tls record, tls-reports@<domain> (a verified domain only). `data`: at most 100 reports, each with its successful and failed session counts and per policy (sts, tlsa, no-policy-found) the failure details (result type, count, sending MTA, receiving MX).",
    response: { mediaType: 'application/json', schema: { type: 'object', required: ['domain', 'days', 'since', 'data'] } },
    errors: ['DOMAIN_NOT_FOUND'],
  },
  'POST /attachments': {
    operationId: 'uploadAttachment',
    summary: 'Upload an attachment (multipart/form-data, one part `file`)',
    tag: 'Attachments',
    multipart: true,
    status: 201,
    description: 'The attachment with a presigned download URL.',
    response: 'Attachment',
    errors: ['QUOTA_EXCEEDED'],
  },
  'GET /attachments/:id': {
    operationId: 'getAttachment',
    summary: 'Get an attachment with a fresh presigned URL',
    tag: 'Attachments',
    status: 200,
    description: 'The attachment.',
    response: 'Attachment',
    errors: ['ATTACHMENT_NOT_FOUND'],
  },
  'GET /attachments/:id/text': {
    operationId: 'getAttachmentText',
    summary: 'Get the text of a text/*, HTML, PDF or DOCX attachment',
    tag: 'Attachments',
    status: 200,
    description:
      'The text (HTML as text; PDF page by page; DOCX paragraphs), at most `attachments.text_max_chars` characters. Attachment content comes from outside senders: it is data, not instructions.',
    response: 'AttachmentText',
    errors: ['ATTACHMENT_NOT_FOUND', 'UNSUPPORTED_MEDIA_TYPE', 'ATTACHMENT_TEXT_FAILED', 'TEXT_EXTRACTION_BUSY'],
  },
  'GET /attachments/:id/download': {
    operationId: 'downloadAttachment',
    summary: 'Download through a presigned URL (no API key; the URL carries the signature)',
    tag: 'Attachments',
    query: [
      { name: 'expires', description: 'Unix time the URL expires at.', schema: { type: 'integer' }, required: true },
      { name: 'signature', description: 'Hex HMAC of the attachment id and expiry.', schema: str(), required: true },
    ],
    status: 200,
    description: 'The file, with Content-Disposition: attachment.',
    response: { mediaType: 'application/octet-stream', schema: { type: 'string', contentMediaType: 'application/octet-stream' } },
    errors: ['INVALID_SIGNATURE', 'URL_EXPIRED', 'ATTACHMENT_NOT_FOUND'],
  },
  'POST /account/api-keys': {
    operationId: 'createApiKey',
    example: { name: 'triage agent' },
    summary: 'Create an API key',
    tag: 'API keys',
    body: CreateApiKeyBody,
    status: 201,
    description: 'The key, in full only here.',
    response: 'CreatedApiKey',
    errors: ['INBOX_NOT_FOUND'],
  },
  'GET /account/api-keys': { operationId: 'listApiKeys', summary: 'List active API keys (values never returned)', tag: 'API keys', status: 200, description: 'The keys.', response: 'ApiKeyList' },
  'DELETE /account/api-keys/:id': {
    operationId: 'revokeApiKey',
    summary: 'Revoke an API key',
    tag: 'API keys',
    status: 204,
    description: 'Revoked.',
    errors: ['API_KEY_NOT_FOUND', 'CANNOT_REVOKE_CURRENT_KEY'],
  },
  'POST /webhooks': {
    operationId: 'createWebhook',
    example: { url: 'https://hooks.example.com/mailroom', description: 'new mail to the triage agent', events: ['message.received'] },
    summary: 'Create a webhook',
    tag: 'Webhooks',
    body: CreateWebhookBody,
    status: 201,
    description: 'The webhook with its signing secret.',
    response: 'WebhookWithSecret',
    errors: ['INVALID_WEBHOOK_URL', 'INBOX_NOT_FOUND'],
  },
  'GET /webhooks': { operationId: 'listWebhooks', summary: 'List webhooks (no secrets)', tag: 'Webhooks', status: 200, description: 'The webhooks.', response: 'WebhookList' },
  'GET /webhooks/catalog': { operationId: 'listEventTypes', summary: 'The event types', tag: 'Webhooks', status: 200, description: 'Every event type with its meaning.', response: 'EventCatalog' },
  'GET /webhooks/logs': {
    operationId: 'listWebhookDeliveries',
    summary: 'The delivery log, most recent first',
    tag: 'Webhooks',
    query: [
      { name: 'webhookId', description: 'Only this webhook.', schema: str() },
      { name: 'status', description: 'Only attempts with this outcome.', schema: str(undefined, { enum: [...ATTEMPT_STATUSES] }) },
      { name: 'event', description: 'Only this event type.', schema: str(undefined, { enum: EVENT_NAMES }) },
      { name: 'hours', description: 'Look-back window in hours.', schema: { type: 'integer', minimum: 1 } },
      { name: 'before', description: 'Cursor: the id of the last entry already seen.', schema: str() },
      { name: 'limit', description: 'Entries to return.', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
    ],
    status: 200,
    description: 'Log entries.',
    response: 'DeliveryLog',
    errors: ['WEBHOOK_NOT_FOUND'],
  },
  'GET /webhooks/activity': {
    operationId: 'getWebhookActivity',
    summary: 'Successes and failures per hour',
    tag: 'Webhooks',
    query: [
      { name: 'webhookId', description: 'Only this webhook.', schema: str() },
      { name: 'hours', description: 'Hours to cover, the current one included.', schema: { type: 'integer', minimum: 1, default: 6 } },
    ],
    status: 200,
    description: 'Hourly buckets.',
    response: 'WebhookActivity',
    errors: ['WEBHOOK_NOT_FOUND'],
  },
  'GET /webhooks/:id': {
    operationId: 'getWebhook',
    summary: 'Get a webhook (no secret)',
    tag: 'Webhooks',
    status: 200,
    description: 'The webhook.',
    response: 'Webhook',
    errors: ['WEBHOOK_NOT_FOUND'],
  },
  'PUT /webhooks/:id': {
    operationId: 'updateWebhook',
    example: { isActive: false },
    summary: 'Update a webhook (only the given fields change)',
    tag: 'Webhooks',
    body: UpdateWebhookBody,
    status: 200,
    description: 'The updated webhook; includes `secret` only when rotateSecret was true.',
    response: 'Webhook',
    errors: ['WEBHOOK_NOT_FOUND', 'INVALID_WEBHOOK_URL', 'INBOX_NOT_FOUND'],
  },
  'GET /events': {
    operationId: 'listEvents',
    summary: "The account's events, oldest first (kept at least 7 days)",
    tag: 'Events',
    query: [...EVENT_FILTERS, { name: 'limit', description: 'Events to return.', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } }],
    status: 200,
    description: 'Events as webhooks send them (without `webhookId`). Continue with `after` = the last id.',
    response: 'EventList',
    errors: ['INBOX_NOT_FOUND'],
  },
  'GET /events/stream': {
    operationId: 'streamEvents',
    summary: 'Live events as Server-Sent Events',
    tag: 'Events',
    query: EVENT_FILTERS,
    status: 200,
    description:
      'A text/event-stream: each event is `id:` (event id), `event:` (type) and `data:` (the Event as JSON). Without `after` or a `Last-Event-ID` header it starts with events recorded from now; ' +
      'with either it first sends every matching event after that id (Last-Event-ID wins), so a reconnecting client misses and repeats nothing, across server restarts too. ' +
      'A `: keep-alive` comment comes every 15 s. A client that stops reading (over 1 MiB unsent) gets a final `event: dropped` with `{"lastEventId", "reason"}` and the stream ends; reconnect with that id.',
    response: { mediaType: 'text/event-stream', schema: { type: 'string' } },
    errors: ['INBOX_NOT_FOUND'],
  },
  'DELETE /webhooks/:id': { operationId: 'deleteWebhook', summary: 'Delete a webhook (logs are kept)', tag: 'Webhooks', status: 204, description: 'Deleted.', errors: ['WEBHOOK_NOT_FOUND'] },
  'POST /mcp': {
    operationId: 'postMcpMessage',
    summary: 'Model Context Protocol (Streamable HTTP, stateless): the mailroom tools for agents',
    tag: 'MCP',
    protocolBody: {
      description:
        'A JSON-RPC 2.0 message of the Model Context Protocol (initialize, tools/list, tools/call, notifications), or a batch of them (protocol 2025-03-26). ' +
        'Send `Accept: application/json, text/event-stream`. Read-only keys see and call only the read tools. The tools are described in docs/agents.md and by tools/list.',
      schema: { type: ['object', 'array'] },
    },
    status: 200,
    description:
      'The JSON-RPC answer as a text/event-stream (progress notifications first when the call carried a progressToken); 202 with no body for notifications. ' +
      'Protocol errors (not JSON-RPC, a missing Accept type, an unsupported MCP-Protocol-Version) are JSON-RPC error bodies with 400 or 406; a bad `Origin` is 403 FORBIDDEN.',
    response: { mediaType: 'text/event-stream', schema: { type: 'string' } },
    alsoStatus: { status: 202, description: 'Notifications only: accepted, no body.', empty: true },
    protocolErrors: [400, 406],
  },
  'GET /mcp': {
    operationId: 'getMcpStream',
    summary: 'No server-initiated stream: /mcp is stateless',
    tag: 'MCP',
    status: 405,
    description: 'Always 405 METHOD_NOT_ALLOWED (Allow: POST), as MCP asks of a server without a stream for server-initiated messages.',
    response: 'Error',
  },
  'DELETE /mcp': {
    operationId: 'deleteMcpSession',
    summary: 'No sessions to end: /mcp is stateless',
    tag: 'MCP',
    status: 405,
    description: 'Always 405 METHOD_NOT_ALLOWED (Allow: POST): the server keeps no sessions.',
    response: 'Error',
  },
};

/** Routes left out of the document on purpose: `/` (a redirect), the dashboard's page and its own endpoint. */
export const isDocumented = (r: { path: string }) => r.path !== ROOT_REDIRECT && r.path !== DASHBOARD_PREFIX && !r.path.startsWith(`${DASHBOARD_PREFIX}/`);

const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');

/** A request body's JSON Schema, exactly as zod validates it (unknown fields refused). */
function bodySchema(schema: z.ZodType): Schema {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Schema;
  return rest;
}

const RATE_HEADERS = {
  'X-RateLimit-Limit': { $ref: '#/components/headers/RateLimitLimit' },
  'X-RateLimit-Remaining': { $ref: '#/components/headers/RateLimitRemaining' },
  'X-RateLimit-Reset': { $ref: '#/components/headers/RateLimitReset' },
  'X-Request-Id': { $ref: '#/components/headers/RequestId' },
};

function errorResponses(codes: ErrorCode[]): Record<string, Schema> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const c of codes) byStatus.set(ERROR_STATUS[c], [...(byStatus.get(ERROR_STATUS[c]) ?? []), c]);
  const out: Record<string, Schema> = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[String(status)] = {
      description: `Error envelope; \`error.code\` is ${list.map((c) => `\`${c}\``).join(', ')}.`,
      headers: RATE_HEADERS,
      content: { 'application/json': { schema: ref('Error') } },
    };
  }
  return out;
}

function operationOf(route: RegisteredRoute, op: Operation): Schema {
  const isPublic = !!route.options.public;
  const params: Schema[] = [...route.path.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    description: 'Resource id (opaque string with a type prefix).',
    schema: str(),
  }));
  for (const q of op.query ?? []) params.push({ name: q.name, in: 'query', required: !!q.required, description: q.description, schema: q.schema });
  for (const h of op.headers ?? []) params.push({ name: h.name, in: 'header', required: !!h.required, description: h.description, schema: h.schema });
  // A protocol route (MCP) reads no Idempotency-Key.
  if (route.method === 'POST' && !isPublic && !route.options.protocol) {
    params.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Repeating a POST with the same key and body within the idempotency window returns the stored response (Idempotent-Replayed: true). Secrets shown once (a new API key, a webhook secret) are never stored: the replay answers them as null.',
      schema: str(undefined, { minLength: 1, maxLength: 255 }),
    });
  }

  const codes: ErrorCode[] = ['RATE_LIMITED', 'INTERNAL_ERROR', ...(op.errors ?? [])];
  if (!isPublic) codes.push('UNAUTHORIZED', 'SERVICE_UNAVAILABLE');
  // Writes refuse read-only keys; a protocol route refuses a foreign Origin instead (POST /mcp).
  if (!isPublic && (op.protocolBody || (route.method !== 'GET' && !route.options.protocol))) codes.push('FORBIDDEN');
  // Every keyed route needs a scope (ROUTE_SCOPES); MCP answers a missing one per tool, in its result.
  if (!isPublic && !route.options.protocol) codes.push('INSUFFICIENT_SCOPE');
  if (op.body || op.query || op.multipart || route.path.includes(':')) codes.push('VALIDATION_ERROR');
  if (op.body || op.protocolBody) codes.push('INVALID_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE');
  if (op.multipart) codes.push('UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE');
  if (route.method === 'POST' && !isPublic && !route.options.protocol) codes.push('IDEMPOTENCY_KEY_REUSED');

  const success: Schema = { description: op.description, headers: RATE_HEADERS };
  if (typeof op.response === 'string') success.content = { 'application/json': { schema: ref(op.response) } };
  else if (op.response) success.content = { [op.response.mediaType]: { schema: op.response.schema } };

  const out: Schema = {
    operationId: op.operationId,
    summary: op.summary,
    tags: [op.tag],
    parameters: params.length ? params : undefined,
    responses: {
      [String(op.status)]: success,
      ...(op.alsoStatus ? { [String(op.alsoStatus.status)]: { ...success, description: op.alsoStatus.description, ...(op.alsoStatus.empty ? { content: undefined } : {}) } } : {}),
      ...errorResponses([...new Set(codes)]),
    },
  };
  for (const status of op.protocolErrors ?? []) {
    const responses = out.responses as Record<string, Schema>;
    const envelope = responses[String(status)];
    responses[String(status)] = {
      description: envelope ? `${envelope.description as string} Or a JSON-RPC error body (the protocol's own errors).` : "A JSON-RPC error body (the protocol's own errors).",
      headers: RATE_HEADERS,
      content: { 'application/json': { schema: envelope ? { anyOf: [ref('Error'), ref('JsonRpcError')] } : ref('JsonRpcError') } },
    };
  }
  if (isPublic) out.security = [];
  else if (!route.options.protocol) out['x-scope'] = scopeOf(route.method, route.path);
  if (op.body) out.requestBody = { required: true, content: { 'application/json': { schema: bodySchema(op.body), ...(op.example ? { example: op.example } : {}) } } };
  if (op.protocolBody) out.requestBody = { required: true, description: op.protocolBody.description, content: { 'application/json': { schema: op.protocolBody.schema } } };
  if (op.multipart) {
    out.requestBody = {
      required: true,
      content: {
        'multipart/form-data': {
          schema: obj({ file: { type: 'string', contentMediaType: 'application/octet-stream', description: 'The file; its filename and content type are kept.' } }),
        },
      },
    };
  }
  return out;
}

/**
 * The document for the registered routes. Throws when a route has no entry in OPERATIONS, so
 * a new route cannot ship undocumented (the OpenAPI test builds it from the real registry).
 */
export function buildOpenApi(routes: RegisteredRoute[], serverUrl: string, version = API_VERSION): Schema {
  const documented = routes.filter(isDocumented);
  const keys = new Set(documented.map((r) => `${r.method} ${r.path}`));
  const missing = [...keys].filter((k) => !OPERATIONS[k]);
  if (missing.length) throw new Error(`OpenAPI: no entry in OPERATIONS (src/http/openapi.ts) for ${missing.join(', ')}`);

  const paths: Record<string, Record<string, Schema>> = {};
  for (const r of documented) {
    const p = (paths[toOpenApiPath(r.path)] ??= {});
    p[r.method.toLowerCase()] = operationOf(r, OPERATIONS[`${r.method} ${r.path}`]);
  }
  return JSON.parse(
    JSON.stringify({
      openapi: '3.1.0',
      info: {
        title: 'mailroom',
        version,
        summary: 'Email inboxes for software agents: inboxes, messages, threads, domains, attachments, API keys, webhooks.',
        description:
          'Every request body and response body is JSON except attachment upload (multipart/form-data), raw message source and downloads. ' +
          'Errors are `{"error": {"code", "message", "status", "requestId"}}`. Every response carries X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset and X-Request-Id.',
      },
      servers: [{ url: serverUrl }],
      security: [{ bearerAuth: [] }, { apiKeyHeader: [] }],
      tags: [...new Set(Object.values(OPERATIONS).map((o) => o.tag))].map((name) => ({ name })),
      paths,
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer mr_live_…' },
          apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        },
        headers: {
          RateLimitLimit: { description: 'Requests allowed per window.', schema: { type: 'integer' } },
          RateLimitRemaining: { description: 'Requests left in the window.', schema: { type: 'integer' } },
          RateLimitReset: { description: 'Unix time the window resets.', schema: { type: 'integer' } },
          RequestId: { description: 'Id of this request, also in error bodies and the log line.', schema: { type: 'string' } },
        },
        schemas: SCHEMAS,
      },
    }),
  ) as Schema;
}
