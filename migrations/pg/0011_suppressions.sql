CREATE TABLE "suppressions" (
	"account_id" text NOT NULL,
	"address" text NOT NULL,
	"reason" text NOT NULL,
	"message_id" text,
	"created_at" text NOT NULL,
	CONSTRAINT "suppressions_account_id_address_pk" PRIMARY KEY("account_id","address")
);
--> statement-breakpoint
ALTER TABLE "suppressions" ADD CONSTRAINT "suppressions_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "suppressions" ADD CONSTRAINT "suppressions_message_id_messages_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "suppressions_account_created" ON "suppressions" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "suppressions_message" ON "suppressions" USING btree ("message_id");