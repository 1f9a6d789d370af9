-- Events about a message go with the message (drizzle-kit leaves ON DELETE out of ADD COLUMN).
ALTER TABLE `events` ADD `message_id` text REFERENCES messages(id) ON DELETE cascade;--> statement-breakpoint
UPDATE `events` SET `message_id` = json_extract(`data`, '$.id') WHERE `type` LIKE 'message.%' AND json_extract(`data`, '$.id') IN (SELECT `id` FROM `messages`);--> statement-breakpoint
-- Events of messages deleted before this migration: their copies go now.
DELETE FROM `events` WHERE `type` LIKE 'message.%' AND `message_id` IS NULL;--> statement-breakpoint
CREATE INDEX `events_message` ON `events` (`message_id`);--> statement-breakpoint
CREATE INDEX `events_created` ON `events` (`created_at`);--> statement-breakpoint
ALTER TABLE `idempotency_keys` ADD `resource_id` text;--> statement-breakpoint
CREATE INDEX `idempotency_resource` ON `idempotency_keys` (`resource_id`);--> statement-breakpoint
CREATE INDEX `webhook_attempts_created` ON `webhook_attempts` (`created_at`);
