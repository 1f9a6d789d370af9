CREATE TABLE "account_usage" (
	"account_id" text PRIMARY KEY NOT NULL,
	"bytes" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "attachments_uploads" ON "attachments" USING btree ("account_id") WHERE message_id IS NULL;--> statement-breakpoint
-- Written by hand (drizzle-kit does not model triggers); the PostgreSQL form of
-- migrations/0013_account_usage.sql: account_usage follows every insert, delete (cascades
-- included) and size change of a message or an attachment, in the same transaction.
INSERT INTO account_usage (account_id, bytes)
  SELECT account_id, sum(size) FROM (SELECT account_id, size FROM messages UNION ALL SELECT account_id, size FROM attachments) s GROUP BY account_id;
--> statement-breakpoint
CREATE FUNCTION mailroom_count_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE account_usage SET bytes = bytes - OLD.size WHERE account_id = OLD.account_id;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO account_usage (account_id, bytes) VALUES (NEW.account_id, NEW.size)
      ON CONFLICT (account_id) DO UPDATE SET bytes = account_usage.bytes + excluded.bytes;
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER messages_usage_insert AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION mailroom_count_usage();
--> statement-breakpoint
CREATE TRIGGER messages_usage_delete AFTER DELETE ON messages FOR EACH ROW EXECUTE FUNCTION mailroom_count_usage();
--> statement-breakpoint
CREATE TRIGGER messages_usage_update AFTER UPDATE OF size, account_id ON messages FOR EACH ROW
  WHEN (OLD.size IS DISTINCT FROM NEW.size OR OLD.account_id IS DISTINCT FROM NEW.account_id)
  EXECUTE FUNCTION mailroom_count_usage();
--> statement-breakpoint
CREATE TRIGGER attachments_usage_insert AFTER INSERT ON attachments FOR EACH ROW EXECUTE FUNCTION mailroom_count_usage();
--> statement-breakpoint
CREATE TRIGGER attachments_usage_delete AFTER DELETE ON attachments FOR EACH ROW EXECUTE FUNCTION mailroom_count_usage();
--> statement-breakpoint
CREATE TRIGGER attachments_usage_update AFTER UPDATE OF size, account_id ON attachments FOR EACH ROW
  WHEN (OLD.size IS DISTINCT FROM NEW.size OR OLD.account_id IS DISTINCT FROM NEW.account_id)
  EXECUTE FUNCTION mailroom_count_usage();
