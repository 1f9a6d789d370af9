CREATE TABLE "mta_sts_policies" (
	"domain" text PRIMARY KEY NOT NULL,
	"policy_id" text NOT NULL,
	"policy" text NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tls_results" (
	"day" text NOT NULL,
	"policy_domain" text NOT NULL,
	"policy_type" text NOT NULL,
	"result_type" text NOT NULL,
	"receiving_mx" text DEFAULT '' NOT NULL,
	"receiving_ip" text DEFAULT '' NOT NULL,
	"policy_strings" text DEFAULT '[]' NOT NULL,
	"mx_hosts" text DEFAULT '[]' NOT NULL,
	"sessions" bigint DEFAULT 0 NOT NULL,
	"detail" text,
	CONSTRAINT "tls_results_day_policy_domain_policy_type_result_type_receiving_mx_receiving_ip_pk" PRIMARY KEY("day","policy_domain","policy_type","result_type","receiving_mx","receiving_ip")
);
