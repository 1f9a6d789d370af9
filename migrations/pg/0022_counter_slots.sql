-- Written by hand (drizzle-kit does not model triggers; src/store/schema.ts has no `slot`, as
-- SQLite, one writer at a time, needs none). The counters the triggers of 0001 and 0008 keep were
-- one row per inbox and status, and one per account: every transaction storing mail for an inbox
-- upserted the same rows, and so waited, row lock held, for the one before it to commit
-- (pg_stat_statements, bench (o), 3,000 messages: the first upsert, the inbox's count, took 20 ms
-- a message, 60.6 s of the 64.1 s spent in the message INSERTs that fire it). Each counter is now split into slots, one per server connection
-- (pg_backend_pid() % 64): concurrent transactions add to their own rows, readers sum the slots.
-- A decrement takes its own slot's row if it has one, else any row of that counter, and never
-- inserts one (an inbox being deleted would fail the foreign key).
ALTER TABLE inbox_message_counts ADD COLUMN slot integer NOT NULL DEFAULT 0;
--> statement-breakpoint
ALTER TABLE inbox_message_counts DROP CONSTRAINT inbox_message_counts_inbox_id_status_pk;
--> statement-breakpoint
ALTER TABLE inbox_message_counts ADD CONSTRAINT inbox_message_counts_inbox_id_status_slot_pk PRIMARY KEY (inbox_id, status, slot);
--> statement-breakpoint
ALTER TABLE account_usage ADD COLUMN slot integer NOT NULL DEFAULT 0;
--> statement-breakpoint
ALTER TABLE account_usage DROP CONSTRAINT account_usage_pkey;
--> statement-breakpoint
ALTER TABLE account_usage ADD CONSTRAINT account_usage_account_id_slot_pk PRIMARY KEY (account_id, slot);
--> statement-breakpoint
CREATE OR REPLACE FUNCTION mailroom_count_message() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  mine integer := pg_backend_pid() % 64;
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE inbox_message_counts SET n = n - 1 WHERE inbox_id = OLD.inbox_id AND status = OLD.status AND slot = mine;
    IF NOT FOUND THEN
      UPDATE inbox_message_counts SET n = n - 1
        WHERE inbox_id = OLD.inbox_id AND status = OLD.status
          AND slot = (SELECT min(slot) FROM inbox_message_counts WHERE inbox_id = OLD.inbox_id AND status = OLD.status);
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO inbox_message_counts (inbox_id, status, slot, n) VALUES (NEW.inbox_id, NEW.status, mine, 1)
      ON CONFLICT (inbox_id, status, slot) DO UPDATE SET n = inbox_message_counts.n + 1;
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION mailroom_count_usage() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  mine integer := pg_backend_pid() % 64;
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE account_usage SET bytes = bytes - OLD.size WHERE account_id = OLD.account_id AND slot = mine;
    IF NOT FOUND THEN
      UPDATE account_usage SET bytes = bytes - OLD.size
        WHERE account_id = OLD.account_id AND slot = (SELECT min(slot) FROM account_usage WHERE account_id = OLD.account_id);
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO account_usage (account_id, slot, bytes) VALUES (NEW.account_id, mine, NEW.size)
      ON CONFLICT (account_id, slot) DO UPDATE SET bytes = account_usage.bytes + excluded.bytes;
  END IF;
  RETURN NULL;
END $$;
