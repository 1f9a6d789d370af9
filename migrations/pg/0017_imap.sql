CREATE TABLE "imap_mailboxes" (
	"inbox_id" text NOT NULL,
	"name" text NOT NULL,
	"uid_validity" bigint NOT NULL,
	"uid_next" bigint NOT NULL,
	CONSTRAINT "imap_mailboxes_inbox_id_name_pk" PRIMARY KEY("inbox_id","name")
);
--> statement-breakpoint
CREATE TABLE "imap_uids" (
	"inbox_id" text NOT NULL,
	"mailbox" text NOT NULL,
	"uid" bigint NOT NULL,
	"message_id" text NOT NULL,
	CONSTRAINT "imap_uids_inbox_id_mailbox_uid_pk" PRIMARY KEY("inbox_id","mailbox","uid")
);
--> statement-breakpoint
ALTER TABLE "imap_mailboxes" ADD CONSTRAINT "imap_mailboxes_inbox_id_inboxes_id_fk" FOREIGN KEY ("inbox_id") REFERENCES "public"."inboxes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "imap_uids" ADD CONSTRAINT "imap_uids_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "imap_uids_message" ON "imap_uids" USING btree ("message_id","mailbox");