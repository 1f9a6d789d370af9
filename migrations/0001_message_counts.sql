CREATE TABLE `inbox_message_counts` (
	`inbox_id` text NOT NULL,
	`status` text NOT NULL,
	`n` integer NOT NULL,
	PRIMARY KEY(`inbox_id`, `status`),
	FOREIGN KEY (`inbox_id`) REFERENCES `inboxes`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
-- Written by hand below (drizzle-kit does not model triggers): keep inbox_message_counts in
-- step with every insert, delete (inbox deletion cascades here too) and status change.
INSERT INTO `inbox_message_counts` (`inbox_id`, `status`, `n`)
  SELECT `inbox_id`, `status`, count(*) FROM `messages` GROUP BY `inbox_id`, `status`;
--> statement-breakpoint
CREATE TRIGGER `messages_count_insert` AFTER INSERT ON `messages` BEGIN
  INSERT INTO `inbox_message_counts` (`inbox_id`, `status`, `n`) VALUES (NEW.`inbox_id`, NEW.`status`, 1)
    ON CONFLICT (`inbox_id`, `status`) DO UPDATE SET `n` = `n` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `messages_count_delete` AFTER DELETE ON `messages` BEGIN
  UPDATE `inbox_message_counts` SET `n` = `n` - 1 WHERE `inbox_id` = OLD.`inbox_id` AND `status` = OLD.`status`;
END;
--> statement-breakpoint
CREATE TRIGGER `messages_count_update` AFTER UPDATE OF `status`, `inbox_id` ON `messages`
  WHEN OLD.`status` IS NOT NEW.`status` OR OLD.`inbox_id` IS NOT NEW.`inbox_id` BEGIN
  UPDATE `inbox_message_counts` SET `n` = `n` - 1 WHERE `inbox_id` = OLD.`inbox_id` AND `status` = OLD.`status`;
  INSERT INTO `inbox_message_counts` (`inbox_id`, `status`, `n`) VALUES (NEW.`inbox_id`, NEW.`status`, 1)
    ON CONFLICT (`inbox_id`, `status`) DO UPDATE SET `n` = `n` + 1;
END;
