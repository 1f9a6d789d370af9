-- Written by hand: the search index takes the first 262,144 characters of a message's body
-- text, as PostgreSQL's does (migrations/pg/0004_search.sql), instead of all of it. A stored
-- copy of a message of 24 MB of text held the single writer for about 3 s in its index alone;
-- the body's start is what search needs. FTS5's external content now comes from a view that
-- makes the same cut, so that 'rebuild', 'delete' and the triggers all see the same text:
-- 'delete' must be given exactly what was indexed. The index is rebuilt once, here.
DROP TRIGGER `messages_fts_insert`;
--> statement-breakpoint
DROP TRIGGER `messages_fts_delete`;
--> statement-breakpoint
DROP TRIGGER `messages_fts_update`;
--> statement-breakpoint
DROP TABLE `messages_fts`;
--> statement-breakpoint
CREATE VIEW `messages_fts_content` AS SELECT `rowid` AS `message_rowid`, `subject`, substr(`body_text`, 1, 262144) AS `body_text`,
  `from_address`, `from_name`, `to_addresses`, `cc_addresses` FROM `messages`;
--> statement-breakpoint
CREATE VIRTUAL TABLE `messages_fts` USING fts5(
  `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`,
  content='messages_fts_content', content_rowid='message_rowid', tokenize='unicode61 remove_diacritics 2', prefix='2 3'
);
--> statement-breakpoint
INSERT INTO `messages_fts`(`messages_fts`, `rank`) VALUES ('secure-delete', 1);
--> statement-breakpoint
INSERT INTO `messages_fts`(`messages_fts`) VALUES ('rebuild');
--> statement-breakpoint
CREATE TRIGGER `messages_fts_insert` AFTER INSERT ON `messages` BEGIN
  INSERT INTO `messages_fts`(rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES (NEW.rowid, NEW.`subject`, substr(NEW.`body_text`, 1, 262144), NEW.`from_address`, NEW.`from_name`, NEW.`to_addresses`, NEW.`cc_addresses`);
END;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_delete` AFTER DELETE ON `messages` BEGIN
  INSERT INTO `messages_fts`(`messages_fts`, rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES ('delete', OLD.rowid, OLD.`subject`, substr(OLD.`body_text`, 1, 262144), OLD.`from_address`, OLD.`from_name`, OLD.`to_addresses`, OLD.`cc_addresses`);
END;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_update` AFTER UPDATE OF `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses` ON `messages` BEGIN
  INSERT INTO `messages_fts`(`messages_fts`, rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES ('delete', OLD.rowid, OLD.`subject`, substr(OLD.`body_text`, 1, 262144), OLD.`from_address`, OLD.`from_name`, OLD.`to_addresses`, OLD.`cc_addresses`);
  INSERT INTO `messages_fts`(rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES (NEW.rowid, NEW.`subject`, substr(NEW.`body_text`, 1, 262144), NEW.`from_address`, NEW.`from_name`, NEW.`to_addresses`, NEW.`cc_addresses`);
END;
