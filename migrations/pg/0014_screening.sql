ALTER TABLE "inboxes" ADD COLUMN "screening" text;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "screening" text;