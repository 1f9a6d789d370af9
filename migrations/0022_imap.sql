CREATE TABLE `imap_mailboxes` (
	`inbox_id` text NOT NULL,
	`name` text NOT NULL,
	`uid_validity` integer NOT NULL,
	`uid_next` integer NOT NULL,
	PRIMARY KEY(`inbox_id`, `name`),
	FOREIGN KEY (`inbox_id`) REFERENCES `inboxes`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `imap_uids` (
	`inbox_id` text NOT NULL,
	`mailbox` text NOT NULL,
	`uid` integer NOT NULL,
	`message_id` text NOT NULL,
	PRIMARY KEY(`inbox_id`, `mailbox`, `uid`),
	FOREIGN KEY (`message_id`) REFERENCES `messages`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `imap_uids_message` ON `imap_uids` (`message_id`,`mailbox`);