CREATE TABLE `address_policies` (
	`address` text PRIMARY KEY NOT NULL,
	`status` text DEFAULT 'active' NOT NULL,
	`daily_send_limit` integer,
	`hourly_send_limit` integer,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
ALTER TABLE `accounts` ADD `daily_send_limit` integer;--> statement-breakpoint
ALTER TABLE `accounts` ADD `inbox_limit` integer;--> statement-breakpoint
ALTER TABLE `accounts` ADD `sends_today` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `accounts` ADD `sends_day` text;--> statement-breakpoint
ALTER TABLE `inboxes` ADD `approval` text DEFAULT 'none' NOT NULL;--> statement-breakpoint
ALTER TABLE `inboxes` ADD `hourly_send_limit` integer;--> statement-breakpoint
ALTER TABLE `inboxes` ADD `sends_this_hour` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `inboxes` ADD `sends_hour` text;