-- Full-text search (src/domain/search.ts): an FTS5 index over the messages table itself
-- (external content: the text is stored once, in messages), kept by triggers in the same
-- transaction as every insert, update and delete of a message, whatever writes it. Keyed by
-- messages' rowid, which only VACUUM renumbers (the appliance never runs it; after one,
-- INSERT INTO messages_fts(messages_fts) VALUES('rebuild')). unicode61 with diacritics removed
-- matches "resume" to "résumé"; the prefix indexes make word* queries cheap.
CREATE VIRTUAL TABLE `messages_fts` USING fts5(
  `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`,
  content='messages', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2', prefix='2 3'
);
--> statement-breakpoint
INSERT INTO `messages_fts`(`messages_fts`) VALUES ('rebuild');
--> statement-breakpoint
CREATE TRIGGER `messages_fts_insert` AFTER INSERT ON `messages` BEGIN
  INSERT INTO `messages_fts`(rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES (NEW.rowid, NEW.`subject`, NEW.`body_text`, NEW.`from_address`, NEW.`from_name`, NEW.`to_addresses`, NEW.`cc_addresses`);
END;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_delete` AFTER DELETE ON `messages` BEGIN
  INSERT INTO `messages_fts`(`messages_fts`, rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES ('delete', OLD.rowid, OLD.`subject`, OLD.`body_text`, OLD.`from_address`, OLD.`from_name`, OLD.`to_addresses`, OLD.`cc_addresses`);
END;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_update` AFTER UPDATE OF `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses` ON `messages` BEGIN
  INSERT INTO `messages_fts`(`messages_fts`, rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES ('delete', OLD.rowid, OLD.`subject`, OLD.`body_text`, OLD.`from_address`, OLD.`from_name`, OLD.`to_addresses`, OLD.`cc_addresses`);
  INSERT INTO `messages_fts`(rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES (NEW.rowid, NEW.`subject`, NEW.`body_text`, NEW.`from_address`, NEW.`from_name`, NEW.`to_addresses`, NEW.`cc_addresses`);
END;
