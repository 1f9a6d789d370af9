-- Written by hand: the order in which messages and events became visible, for the readers that
-- continue after the last one they saw (GET /events?after=, the event stream, the long-poll's
-- `after`). Ids are made before a transaction commits, and on a shared database transactions
-- commit in any order, so "ids after X" could skip a row that commits late. A row carries the
-- id of the transaction that wrote it (`tx`) and an insert sequence (`seq`); readers take only
-- rows of transactions older than every one still running (pg_snapshot_xmin) and order them by
-- (tx, seq): once a reader has passed a position, nothing can later appear before it.
-- (SQLite has one writer at a time: its rowid is that order already.)
ALTER TABLE "messages" ADD COLUMN "tx" xid8 NOT NULL DEFAULT pg_current_xact_id();
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "seq" bigint GENERATED ALWAYS AS IDENTITY;
--> statement-breakpoint
CREATE INDEX "messages_inbox_commit_order" ON "messages" ("inbox_id", "tx", "seq");
--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "tx" xid8 NOT NULL DEFAULT pg_current_xact_id();
--> statement-breakpoint
ALTER TABLE "events" ADD COLUMN "seq" bigint GENERATED ALWAYS AS IDENTITY;
--> statement-breakpoint
CREATE INDEX "events_account_commit_order" ON "events" ("account_id", "tx", "seq");
