-- Written by hand: an FTS5 index over attachment filenames (src/domain/search.ts: `filename:`
-- and plain words that match a filename), kept by triggers in the same transaction as every
-- insert, rename and delete of an attachment. External content, keyed by the attachments
-- table's rowid, like messages_fts (migration 0008). The tokenizer splits "Q3-Report_final.pdf"
-- into q3, report, final, pdf, and removes accents, as it does for message text.
CREATE VIRTUAL TABLE `attachments_fts` USING fts5(
  `filename`, content='attachments', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2', prefix='2 3'
);
--> statement-breakpoint
INSERT INTO `attachments_fts`(`attachments_fts`) VALUES ('rebuild');
--> statement-breakpoint
CREATE TRIGGER `attachments_fts_insert` AFTER INSERT ON `attachments` BEGIN
  INSERT INTO `attachments_fts`(rowid, `filename`) VALUES (NEW.rowid, NEW.`filename`);
END;
--> statement-breakpoint
CREATE TRIGGER `attachments_fts_delete` AFTER DELETE ON `attachments` BEGIN
  INSERT INTO `attachments_fts`(`attachments_fts`, rowid, `filename`) VALUES ('delete', OLD.rowid, OLD.`filename`);
END;
--> statement-breakpoint
CREATE TRIGGER `attachments_fts_update` AFTER UPDATE OF `filename` ON `attachments` BEGIN
  INSERT INTO `attachments_fts`(`attachments_fts`, rowid, `filename`) VALUES ('delete', OLD.rowid, OLD.`filename`);
  INSERT INTO `attachments_fts`(rowid, `filename`) VALUES (NEW.rowid, NEW.`filename`);
END;
