-- Issue 27. Domains: a name may be claimed by several accounts (once each) until one claim is
-- verified for sending; the partial unique index lets only one be. Lists: allow entries gain
-- require_auth (true by default, existing entries too): the sender must be authenticated.
DROP INDEX "domains_domain";--> statement-breakpoint
ALTER TABLE "list_entries" ADD COLUMN "require_auth" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "domains_domain_verified" ON "domains" USING btree ("domain") WHERE "domains"."sending_status" = 'verified';--> statement-breakpoint
CREATE UNIQUE INDEX "domains_account_domain" ON "domains" USING btree ("account_id","domain");--> statement-breakpoint
CREATE INDEX "domains_domain" ON "domains" USING btree ("domain");