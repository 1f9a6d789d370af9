-- Written by hand: full-text search on PostgreSQL (src/domain/search.ts, filters.ts), the
-- counterpart of SQLite's FTS5 tables (migrations 0008 and 0011). Generated tsvector columns,
-- kept by PostgreSQL itself in the transaction of every insert and update, with GIN indexes.
--
-- Words are split as FTS5's unicode61 tokenizer splits them: at every character that is no
-- letter or digit (the parser splits most; mailroom_words() first turns the punctuation the
-- parser would keep inside one token — e-mail addresses, file names, hosts — into spaces), and
-- accents are removed (unaccent), so "résumé" matches "resume" and "alice@example.com" is
-- alice, example, com. unaccent is a trusted extension: the database's owner may create it.
CREATE EXTENSION IF NOT EXISTS unaccent;
--> statement-breakpoint
CREATE TEXT SEARCH CONFIGURATION mailroom (COPY = simple);
--> statement-breakpoint
ALTER TEXT SEARCH CONFIGURATION mailroom
  ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part, numword, numhword, hword_numpart
  WITH unaccent, simple;
--> statement-breakpoint
CREATE FUNCTION mailroom_words(text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN translate(coalesce($1, ''), '@._-/:+~=#%&?!*|\<>[](){},;"''`^$', repeat(' ', 32));
--> statement-breakpoint
-- Weights name the fields the query's operators look in: subject (A), from (B), to and cc
-- (C: `to:` means To or Cc), the body (D). `cc:` alone has its own column. A tsvector holds at
-- most 1 MB: the body's first 256 KiB of text are indexed (FTS5 indexes all of it).
ALTER TABLE "messages" ADD COLUMN "fts" tsvector GENERATED ALWAYS AS (
  setweight(to_tsvector('mailroom'::regconfig, mailroom_words("subject")), 'A') ||
  setweight(to_tsvector('mailroom'::regconfig, mailroom_words("from_address") || ' ' || mailroom_words("from_name")), 'B') ||
  setweight(to_tsvector('mailroom'::regconfig, mailroom_words("to_addresses") || ' ' || mailroom_words("cc_addresses")), 'C') ||
  setweight(to_tsvector('mailroom'::regconfig, left(mailroom_words("body_text"), 262144)), 'D')
) STORED;
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "fts_cc" tsvector GENERATED ALWAYS AS (to_tsvector('mailroom'::regconfig, mailroom_words("cc_addresses"))) STORED;
--> statement-breakpoint
CREATE INDEX "messages_fts" ON "messages" USING gin ("fts");
--> statement-breakpoint
CREATE INDEX "messages_fts_cc" ON "messages" USING gin ("fts_cc");
--> statement-breakpoint
ALTER TABLE "attachments" ADD COLUMN "fts" tsvector GENERATED ALWAYS AS (to_tsvector('mailroom'::regconfig, mailroom_words("filename"))) STORED;
--> statement-breakpoint
CREATE INDEX "attachments_fts" ON "attachments" USING gin ("fts");
