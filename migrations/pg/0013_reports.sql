CREATE TABLE "dmarc_records" (
	"report_id" text NOT NULL,
	"seq" bigint NOT NULL,
	"source_ip" text NOT NULL,
	"count" bigint NOT NULL,
	"disposition" text NOT NULL,
	"dkim" text NOT NULL,
	"spf" text NOT NULL,
	"header_from" text NOT NULL,
	CONSTRAINT "dmarc_records_report_id_seq_pk" PRIMARY KEY("report_id","seq")
);
--> statement-breakpoint
CREATE TABLE "dmarc_reports" (
	"id" text PRIMARY KEY NOT NULL,
	"domain_id" text NOT NULL,
	"org_name" text NOT NULL,
	"report_id" text NOT NULL,
	"begin_at" text NOT NULL,
	"end_at" text NOT NULL,
	"policy" text,
	"received_at" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tls_reports" (
	"id" text PRIMARY KEY NOT NULL,
	"domain_id" text NOT NULL,
	"org_name" text NOT NULL,
	"report_id" text NOT NULL,
	"begin_at" text NOT NULL,
	"end_at" text NOT NULL,
	"success_count" bigint NOT NULL,
	"failure_count" bigint NOT NULL,
	"policies" text NOT NULL,
	"received_at" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "dmarc_records" ADD CONSTRAINT "dmarc_records_report_id_dmarc_reports_id_fk" FOREIGN KEY ("report_id") REFERENCES "public"."dmarc_reports"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "dmarc_reports" ADD CONSTRAINT "dmarc_reports_domain_id_domains_id_fk" FOREIGN KEY ("domain_id") REFERENCES "public"."domains"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tls_reports" ADD CONSTRAINT "tls_reports_domain_id_domains_id_fk" FOREIGN KEY ("domain_id") REFERENCES "public"."domains"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "dmarc_reports_unique" ON "dmarc_reports" USING btree ("domain_id","org_name","report_id");--> statement-breakpoint
CREATE INDEX "dmarc_reports_domain_begin" ON "dmarc_reports" USING btree ("domain_id","begin_at");--> statement-breakpoint
CREATE INDEX "dmarc_reports_received" ON "dmarc_reports" USING btree ("received_at");--> statement-breakpoint
CREATE UNIQUE INDEX "tls_reports_unique" ON "tls_reports" USING btree ("domain_id","org_name","report_id");--> statement-breakpoint
CREATE INDEX "tls_reports_domain_begin" ON "tls_reports" USING btree ("domain_id","begin_at");--> statement-breakpoint
CREATE INDEX "tls_reports_received" ON "tls_reports" USING btree ("received_at");