CREATE TABLE `draft_attachments` (
	`draft_id` text NOT NULL,
	`attachment_id` text NOT NULL,
	`position` integer NOT NULL,
	PRIMARY KEY(`draft_id`, `attachment_id`),
	FOREIGN KEY (`draft_id`) REFERENCES `drafts`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`attachment_id`) REFERENCES `attachments`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `draft_attachments_att` ON `draft_attachments` (`attachment_id`);--> statement-breakpoint
CREATE TABLE `drafts` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`inbox_id` text NOT NULL,
	`to_addresses` text DEFAULT '[]' NOT NULL,
	`cc_addresses` text DEFAULT '[]' NOT NULL,
	`bcc_addresses` text DEFAULT '[]' NOT NULL,
	`subject` text,
	`body_text` text,
	`body_html` text,
	`thread_id` text,
	`in_reply_to` text,
	`send_at` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`inbox_id`) REFERENCES `inboxes`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `drafts_inbox_created` ON `drafts` (`inbox_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `list_entries` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`inbox_id` text,
	`direction` text NOT NULL,
	`kind` text NOT NULL,
	`entry` text NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`inbox_id`) REFERENCES `inboxes`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `list_entries_unique` ON `list_entries` (`account_id`,coalesce(`inbox_id`, ''),`direction`,`kind`,`entry`);--> statement-breakpoint
CREATE INDEX `list_entries_account` ON `list_entries` (`account_id`,`direction`,`created_at`);--> statement-breakpoint
ALTER TABLE `messages` ADD `send_at` text;--> statement-breakpoint
-- Written by hand (drizzle-kit does not model triggers): an attachment that arrived with a
-- message and that a draft names outlives the message. It becomes an upload of the account
-- (message_id NULL) before the delete, so neither the cascade nor the file release removes it.
CREATE TRIGGER `drafts_keep_attachments` BEFORE DELETE ON `messages` BEGIN
  UPDATE `attachments` SET `message_id` = NULL
   WHERE `message_id` = OLD.`id` AND `id` IN (SELECT `attachment_id` FROM `draft_attachments`);
END;
