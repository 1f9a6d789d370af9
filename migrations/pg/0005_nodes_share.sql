-- Written by hand: what every node must share that the embedded engine keeps as files under
-- data_dir. `secrets`: the download-URL signing key ('url-signing') and the shared domain's
-- DKIM key ('dkim:<domain>', JSON), made once by whichever node needs one first (INSERT … ON
-- CONFLICT DO NOTHING, then read: every node uses the winner's). blob_chunks.created_at (epoch
-- ms): the sweep of blobs no row names leaves young ones alone (a message's bytes are written
-- before the rows that name them commit), as it does with files on disk.
CREATE TABLE secrets (
  name text PRIMARY KEY,
  value text NOT NULL,
  created_at text NOT NULL
);
--> statement-breakpoint
ALTER TABLE blob_chunks ADD COLUMN created_at bigint NOT NULL DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint;
