// Database schema (drizzle). SQL names are snake_case, TypeScript names camelCase; the mapping
// lives only here. drizzle-kit generates migrations/ from this file (`npm run db:generate`).
// Timestamps are ISO 8601 strings (UTC), so they sort as text and read back as the API shows them.
import { sql } from 'drizzle-orm';
import { blob, sqliteTable, text, integer, index, uniqueIndex, primaryKey } from 'drizzle-orm/sqlite-core';

export const accounts = sqliteTable('accounts', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  createdAt: text('created_at').notNull(),
  /** Overrides of `[limits] account_daily_send_limit` and `inboxes_per_account` (mailroom accounts set-limits); null: the config's. */
  dailySendLimit: integer('daily_send_limit'),
  inboxLimit: integer('inbox_limit'),
  /** Sends of the account on UTC day `sendsDay` (YYYY-MM-DD); another day means 0. Kept here, so deleting inboxes does not reset it. */
  sendsToday: integer('sends_today').notNull().default(0),
  sendsDay: text('sends_day'),
});

export const apiKeys = sqliteTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    name: text('name'),
    /** First 12 characters of the key: shown in listings and used to find candidates. */
    keyPrefix: text('key_prefix').notNull(),
    /** SHA-256 of the whole key (hex). The key itself is never stored. */
    keyHash: text('key_hash').notNull(),
    readOnly: integer('read_only', { mode: 'boolean' }).notNull().default(false),
    /** JSON array of `read`, `send`, `manage`, `review` (domain/accounts/scopes.ts). */
    scopes: text('scopes').notNull().default('["read","send","manage","review"]'),
    /** JSON array of inbox ids the key is limited to; null: every inbox of the account. */
    inboxIds: text('inbox_ids'),
    lastUsedAt: text('last_used_at'),
    expiresAt: text('expires_at'),
    revokedAt: text('revoked_at'),
    createdAt: text('created_at').notNull(),
  },
  (t) => [index('api_keys_prefix').on(t.keyPrefix), index('api_keys_account').on(t.accountId, t.createdAt)],
);

export const domains = sqliteTable(
  'domains',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    /**
     * Lowercase, no trailing dot. Any number of accounts may claim a name, once each; only one
     * claim of a name can be verified for sending (the first to publish its own records wins).
     */
    domain: text('domain').notNull(),
    dkimSelector: text('dkim_selector').notNull(),
    dkimPrivateKey: text('dkim_private_key').notNull(),
    dkimPublicKey: text('dkim_public_key').notNull(),
    verificationToken: text('verification_token').notNull(),
    sendingStatus: text('sending_status').notNull().default('pending'),
    receivingStatus: text('receiving_status').notNull().default('pending'),
    sendingVerifiedAt: text('sending_verified_at'),
    receivingVerifiedAt: text('receiving_verified_at'),
    lastCheckedAt: text('last_checked_at'),
    /** What the last check could not determine (DNS timeout, SERVFAIL), or null. */
    lastCheckError: text('last_check_error'),
    createdAt: text('created_at').notNull(),
  },
  (t) => [
    index('domains_domain').on(t.domain),
    uniqueIndex('domains_domain_verified')
      .on(t.domain)
      .where(sql`${t.sendingStatus} = 'verified'`),
    uniqueIndex('domains_account_domain').on(t.accountId, t.domain),
    index('domains_account').on(t.accountId, t.createdAt),
  ],
);

export const inboxes = sqliteTable(
  'inboxes',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    /** Lowercase full address; unique across the appliance. */
    address: text('address').notNull(),
    domainId: text('domain_id').references(() => domains.id, { onDelete: 'set null' }),
    displayName: text('display_name'),
    status: text('status').notNull().default('active'),
    dailySendLimit: integer('daily_send_limit').notNull(),
    sendsToday: integer('sends_today').notNull().default(0),
    /** UTC day (YYYY-MM-DD) that sendsToday counts; a different day means the count is 0. */
    sendsDay: text('sends_day'),
    totalSent: integer('total_sent').notNull().default(0),
    bounceCount: integer('bounce_count').notNull().default(0),
    complaintCount: integer('complaint_count').notNull().default(0),
    createdAt: text('created_at').notNull(),
    /** sendPolicy.approval: 'none' | 'first_contact' | 'always' (stored; holds are enforced elsewhere). */
    approval: text('approval').notNull().default('none'),
    /** sendPolicy.hourlySendLimit: sends per UTC clock hour; null: no hourly limit. */
    hourlySendLimit: integer('hourly_send_limit'),
    /** Sends in UTC hour `sendsHour` (YYYY-MM-DDTHH); another hour means 0. */
    sendsThisHour: integer('sends_this_hour').notNull().default(0),
    sendsHour: text('sends_hour'),
    /** Screening of inbound mail: 'off' | 'monitor' | 'hold'; null: `[screening] mode`. */
    screening: text('screening'),
  },
  (t) => [uniqueIndex('inboxes_address').on(t.address), index('inboxes_account').on(t.accountId, t.createdAt)],
);

export const threads = sqliteTable(
  'threads',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    inboxId: text('inbox_id')
      .notNull()
      .references(() => inboxes.id, { onDelete: 'cascade' }),
    subject: text('subject').notNull().default(''),
    messageCount: integer('message_count').notNull().default(0),
    lastMessageAt: text('last_message_at').notNull(),
    createdAt: text('created_at').notNull(),
  },
  (t) => [index('threads_inbox_activity').on(t.inboxId, t.lastMessageAt), index('threads_account_activity').on(t.accountId, t.lastMessageAt)],
);

export const messages = sqliteTable(
  'messages',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    inboxId: text('inbox_id')
      .notNull()
      .references(() => inboxes.id, { onDelete: 'cascade' }),
    threadId: text('thread_id')
      .notNull()
      .references(() => threads.id, { onDelete: 'cascade' }),
    direction: text('direction').notNull(),
    fromAddress: text('from_address').notNull(),
    fromName: text('from_name'),
    /** JSON arrays of addresses. */
    toAddresses: text('to_addresses').notNull().default('[]'),
    ccAddresses: text('cc_addresses').notNull().default('[]'),
    bccAddresses: text('bcc_addresses').notNull().default('[]'),
    subject: text('subject').notNull().default(''),
    bodyText: text('body_text'),
    bodyHtml: text('body_html'),
    /** 'email' | 'dry-run' on outbound messages; null on inbound. */
    delivery: text('delivery'),
    status: text('status').notNull(),
    /** RFC 5322 Message-ID including the angle brackets. */
    messageIdHeader: text('message_id_header').notNull(),
    inReplyTo: text('in_reply_to'),
    /** JSON array of Message-IDs from the References header. */
    references: text('references').notNull().default('[]'),
    /** JSON array of {address, status, response} (outbound). */
    recipients: text('recipients').notNull().default('[]'),
    /** JSON {spf, dkim, dmarc} (inbound). */
    authentication: text('authentication'),
    /** Path of the raw RFC 5322 source, relative to data_dir. */
    rawPath: text('raw_path'),
    size: integer('size').notNull().default(0),
    /**
     * Inbound: SHA-256 (hex) of the message as the sender handed it over. With the Message-ID it
     * recognises a sender's redelivery after a lost reply (src/domain/inbound/inbound.ts). Null on outbound.
     */
    contentHash: text('content_hash'),
    /**
     * Inbound messages arrive unread, outbound ones are read. Messages stored before the column
     * existed read as read (migration 0007): an agent asking for unread mail after an upgrade
     * must not be handed its whole history again.
     */
    unread: integer('unread', { mode: 'boolean' }).notNull().default(false),
    /**
     * Outbound messages sent with `sendAt`: when they leave (status `scheduled` until then; the
     * release is a job of the job table due at this time, src/domain/sending/scheduled.ts). Else null.
     */
    sendAt: text('send_at'),
    /**
     * Outbound sends the policy held for a person (src/domain/sending/holds.ts): JSON
     * {reasons: [{code, detail}]}, kept after a release or cancel as a record. Else null.
     */
    hold: text('hold'),
    createdAt: text('created_at').notNull(),
    updatedAt: text('updated_at').notNull(),
    /** Inbound: JSON {verdict, score, reasons} of the screener (src/domain/screening/); null when not screened. */
    screening: text('screening'),
  },
  (t) => [
    index('messages_inbox_created').on(t.inboxId, t.createdAt),
    index('messages_inbox_status_created').on(t.inboxId, t.status, t.createdAt),
    index('messages_thread').on(t.threadId, t.createdAt),
    index('messages_account_msgid').on(t.accountId, t.messageIdHeader),
    // A raw file may be shared by the copies of one delivery: deleting one asks who else names it.
    index('messages_raw_path').on(t.rawPath),
    // Account-wide lists (GET /messages), newest first.
    index('messages_account_created').on(t.accountId, t.createdAt),
    // `unread=true`, the question an agent asks most: partial, so only unread mail is indexed and
    // marking a message read takes it out. Queries must say `unread = 1` literally to use them.
    index('messages_inbox_unread')
      .on(t.inboxId, t.createdAt)
      .where(sql`unread = 1`),
    index('messages_account_unread')
      .on(t.accountId, t.createdAt)
      .where(sql`unread = 1`),
  ],
);

/**
 * Labels of messages, one row per (message, label). A join table rather than a JSON column:
 * `label=x` on a list is then an index range read in list order — (inbox_id | account_id,
 * label, created_at) — where a JSON column would need json_each over every message of the
 * inbox. inbox_id, thread_id and created_at copy the message's (they never change) so the
 * filter needs no join to order, and a thread's labels are one index read (thread_id).
 */
export const messageLabels = sqliteTable(
  'message_labels',
  {
    messageId: text('message_id')
      .notNull()
      .references(() => messages.id, { onDelete: 'cascade' }),
    label: text('label').notNull(),
    accountId: text('account_id').notNull(),
    inboxId: text('inbox_id').notNull(),
    threadId: text('thread_id').notNull(),
    createdAt: text('created_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.messageId, t.label] }),
    index('message_labels_inbox').on(t.inboxId, t.label, t.createdAt),
    index('message_labels_account').on(t.accountId, t.label, t.createdAt),
    index('message_labels_thread').on(t.threadId),
  ],
);

/**
 * Messages per inbox and status, kept by triggers on `messages` (migration 0001), so list
 * totals are one index lookup instead of a COUNT(*) that grows with the mailbox (bench/: 100–
 * 160 ms at 10⁶ messages). Every write path, the CLI and bulk loads included, keeps it right.
 * On PostgreSQL a count is split over up to 64 rows by a `slot` column this file does not have
 * (one per server connection, migrations/pg/0022_counter_slots.sql): readers sum them.
 */
export const inboxMessageCounts = sqliteTable(
  'inbox_message_counts',
  {
    inboxId: text('inbox_id')
      .notNull()
      .references(() => inboxes.id, { onDelete: 'cascade' }),
    status: text('status').notNull(),
    n: integer('n').notNull(),
  },
  (t) => [primaryKey({ columns: [t.inboxId, t.status] })],
);

/**
 * Bytes each account stores (messages' sources and attachments), kept by triggers on `messages`
 * and `attachments` (migration 0013), so the storage quota (src/domain/accounts/quotas.ts) is one
 * primary-key read per RCPT instead of a SUM over the account's mail. Every write path, deletions
 * by cascade included, keeps it right. No foreign key: a row follows `messages.account_id`. On
 * PostgreSQL split into slots like inboxMessageCounts, and summed by its reader.
 */
export const accountUsage = sqliteTable('account_usage', {
  accountId: text('account_id').primaryKey(),
  bytes: integer('bytes').notNull(),
});

export const attachments = sqliteTable(
  'attachments',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    /** Set for attachments that arrived with (or were sent in) a message. */
    messageId: text('message_id').references(() => messages.id, { onDelete: 'cascade' }),
    filename: text('filename').notNull(),
    contentType: text('content_type').notNull(),
    size: integer('size').notNull(),
    sha256: text('sha256').notNull(),
    /** Path of the stored bytes, relative to data_dir. */
    storagePath: text('storage_path').notNull(),
    createdAt: text('created_at').notNull(),
  },
  (t) => [
    index('attachments_message').on(t.messageId),
    index('attachments_account').on(t.accountId),
    index('attachments_storage_path').on(t.storagePath),
    // The account's uploads (no message of their own), for the uploads quota (src/domain/accounts/quotas.ts).
    index('attachments_uploads')
      .on(t.accountId)
      .where(sql`message_id IS NULL`),
  ],
);

/** One message may name several uploaded attachments; one upload may be sent many times. */
export const messageAttachments = sqliteTable(
  'message_attachments',
  {
    messageId: text('message_id')
      .notNull()
      .references(() => messages.id, { onDelete: 'cascade' }),
    attachmentId: text('attachment_id')
      .notNull()
      .references(() => attachments.id, { onDelete: 'cascade' }),
    position: integer('position').notNull(),
  },
  (t) => [primaryKey({ columns: [t.messageId, t.attachmentId] }), index('message_attachments_att').on(t.attachmentId)],
);

export const idempotencyKeys = sqliteTable(
  'idempotency_keys',
  {
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    /** SHA-256 of method, path and body: the same key with another request is a conflict. */
    requestHash: text('request_hash').notNull(),
    /** null while the first request is still running. */
    responseStatus: integer('response_status'),
    responseBody: text('response_body'),
    /** The `id` of the resource the response shows (a sent message): deleting it deletes the copy. */
    resourceId: text('resource_id'),
    createdAt: text('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.key] }), index('idempotency_created').on(t.createdAt), index('idempotency_resource').on(t.resourceId)],
);

/** Every state change worth telling a webhook about, written in the change's transaction. */
export const events = sqliteTable(
  'events',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    /** JSON payload (the `data` of the webhook envelope). */
    data: text('data').notNull(),
    /**
     * The message a message.* event is about: its payload copies the message, so the event goes
     * when the message does (deleted mail leaves no copy behind, src/domain/events/events.ts).
     */
    messageId: text('message_id').references(() => messages.id, { onDelete: 'cascade' }),
    createdAt: text('created_at').notNull(),
  },
  (t) => [index('events_account_created').on(t.accountId, t.createdAt), index('events_message').on(t.messageId), index('events_created').on(t.createdAt)],
);

export const webhooks = sqliteTable(
  'webhooks',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    description: text('description'),
    /** JSON array of event types, or null for all events. */
    events: text('events'),
    /** JSON array of inbox ids whose events it receives, or null for every inbox (and account-level events). */
    inboxIds: text('inbox_ids'),
    isActive: integer('is_active', { mode: 'boolean' }).notNull().default(true),
    secret: text('secret').notNull(),
    /** Set when deleted: logs stay readable, no new deliveries are made. */
    deletedAt: text('deleted_at'),
    createdAt: text('created_at').notNull(),
    updatedAt: text('updated_at').notNull(),
  },
  (t) => [index('webhooks_account').on(t.accountId, t.createdAt)],
);

/** The delivery log: one row per attempt to POST one event to one webhook. */
export const webhookAttempts = sqliteTable(
  'webhook_attempts',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    webhookId: text('webhook_id').notNull(),
    eventId: text('event_id').notNull(),
    eventType: text('event_type').notNull(),
    jobId: text('job_id'),
    /** 'success' | 'failed' | 'pending' (failed but will be retried). */
    status: text('status').notNull(),
    httpStatus: integer('http_status'),
    durationMs: integer('duration_ms').notNull().default(0),
    attempt: integer('attempt').notNull(),
    error: text('error'),
    createdAt: text('created_at').notNull(),
  },
  (t) => [
    index('webhook_attempts_account_created').on(t.accountId, t.createdAt),
    index('webhook_attempts_created').on(t.createdAt),
    index('webhook_attempts_webhook_created').on(t.webhookId, t.createdAt),
  ],
);

/**
 * The one durable job table: outbound sends, webhook deliveries, anything retried.
 * Claiming a job increments attempts, sets status 'running' with a lease, and already sets
 * runAt to the next retry time in the same transaction (mox's queue), so a crash mid-attempt
 * neither loses the job nor retries it in a tight loop.
 */
export const jobs = sqliteTable(
  'jobs',
  {
    id: text('id').primaryKey(),
    kind: text('kind').notNull(),
    /** JSON payload for the handler. */
    payload: text('payload').notNull(),
    /** 'queued' | 'running' | 'done' | 'failed' */
    status: text('status').notNull().default('queued'),
    /** Concurrency partition, e.g. the recipient domain of a send. */
    partition: text('partition').notNull().default(''),
    attempts: integer('attempts').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull(),
    /** Epoch milliseconds: when the job is next due (queued) or retried if its lease expires. */
    runAt: integer('run_at').notNull(),
    leaseUntil: integer('lease_until'),
    lastError: text('last_error'),
    createdAt: text('created_at').notNull(),
    updatedAt: text('updated_at').notNull(),
    finishedAt: text('finished_at'),
  },
  // jobs_kind_due: the claim reads each kind's due jobs in run_at order (src/store/repo/jobs.ts), so
  // a backlog of one kind (a burst of spooled mail) never hides another's (webhooks, sends).
  // jobs_kind_partition_due: and when one partition's backlog (a slow domain or receiver at its
  // limit) fills that read, the claim walks the kind's partitions one by one (claimDue).
  (t) => [index('jobs_due').on(t.status, t.runAt), index('jobs_kind_due').on(t.kind, t.status, t.runAt), index('jobs_kind_partition_due').on(t.kind, t.status, t.partition, t.runAt)],
);

/**
 * Raw bytes of inbound messages accepted under load (src/domain/inbound/spool.ts), trace fields
 * first: one row per `inbound` job, written in the transaction that creates the job. The
 * transaction that stores the message keeps the row as the message's stored source
 * (`messages.raw_path` = `raw/spooled/<job id>`, src/store/blobs/spooled.ts), or deletes it when no
 * row was stored. So the row outlives its job: no foreign key to it (migration 0026).
 */
export const spooledMessages = sqliteTable('spooled_messages', {
  jobId: text('job_id').primaryKey(),
  raw: blob('raw', { mode: 'buffer' }).notNull(),
  createdAt: text('created_at').notNull(),
});

/**
 * Drafts (src/domain/sending/drafts.ts): a send body kept for later, every field optional. Addresses
 * are JSON arrays as the client wrote them (display names kept); `threadId` and `inReplyTo`
 * (a message id) are checked again when the draft is sent, so they carry no foreign key.
 */
export const drafts = sqliteTable(
  'drafts',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    inboxId: text('inbox_id')
      .notNull()
      .references(() => inboxes.id, { onDelete: 'cascade' }),
    toAddresses: text('to_addresses').notNull().default('[]'),
    ccAddresses: text('cc_addresses').notNull().default('[]'),
    bccAddresses: text('bcc_addresses').notNull().default('[]'),
    subject: text('subject'),
    bodyText: text('body_text'),
    bodyHtml: text('body_html'),
    threadId: text('thread_id'),
    inReplyTo: text('in_reply_to'),
    sendAt: text('send_at'),
    createdAt: text('created_at').notNull(),
    updatedAt: text('updated_at').notNull(),
  },
  (t) => [index('drafts_inbox_created').on(t.inboxId, t.createdAt)],
);

/**
 * The attachments a draft names, in order. While a row names an attachment that arrived with a
 * message, deleting that message keeps the attachment (trigger drafts_keep_attachments,
 * migration 0010): it becomes an upload of the account, so the draft can still be sent.
 */
export const draftAttachments = sqliteTable(
  'draft_attachments',
  {
    draftId: text('draft_id')
      .notNull()
      .references(() => drafts.id, { onDelete: 'cascade' }),
    attachmentId: text('attachment_id')
      .notNull()
      .references(() => attachments.id, { onDelete: 'cascade' }),
    position: integer('position').notNull(),
  },
  (t) => [primaryKey({ columns: [t.draftId, t.attachmentId] }), index('draft_attachments_att').on(t.attachmentId)],
);

/**
 * Allow and block lists (src/domain/inboxes/lists.ts): one row per entry, an address or a domain,
 * lowercase. `inboxId` null = the whole account. One entry per (account, inbox, direction,
 * kind, entry): the unique index treats "whole account" as one value.
 */
export const listEntries = sqliteTable(
  'list_entries',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    inboxId: text('inbox_id').references(() => inboxes.id, { onDelete: 'cascade' }),
    /** 'receive' | 'send' */
    direction: text('direction').notNull(),
    /** 'allow' | 'block' */
    kind: text('kind').notNull(),
    entry: text('entry').notNull(),
    /**
     * Allow entries: the sender must be authenticated (DMARC pass, or SPF or DKIM pass aligned
     * with the header From's domain) for the entry to match. True by default, existing rows too.
     */
    requireAuth: integer('require_auth', { mode: 'boolean' }).notNull().default(true),
    createdAt: text('created_at').notNull(),
  },
  (t) => [uniqueIndex('list_entries_unique').on(t.accountId, sql`coalesce(${t.inboxId}, '')`, t.direction, t.kind, t.entry), index('list_entries_account').on(t.accountId, t.direction, t.createdAt)],
);

/**
 * The audit log (src/domain/audit/audit.ts): privileged acts and policy decisions, each written
 * in the transaction of the change it records. Kept `retention.audit`.
 */
export const auditLog = sqliteTable(
  'audit_log',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    createdAt: text('created_at').notNull(),
    /** 'key' | 'cli' | 'dashboard' | 'system' */
    actorType: text('actor_type').notNull(),
    /** The key's id for a key; null otherwise. */
    actorId: text('actor_id'),
    action: text('action').notNull(),
    /** The id (or address) of what was acted on. */
    target: text('target').notNull(),
    /** JSON object. */
    detail: text('detail').notNull(),
  },
  (t) => [index('audit_log_account').on(t.accountId, t.id), index('audit_log_created').on(t.createdAt)],
);

/**
 * The suppression list of an account (src/domain/sending/suppressions.ts): addresses no send
 * attempts, lowercase, one row per (account, address). `messageId` names the message whose
 * bounce or complaint added it; deleting that message clears it (the entry stays).
 */
export const suppressions = sqliteTable(
  'suppressions',
  {
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    address: text('address').notNull(),
    /** 'manual' | 'bounce' | 'complaint' | 'unsubscribe' */
    reason: text('reason').notNull(),
    messageId: text('message_id').references(() => messages.id, { onDelete: 'set null' }),
    createdAt: text('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.address] }), index('suppressions_account_created').on(t.accountId, t.createdAt), index('suppressions_message').on(t.messageId)],
);

/**
 * What support actions (CLI) set on an address outlive its inbox: a suspension and lowered limits,
 * applied again when an inbox with the same (lower-cased) address is created.
 */
export const addressPolicies = sqliteTable('address_policies', {
  address: text('address').primaryKey(),
  /** 'active' | 'suspended' */
  status: text('status').notNull().default('active'),
  /** null: the default of new inboxes. */
  dailySendLimit: integer('daily_send_limit'),
  hourlySendLimit: integer('hourly_send_limit'),
  updatedAt: text('updated_at').notNull(),
});

/**
 * DMARC aggregate reports (RFC 7489 §7.2) received for a verified custom domain at
 * dmarc-reports@<domain> (src/domain/domains/dmarc-reports.ts). One row per report; a report sent
 * again (same reporter org and report id) is stored once.
 */
export const dmarcReports = sqliteTable(
  'dmarc_reports',
  {
    id: text('id').primaryKey(),
    domainId: text('domain_id')
      .notNull()
      .references(() => domains.id, { onDelete: 'cascade' }),
    orgName: text('org_name').notNull(),
    reportId: text('report_id').notNull(),
    /** ISO times of the report's date_range. */
    beginAt: text('begin_at').notNull(),
    endAt: text('end_at').notNull(),
    /** The published policy the reporter saw (p=). */
    policy: text('policy'),
    receivedAt: text('received_at').notNull(),
  },
  (t) => [uniqueIndex('dmarc_reports_unique').on(t.domainId, t.orgName, t.reportId), index('dmarc_reports_domain_begin').on(t.domainId, t.beginAt), index('dmarc_reports_received').on(t.receivedAt)],
);

/** The rows (record elements) of a DMARC aggregate report: one source IP and its evaluated results. */
export const dmarcRecords = sqliteTable(
  'dmarc_records',
  {
    reportId: text('report_id')
      .notNull()
      .references(() => dmarcReports.id, { onDelete: 'cascade' }),
    seq: integer('seq').notNull(),
    sourceIp: text('source_ip').notNull(),
    count: integer('count').notNull(),
    /** none | quarantine | reject */
    disposition: text('disposition').notNull(),
    /** policy_evaluated: DKIM and SPF aligned and passing ('pass' | 'fail'). */
    dkim: text('dkim').notNull(),
    spf: text('spf').notNull(),
    headerFrom: text('header_from').notNull(),
  },
  (t) => [primaryKey({ columns: [t.reportId, t.seq] })],
);

/** TLS-RPT reports (RFC 8460) received for a verified custom domain at tls-reports@<domain>. */
export const tlsReports = sqliteTable(
  'tls_reports',
  {
    id: text('id').primaryKey(),
    domainId: text('domain_id')
      .notNull()
      .references(() => domains.id, { onDelete: 'cascade' }),
    orgName: text('org_name').notNull(),
    reportId: text('report_id').notNull(),
    beginAt: text('begin_at').notNull(),
    endAt: text('end_at').notNull(),
    successCount: integer('success_count').notNull(),
    failureCount: integer('failure_count').notNull(),
    /** JSON: [{type, domain, mxHost?, success, failure, failures: [{resultType, count, sendingMta?, receivingMx?}]}] */
    policies: text('policies').notNull(),
    receivedAt: text('received_at').notNull(),
  },
  (t) => [uniqueIndex('tls_reports_unique').on(t.domainId, t.orgName, t.reportId), index('tls_reports_domain_begin').on(t.domainId, t.beginAt), index('tls_reports_received').on(t.receivedAt)],
);

/**
 * TLS-RPT (RFC 8460), sending side: sessions of outbound deliveries counted per UTC day,
 * recipient domain, policy type and result (src/outbound/tls-rpt.ts). The daily report job
 * sums a day's rows into one report per domain that asks for them, then deletes them.
 */
export const tlsResults = sqliteTable(
  'tls_results',
  {
    /** UTC day, YYYY-MM-DD. */
    day: text('day').notNull(),
    policyDomain: text('policy_domain').notNull(),
    /** 'sts' | 'tlsa' | 'no-policy-found' */
    policyType: text('policy_type').notNull(),
    /** '' for successful sessions, else the RFC 8460 result type. */
    resultType: text('result_type').notNull(),
    /** The MX host and address a failure concerns ('' for successes and policy fetch failures). */
    receivingMx: text('receiving_mx').notNull().default(''),
    receivingIp: text('receiving_ip').notNull().default(''),
    /** JSON arrays as last seen: the policy's lines (policy-string) and its MX patterns (mx-host). */
    policyStrings: text('policy_strings').notNull().default('[]'),
    mxHosts: text('mx_hosts').notNull().default('[]'),
    sessions: integer('sessions').notNull().default(0),
    /** The last failure's reason (additional-information). */
    detail: text('detail'),
  },
  (t) => [primaryKey({ columns: [t.day, t.policyDomain, t.policyType, t.resultType, t.receivingMx, t.receivingIp] })],
);

/**
 * MTA-STS policies (RFC 8461 §5.1) of recipient domains, kept until their max_age so that a
 * restart, or another node, does not forget a policy an attacker could then block the fetch of.
 */
export const mtaStsPolicies = sqliteTable('mta_sts_policies', {
  domain: text('domain').primaryKey(),
  /** The `id` of the `_mta-sts` TXT record the policy was fetched for. */
  policyId: text('policy_id').notNull(),
  /** The policy file as served. */
  policy: text('policy').notNull(),
  /** Epoch milliseconds after which the policy is no longer used. */
  expiresAt: integer('expires_at').notNull(),
});

/**
 * IMAP folders of an inbox (src/domain/imap/): INBOX, Sent, Drafts and one per label, each with
 * the UIDVALIDITY clients cache against and the next UID to give. A row appears when a folder is
 * first selected; UIDs then come from this row on every node, so they survive restarts.
 */
export const imapMailboxes = sqliteTable(
  'imap_mailboxes',
  {
    inboxId: text('inbox_id')
      .notNull()
      .references(() => inboxes.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    uidValidity: integer('uid_validity').notNull(),
    uidNext: integer('uid_next').notNull(),
  },
  (t) => [primaryKey({ columns: [t.inboxId, t.name] })],
);

/**
 * The UID of each message in each IMAP folder it is in. A message entering a folder (new mail, a
 * label added) gets the folder's next UID, so UIDs only grow; leaving it (deleted, label removed)
 * drops its row, so coming back gives it a new one, as RFC 9051 §2.3.1.1 asks.
 */
export const imapUids = sqliteTable(
  'imap_uids',
  {
    inboxId: text('inbox_id').notNull(),
    mailbox: text('mailbox').notNull(),
    uid: integer('uid').notNull(),
    messageId: text('message_id')
      .notNull()
      .references(() => messages.id, { onDelete: 'cascade' }),
  },
  (t) => [primaryKey({ columns: [t.inboxId, t.mailbox, t.uid] }), uniqueIndex('imap_uids_message').on(t.messageId, t.mailbox)],
);
