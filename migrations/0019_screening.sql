ALTER TABLE `inboxes` ADD `screening` text;--> statement-breakpoint
ALTER TABLE `messages` ADD `screening` text;