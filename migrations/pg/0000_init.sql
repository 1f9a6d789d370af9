CREATE TABLE "accounts" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "api_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"name" text,
	"key_prefix" text NOT NULL,
	"key_hash" text NOT NULL,
	"read_only" integer DEFAULT 0 NOT NULL,
	"last_used_at" text,
	"expires_at" text,
	"revoked_at" text,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "attachments" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"message_id" text,
	"filename" text NOT NULL,
	"content_type" text NOT NULL,
	"size" bigint NOT NULL,
	"sha256" text NOT NULL,
	"storage_path" text NOT NULL,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "domains" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"domain" text NOT NULL,
	"dkim_selector" text NOT NULL,
	"dkim_private_key" text NOT NULL,
	"dkim_public_key" text NOT NULL,
	"verification_token" text NOT NULL,
	"sending_status" text DEFAULT 'pending' NOT NULL,
	"receiving_status" text DEFAULT 'pending' NOT NULL,
	"sending_verified_at" text,
	"receiving_verified_at" text,
	"last_checked_at" text,
	"last_check_error" text,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "events" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"type" text NOT NULL,
	"data" text NOT NULL,
	"message_id" text,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "idempotency_keys" (
	"account_id" text NOT NULL,
	"key" text NOT NULL,
	"request_hash" text NOT NULL,
	"response_status" bigint,
	"response_body" text,
	"resource_id" text,
	"created_at" text NOT NULL,
	CONSTRAINT "idempotency_keys_account_id_key_pk" PRIMARY KEY("account_id","key")
);
--> statement-breakpoint
CREATE TABLE "inbox_message_counts" (
	"inbox_id" text NOT NULL,
	"status" text NOT NULL,
	"n" bigint NOT NULL,
	CONSTRAINT "inbox_message_counts_inbox_id_status_pk" PRIMARY KEY("inbox_id","status")
);
--> statement-breakpoint
CREATE TABLE "inboxes" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"address" text NOT NULL,
	"domain_id" text,
	"display_name" text,
	"status" text DEFAULT 'active' NOT NULL,
	"daily_send_limit" bigint NOT NULL,
	"sends_today" bigint DEFAULT 0 NOT NULL,
	"sends_day" text,
	"total_sent" bigint DEFAULT 0 NOT NULL,
	"bounce_count" bigint DEFAULT 0 NOT NULL,
	"complaint_count" bigint DEFAULT 0 NOT NULL,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "jobs" (
	"id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"payload" text NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"partition" text DEFAULT '' NOT NULL,
	"attempts" bigint DEFAULT 0 NOT NULL,
	"max_attempts" bigint NOT NULL,
	"run_at" bigint NOT NULL,
	"lease_until" bigint,
	"last_error" text,
	"created_at" text NOT NULL,
	"updated_at" text NOT NULL,
	"finished_at" text
);
--> statement-breakpoint
CREATE TABLE "message_attachments" (
	"message_id" text NOT NULL,
	"attachment_id" text NOT NULL,
	"position" bigint NOT NULL,
	CONSTRAINT "message_attachments_message_id_attachment_id_pk" PRIMARY KEY("message_id","attachment_id")
);
--> statement-breakpoint
CREATE TABLE "message_labels" (
	"message_id" text NOT NULL,
	"label" text NOT NULL,
	"account_id" text NOT NULL,
	"inbox_id" text NOT NULL,
	"thread_id" text NOT NULL,
	"created_at" text NOT NULL,
	CONSTRAINT "message_labels_message_id_label_pk" PRIMARY KEY("message_id","label")
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"inbox_id" text NOT NULL,
	"thread_id" text NOT NULL,
	"direction" text NOT NULL,
	"from_address" text NOT NULL,
	"from_name" text,
	"to_addresses" text DEFAULT '[]' NOT NULL,
	"cc_addresses" text DEFAULT '[]' NOT NULL,
	"bcc_addresses" text DEFAULT '[]' NOT NULL,
	"subject" text DEFAULT '' NOT NULL,
	"body_text" text,
	"body_html" text,
	"delivery" text,
	"status" text NOT NULL,
	"message_id_header" text NOT NULL,
	"in_reply_to" text,
	"references" text DEFAULT '[]' NOT NULL,
	"recipients" text DEFAULT '[]' NOT NULL,
	"authentication" text,
	"raw_path" text,
	"size" bigint DEFAULT 0 NOT NULL,
	"content_hash" text,
	"unread" integer DEFAULT 0 NOT NULL,
	"created_at" text NOT NULL,
	"updated_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "spooled_messages" (
	"job_id" text PRIMARY KEY NOT NULL,
	"raw" "bytea" NOT NULL,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "threads" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"inbox_id" text NOT NULL,
	"subject" text DEFAULT '' NOT NULL,
	"message_count" bigint DEFAULT 0 NOT NULL,
	"last_message_at" text NOT NULL,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_attempts" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"webhook_id" text NOT NULL,
	"event_id" text NOT NULL,
	"event_type" text NOT NULL,
	"job_id" text,
	"status" text NOT NULL,
	"http_status" bigint,
	"duration_ms" bigint DEFAULT 0 NOT NULL,
	"attempt" bigint NOT NULL,
	"error" text,
	"created_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhooks" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"url" text NOT NULL,
	"description" text,
	"events" text,
	"inbox_ids" text,
	"is_active" integer DEFAULT 1 NOT NULL,
	"secret" text NOT NULL,
	"deleted_at" text,
	"created_at" text NOT NULL,
	"updated_at" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "attachments" ADD CONSTRAINT "attachments_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "attachments" ADD CONSTRAINT "attachments_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "domains" ADD CONSTRAINT "domains_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "events" ADD CONSTRAINT "events_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inbox_message_counts" ADD CONSTRAINT "inbox_message_counts_inbox_id_inboxes_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inboxes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inboxes" ADD CONSTRAINT "inboxes_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "inboxes" ADD CONSTRAINT "inboxes_domain_id_domains_id_fk" FOREIGN KEY ("domain_id") REFERENCES "public"."domains"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_attachments" ADD CONSTRAINT "message_attachments_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_attachments" ADD CONSTRAINT "message_attachments_attachment_id_attachments_id_fk" FOREIGN KEY ("attachment_id") REFERENCES "public"."attachments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_labels" ADD CONSTRAINT "message_labels_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_inbox_id_inboxes_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inboxes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_thread_id_threads_id_fk" FOREIGN KEY ("thread_id") REFERENCES "public"."threads"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "spooled_messages" ADD CONSTRAINT "spooled_messages_job_id_jobs_id_fk" FOREIGN KEY ("job_id") REFERENCES "public"."jobs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "threads" ADD CONSTRAINT "threads_inbox_id_inboxes_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inboxes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhooks" ADD CONSTRAINT "webhooks_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "api_keys_prefix" ON "api_keys" USING btree ("key_prefix");--> statement-breakpoint
CREATE INDEX "api_keys_account" ON "api_keys" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "attachments_message" ON "attachments" USING btree ("message_id");--> statement-breakpoint
CREATE INDEX "attachments_account" ON "attachments" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "attachments_storage_path" ON "attachments" USING btree ("storage_path");--> statement-breakpoint
CREATE UNIQUE INDEX "domains_domain" ON "domains" USING btree ("domain");--> statement-breakpoint
CREATE INDEX "domains_account" ON "domains" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "events_account_created" ON "events" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "events_message" ON "events" USING btree ("message_id");--> statement-breakpoint
CREATE INDEX "events_created" ON "events" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "idempotency_created" ON "idempotency_keys" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "idempotency_resource" ON "idempotency_keys" USING btree ("resource_id");--> statement-breakpoint
CREATE UNIQUE INDEX "inboxes_address" ON "inboxes" USING btree ("address");--> statement-breakpoint
CREATE INDEX "inboxes_account" ON "inboxes" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "jobs_due" ON "jobs" USING btree ("status","run_at");--> statement-breakpoint
CREATE INDEX "jobs_kind_due" ON "jobs" USING btree ("kind","status","run_at");--> statement-breakpoint
CREATE INDEX "message_attachments_att" ON "message_attachments" USING btree ("attachment_id");--> statement-breakpoint
CREATE INDEX "message_labels_inbox" ON "message_labels" USING btree ("inbox_id","label","created_at");--> statement-breakpoint
CREATE INDEX "message_labels_account" ON "message_labels" USING btree ("account_id","label","created_at");--> statement-breakpoint
CREATE INDEX "message_labels_thread" ON "message_labels" USING btree ("thread_id");--> statement-breakpoint
CREATE INDEX "messages_inbox_created" ON "messages" USING btree ("inbox_id","created_at");--> statement-breakpoint
CREATE INDEX "messages_inbox_status_created" ON "messages" USING btree ("inbox_id","status","created_at");--> statement-breakpoint
CREATE INDEX "messages_thread" ON "messages" USING btree ("thread_id","created_at");--> statement-breakpoint
CREATE INDEX "messages_account_msgid" ON "messages" USING btree ("account_id","message_id_header");--> statement-breakpoint
CREATE INDEX "messages_raw_path" ON "messages" USING btree ("raw_path");--> statement-breakpoint
CREATE INDEX "messages_account_created" ON "messages" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "messages_inbox_unread" ON "messages" USING btree ("inbox_id","created_at") WHERE unread = 1;--> statement-breakpoint
CREATE INDEX "messages_account_unread" ON "messages" USING btree ("account_id","created_at") WHERE unread = 1;--> statement-breakpoint
CREATE INDEX "threads_inbox_activity" ON "threads" USING btree ("inbox_id","last_message_at");--> statement-breakpoint
CREATE INDEX "threads_account_activity" ON "threads" USING btree ("account_id","last_message_at");--> statement-breakpoint
CREATE INDEX "webhook_attempts_account_created" ON "webhook_attempts" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "webhook_attempts_created" ON "webhook_attempts" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "webhook_attempts_webhook_created" ON "webhook_attempts" USING btree ("webhook_id","created_at");--> statement-breakpoint
CREATE INDEX "webhooks_account" ON "webhooks" USING btree ("account_id","created_at");