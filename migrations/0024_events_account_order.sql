-- Written by hand: an account's events in id order, which on embedded SQLite is commit order
-- (src/store/repo/events.ts, listEventsOfAccount). The event feed (GET /events, the SSE stream,
-- wait_for_message, IMAP IDLE) reads "this account's events after id X": with only
-- (account_id, created_at) to use, SQLite read every event of the account and sorted them, on
-- every read (1.7 ms at 13,000 events, growing with the account's history). With this index a
-- read seeks to X and stops at its limit. PostgreSQL reads by commit position and has its own
-- index for it (migrations/pg/0006_commit_order.sql).
CREATE INDEX `events_account_id` ON `events` (`account_id`, `id`);
