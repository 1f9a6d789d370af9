CREATE TABLE `suppressions` (
	`account_id` text NOT NULL,
	`address` text NOT NULL,
	`reason` text NOT NULL,
	`message_id` text,
	`created_at` text NOT NULL,
	PRIMARY KEY(`account_id`, `address`),
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`message_id`) REFERENCES `messages`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE INDEX `suppressions_account_created` ON `suppressions` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `suppressions_message` ON `suppressions` (`message_id`);