CREATE TABLE `message_labels` (
	`message_id` text NOT NULL,
	`label` text NOT NULL,
	`account_id` text NOT NULL,
	`inbox_id` text NOT NULL,
	`thread_id` text NOT NULL,
	`created_at` text NOT NULL,
	PRIMARY KEY(`message_id`, `label`),
	FOREIGN KEY (`message_id`) REFERENCES `messages`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `message_labels_inbox` ON `message_labels` (`inbox_id`,`label`,`created_at`);--> statement-breakpoint
CREATE INDEX `message_labels_account` ON `message_labels` (`account_id`,`label`,`created_at`);--> statement-breakpoint
CREATE INDEX `message_labels_thread` ON `message_labels` (`thread_id`);--> statement-breakpoint
ALTER TABLE `messages` ADD `unread` integer DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX `messages_account_created` ON `messages` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `messages_inbox_unread` ON `messages` (`inbox_id`,`created_at`) WHERE unread = 1;--> statement-breakpoint
CREATE INDEX `messages_account_unread` ON `messages` (`account_id`,`created_at`) WHERE unread = 1;--> statement-breakpoint
CREATE INDEX `threads_account_activity` ON `threads` (`account_id`,`last_message_at`);