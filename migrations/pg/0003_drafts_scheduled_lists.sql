CREATE TABLE "draft_attachments" (
	"draft_id" text NOT NULL,
	"attachment_id" text NOT NULL,
	"position" bigint NOT NULL,
	CONSTRAINT "draft_attachments_draft_id_attachment_id_pk" PRIMARY KEY("draft_id","attachment_id")
);
--> statement-breakpoint
CREATE TABLE "drafts" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"inbox_id" text NOT NULL,
	"to_addresses" text DEFAULT '[]' NOT NULL,
	"cc_addresses" text DEFAULT '[]' NOT NULL,
	"bcc_addresses" text DEFAULT '[]' NOT NULL,
	"subject" text,
	"body_text" text,
	"body_html" text,
	"thread_id" text,
	"in_reply_to" text,
	"send_at" text,
	"created_at" text NOT NULL,
	"updated_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "list_entries" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"inbox_id" text,
	"direction" text NOT NULL,
	"kind" text NOT NULL,
	"entry" text NOT NULL,
	"created_at" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "send_at" text;--> statement-breakpoint
ALTER TABLE "draft_attachments" ADD CONSTRAINT "draft_attachments_draft_id_drafts_id_fk" FOREIGN KEY ("draft_id") REFERENCES "public"."drafts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "draft_attachments" ADD CONSTRAINT "draft_attachments_attachment_id_attachments_id_fk" FOREIGN KEY ("attachment_id") REFERENCES "public"."attachments"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "drafts" ADD CONSTRAINT "drafts_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "drafts" ADD CONSTRAINT "drafts_inbox_id_inboxes_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inboxes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "list_entries" ADD CONSTRAINT "list_entries_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "list_entries" ADD CONSTRAINT "list_entries_inbox_id_inboxes_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inboxes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "draft_attachments_att" ON "draft_attachments" USING btree ("attachment_id");--> statement-breakpoint
CREATE INDEX "drafts_inbox_created" ON "drafts" USING btree ("inbox_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "list_entries_unique" ON "list_entries" USING btree ("account_id",coalesce("inbox_id", ''),"direction","kind","entry");--> statement-breakpoint
CREATE INDEX "list_entries_account" ON "list_entries" USING btree ("account_id","direction","created_at");--> statement-breakpoint
-- Written by hand, the PostgreSQL form of the trigger in migrations/0010: an attachment that
-- arrived with a message and that a draft names outlives the message (it becomes an upload of
-- the account) before the delete, so neither the cascade nor the file release removes it.
CREATE FUNCTION mailroom_drafts_keep_attachments() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE attachments SET message_id = NULL
   WHERE message_id = OLD.id AND id IN (SELECT attachment_id FROM draft_attachments);
  RETURN OLD;
END $$;
--> statement-breakpoint
CREATE TRIGGER drafts_keep_attachments BEFORE DELETE ON messages FOR EACH ROW EXECUTE FUNCTION mailroom_drafts_keep_attachments();
