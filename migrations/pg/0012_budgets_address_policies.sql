CREATE TABLE "address_policies" (
	"address" text PRIMARY KEY NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"daily_send_limit" bigint,
	"hourly_send_limit" bigint,
	"updated_at" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "daily_send_limit" bigint;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "inbox_limit" bigint;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "sends_today" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "sends_day" text;--> statement-breakpoint
ALTER TABLE "inboxes" ADD COLUMN "approval" text DEFAULT 'none' NOT NULL;--> statement-breakpoint
ALTER TABLE "inboxes" ADD COLUMN "hourly_send_limit" bigint;--> statement-breakpoint
ALTER TABLE "inboxes" ADD COLUMN "sends_this_hour" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "inboxes" ADD COLUMN "sends_hour" text;