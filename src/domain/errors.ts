// The one error type domain code throws, and the closed list of codes (PRODUCT.md's table).
// http/ maps a code to its status in one place; smtp/ maps it to a reply.

export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  INVALID_JSON: 400,
  INVALID_WEBHOOK_URL: 400,
  INVALID_ADDRESS: 400,
  /** A search query `q` that does not parse (src/domain/mail/search.ts). */
  INVALID_QUERY: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  /** The API key lacks the scope a route or tool needs (src/domain/accounts/apikeys.ts); the message names it. */
  INSUFFICIENT_SCOPE: 403,
  INBOX_SUSPENDED: 403,
  INVALID_SIGNATURE: 403,
  /** A send to an address a send list refuses (src/domain/inboxes/lists.ts); the message names it. */
  RECIPIENT_BLOCKED: 403,
  /** POST /inboxes past `[limits] inboxes_per_account` (src/domain/accounts/quotas.ts). */
  INBOX_LIMIT_REACHED: 403,
  /** Past a per-account quota: stored bytes, uploads or drafts (src/domain/accounts/quotas.ts); the message names the key. */
  QUOTA_EXCEEDED: 403,
  NOT_FOUND: 404,
  INBOX_NOT_FOUND: 404,
  MESSAGE_NOT_FOUND: 404,
  THREAD_NOT_FOUND: 404,
  DOMAIN_NOT_FOUND: 404,
  ATTACHMENT_NOT_FOUND: 404,
  WEBHOOK_NOT_FOUND: 404,
  API_KEY_NOT_FOUND: 404,
  DRAFT_NOT_FOUND: 404,
  LIST_ENTRY_NOT_FOUND: 404,
  /** DELETE /suppressions/{address} of an address the account's suppression list does not hold. */
  SUPPRESSION_NOT_FOUND: 404,
  ADDRESS_TAKEN: 409,
  DOMAIN_EXISTS: 409,
  DOMAIN_NOT_VERIFIED: 409,
  CANNOT_REVOKE_CURRENT_KEY: 409,
  IDEMPOTENCY_KEY_REUSED: 409,
  /** A method the path does not serve where the protocol asks for 405 (GET and DELETE /mcp: no sessions, no server-initiated stream). */
  METHOD_NOT_ALLOWED: 405,
  /** POST /messages/{id}/cancel on a message that is not `scheduled` (src/domain/sending/scheduled.ts). */
  NOT_CANCELABLE: 409,
  /** POST /messages/{id}/release on a message that is not `held` (inbound: src/domain/screening/hold.ts; outbound: src/domain/sending/holds.ts). */
  NOT_HELD: 409,
  URL_EXPIRED: 410,
  /** An `If-Match` that no longer matches: POST /drafts/{id}/send of a draft edited since it was read. */
  PRECONDITION_FAILED: 412,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  /**
   * The attachment is of a type text is extracted from, but this file gave none: broken or
   * hostile (a PDF that does not parse, a zip bomb), too large, or too slow
   * (src/domain/mail/attachment-text.ts).
   */
  ATTACHMENT_TEXT_FAILED: 422,
  /** Every recipient of a send is on the account's suppression list (src/domain/sending/suppressions.ts): nothing was queued. */
  RECIPIENTS_SUPPRESSED: 422,
  RATE_LIMITED: 429,
  DAILY_SEND_LIMIT_EXCEEDED: 429,
  HOURLY_SEND_LIMIT_EXCEEDED: 429,
  /** One stream, long-poll or wait_for_message too many for the account (`[limits] streams_per_account`). */
  TOO_MANY_STREAMS: 429,
  INTERNAL_ERROR: 500,
  /** Storage cannot be read right now (the database failed): retry later; never a bad key. */
  SERVICE_UNAVAILABLE: 503,
  /**
   * Text extraction is busy: the account's queue is full (attachments.text_queue_per_account),
   * the request waited past attachments.text_queue_wait, or its worker process was killed from
   * outside. Retry after Retry-After (src/domain/mail/attachment-text.ts).
   */
  TEXT_EXTRACTION_BUSY: 503,

  /** A search (`q`) ran past `[limits] search_timeout` (src/domain/mail/search.ts): narrow it, or retry later. */
  SEARCH_TIMEOUT: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Seconds after which a retry may succeed: sent as Retry-After. */
  readonly retryAfter?: number;
  constructor(code: ErrorCode, message: string, opts: { retryAfter?: number } = {}) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    if (opts.retryAfter !== undefined) this.retryAfter = opts.retryAfter;
  }
}

export const isAppError = (err: unknown): err is AppError => err instanceof AppError;
