CREATE TABLE `account_usage` (
	`account_id` text PRIMARY KEY NOT NULL,
	`bytes` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `attachments_uploads` ON `attachments` (`account_id`) WHERE message_id IS NULL;--> statement-breakpoint
-- Written by hand below (drizzle-kit does not model triggers): account_usage follows every
-- insert, delete (cascades from inbox and message deletion included) and size change of a
-- message or an attachment, in the same transaction.
INSERT INTO `account_usage` (`account_id`, `bytes`)
  SELECT `account_id`, sum(`size`) FROM (SELECT `account_id`, `size` FROM `messages` UNION ALL SELECT `account_id`, `size` FROM `attachments`) GROUP BY `account_id`;
--> statement-breakpoint
CREATE TRIGGER `messages_usage_insert` AFTER INSERT ON `messages` BEGIN
  INSERT INTO `account_usage` (`account_id`, `bytes`) VALUES (NEW.`account_id`, NEW.`size`)
    ON CONFLICT (`account_id`) DO UPDATE SET `bytes` = `bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
CREATE TRIGGER `messages_usage_delete` AFTER DELETE ON `messages` BEGIN
  UPDATE `account_usage` SET `bytes` = `bytes` - OLD.`size` WHERE `account_id` = OLD.`account_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `messages_usage_update` AFTER UPDATE OF `size`, `account_id` ON `messages`
  WHEN OLD.`size` IS NOT NEW.`size` OR OLD.`account_id` IS NOT NEW.`account_id` BEGIN
  UPDATE `account_usage` SET `bytes` = `bytes` - OLD.`size` WHERE `account_id` = OLD.`account_id`;
  INSERT INTO `account_usage` (`account_id`, `bytes`) VALUES (NEW.`account_id`, NEW.`size`)
    ON CONFLICT (`account_id`) DO UPDATE SET `bytes` = `bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
CREATE TRIGGER `attachments_usage_insert` AFTER INSERT ON `attachments` BEGIN
  INSERT INTO `account_usage` (`account_id`, `bytes`) VALUES (NEW.`account_id`, NEW.`size`)
    ON CONFLICT (`account_id`) DO UPDATE SET `bytes` = `bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
CREATE TRIGGER `attachments_usage_delete` AFTER DELETE ON `attachments` BEGIN
  UPDATE `account_usage` SET `bytes` = `bytes` - OLD.`size` WHERE `account_id` = OLD.`account_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `attachments_usage_update` AFTER UPDATE OF `size`, `account_id` ON `attachments`
  WHEN OLD.`size` IS NOT NEW.`size` OR OLD.`account_id` IS NOT NEW.`account_id` BEGIN
  UPDATE `account_usage` SET `bytes` = `bytes` - OLD.`size` WHERE `account_id` = OLD.`account_id`;
  INSERT INTO `account_usage` (`account_id`, `bytes`) VALUES (NEW.`account_id`, NEW.`size`)
    ON CONFLICT (`account_id`) DO UPDATE SET `bytes` = `bytes` + excluded.`bytes`;
END;
