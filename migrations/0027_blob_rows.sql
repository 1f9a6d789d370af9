-- Written by hand, as on PostgreSQL (migrations/pg/0002_blobs.sql, 0005): blobs kept in the
-- database, a blob being its chunks in order, keyed by the blob key rows name. On SQLite only
-- small outbound sources are kept so (keys raw/rows/…, src/store/blobs/blobs.ts ROW_BLOB_PREFIX),
-- written in the transaction that commits their message instead of as an fsynced file each.
-- Not in src/store/schema.ts, like the PostgreSQL table: blobs travel in an export as files.
-- created_at (epoch ms): the orphan sweep leaves young blobs alone. It comes before `data`, and
-- blob_chunks_sweep holds it with the key, so the sweep's pages (src/store/blobs/orphans.ts) read
-- the index alone, never a blob's pages.
CREATE TABLE `blob_chunks` (
	`key` text NOT NULL,
	`seq` integer NOT NULL,
	`created_at` integer DEFAULT (CAST(unixepoch('subsec') * 1000 AS integer)) NOT NULL,
	`data` blob NOT NULL,
	PRIMARY KEY(`key`, `seq`)
);
--> statement-breakpoint
CREATE INDEX `blob_chunks_sweep` ON `blob_chunks` (`key`, `created_at`) WHERE `seq` = 0;
