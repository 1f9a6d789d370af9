-- Written by hand: FTS5 `secure-delete` is switched on by the triggers that delete from a
-- full-text index and off by the one that adds to it, instead of being on for good. With it on,
-- FTS5 (3.42 up to 3.53.2, the one better-sqlite3 12.11.1 builds) takes an added row's term for
-- a deleted one whenever the term's position list is 64-127 bytes long, or 192-255 and so on
-- (it tests a bit of the list's size varint, not its delete flag), and looks the row up in
-- every segment holding the term: batches of 20 messages of 9 KB added and one deleted took
-- 0.8-1.4 ms a message as the index grew to 8,000, against 0.15-0.25 ms with the option
-- switched as here (bench/store-costs.ts part 8). FTS5 reads the option when it writes out the
-- rows it holds in
-- memory, and setting it writes them out first, under the value it had. So deleted rows are
-- always written out with the option on (their terms leave the index at once,
-- docs/security.md), added rows with it off, but for the row an update adds again, written
-- with its deletion. Each trigger changes the option only when it is not already the value it
-- needs: a change writes out what FTS5 holds and rewrites a row of the index's %_config.
DROP TRIGGER `messages_fts_insert`;
--> statement-breakpoint
DROP TRIGGER `messages_fts_delete`;
--> statement-breakpoint
DROP TRIGGER `messages_fts_update`;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_insert` AFTER INSERT ON `messages` BEGIN
  INSERT INTO `messages_fts`(`messages_fts`, `rank`) SELECT 'secure-delete', 0
    WHERE (SELECT `v` FROM `messages_fts_config` WHERE `k` = 'secure-delete') IS NOT 0;
  INSERT INTO `messages_fts`(rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES (NEW.rowid, NEW.`subject`, substr(NEW.`body_text`, 1, 262144), NEW.`from_address`, NEW.`from_name`, NEW.`to_addresses`, NEW.`cc_addresses`);
END;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_delete` AFTER DELETE ON `messages` BEGIN
  INSERT INTO `messages_fts`(`messages_fts`, `rank`) SELECT 'secure-delete', 1
    WHERE (SELECT `v` FROM `messages_fts_config` WHERE `k` = 'secure-delete') IS NOT 1;
  INSERT INTO `messages_fts`(`messages_fts`, rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES ('delete', OLD.rowid, OLD.`subject`, substr(OLD.`body_text`, 1, 262144), OLD.`from_address`, OLD.`from_name`, OLD.`to_addresses`, OLD.`cc_addresses`);
END;
--> statement-breakpoint
CREATE TRIGGER `messages_fts_update` AFTER UPDATE OF `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses` ON `messages` BEGIN
  INSERT INTO `messages_fts`(`messages_fts`, `rank`) SELECT 'secure-delete', 1
    WHERE (SELECT `v` FROM `messages_fts_config` WHERE `k` = 'secure-delete') IS NOT 1;
  INSERT INTO `messages_fts`(`messages_fts`, rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES ('delete', OLD.rowid, OLD.`subject`, substr(OLD.`body_text`, 1, 262144), OLD.`from_address`, OLD.`from_name`, OLD.`to_addresses`, OLD.`cc_addresses`);
  INSERT INTO `messages_fts`(rowid, `subject`, `body_text`, `from_address`, `from_name`, `to_addresses`, `cc_addresses`)
    VALUES (NEW.rowid, NEW.`subject`, substr(NEW.`body_text`, 1, 262144), NEW.`from_address`, NEW.`from_name`, NEW.`to_addresses`, NEW.`cc_addresses`);
END;
--> statement-breakpoint
DROP TRIGGER `attachments_fts_insert`;
--> statement-breakpoint
DROP TRIGGER `attachments_fts_delete`;
--> statement-breakpoint
DROP TRIGGER `attachments_fts_update`;
--> statement-breakpoint
CREATE TRIGGER `attachments_fts_insert` AFTER INSERT ON `attachments` BEGIN
  INSERT INTO `attachments_fts`(`attachments_fts`, `rank`) SELECT 'secure-delete', 0
    WHERE (SELECT `v` FROM `attachments_fts_config` WHERE `k` = 'secure-delete') IS NOT 0;
  INSERT INTO `attachments_fts`(rowid, `filename`) VALUES (NEW.rowid, NEW.`filename`);
END;
--> statement-breakpoint
CREATE TRIGGER `attachments_fts_delete` AFTER DELETE ON `attachments` BEGIN
  INSERT INTO `attachments_fts`(`attachments_fts`, `rank`) SELECT 'secure-delete', 1
    WHERE (SELECT `v` FROM `attachments_fts_config` WHERE `k` = 'secure-delete') IS NOT 1;
  INSERT INTO `attachments_fts`(`attachments_fts`, rowid, `filename`) VALUES ('delete', OLD.rowid, OLD.`filename`);
END;
--> statement-breakpoint
CREATE TRIGGER `attachments_fts_update` AFTER UPDATE OF `filename` ON `attachments` BEGIN
  INSERT INTO `attachments_fts`(`attachments_fts`, `rank`) SELECT 'secure-delete', 1
    WHERE (SELECT `v` FROM `attachments_fts_config` WHERE `k` = 'secure-delete') IS NOT 1;
  INSERT INTO `attachments_fts`(`attachments_fts`, rowid, `filename`) VALUES ('delete', OLD.rowid, OLD.`filename`);
  INSERT INTO `attachments_fts`(rowid, `filename`) VALUES (NEW.rowid, NEW.`filename`);
END;
