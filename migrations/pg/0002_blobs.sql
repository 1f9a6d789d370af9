-- Written by hand: raw messages and attachment bytes when the database is PostgreSQL, so that
-- no node needs another's disk (src/store/pg-blobs.ts). A blob is its chunks, in order; its
-- key is the relative path the embedded engine uses under data_dir. EXTERNAL storage: mail is
-- mostly compressed already (images, PDFs, archives), so TOAST does not try to compress it.
CREATE TABLE blob_chunks (
  key text NOT NULL,
  seq integer NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (key, seq)
);
--> statement-breakpoint
ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
