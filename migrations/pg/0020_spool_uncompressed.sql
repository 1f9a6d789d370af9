-- Written by hand: a spooled message's bytes are stored out of line without compression, as
-- blob_chunks' are (migration 0002). A spooled row lives for moments (until the message is
-- processed, then it is deleted), so pglz's compression on insert and decompression on read were
-- CPU spent for nothing: 0.36 against 0.19 ms of the server's CPU to insert a 10 KB message, and
-- 0.09 against 0.07 ms to read it (a micro-measurement on a private cluster, 3,000 rows, twice).
-- Only rows written from now on are affected.
ALTER TABLE spooled_messages ALTER COLUMN raw SET STORAGE EXTERNAL;
