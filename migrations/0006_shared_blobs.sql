CREATE INDEX `attachments_storage_path` ON `attachments` (`storage_path`);--> statement-breakpoint
CREATE INDEX `messages_raw_path` ON `messages` (`raw_path`);