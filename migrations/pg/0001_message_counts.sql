-- Written by hand (drizzle-kit does not model triggers); the PostgreSQL form of
-- migrations/0001_message_counts.sql: inbox_message_counts follows every insert, delete (inbox
-- deletion cascades here too) and status change of a message, in the same transaction.
CREATE FUNCTION mailroom_count_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE inbox_message_counts SET n = n - 1 WHERE inbox_id = OLD.inbox_id AND status = OLD.status;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO inbox_message_counts (inbox_id, status, n) VALUES (NEW.inbox_id, NEW.status, 1)
      ON CONFLICT (inbox_id, status) DO UPDATE SET n = inbox_message_counts.n + 1;
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER messages_count_insert AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION mailroom_count_message();
--> statement-breakpoint
CREATE TRIGGER messages_count_delete AFTER DELETE ON messages FOR EACH ROW EXECUTE FUNCTION mailroom_count_message();
--> statement-breakpoint
CREATE TRIGGER messages_count_update AFTER UPDATE OF status, inbox_id ON messages FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.inbox_id IS DISTINCT FROM NEW.inbox_id)
  EXECUTE FUNCTION mailroom_count_message();
