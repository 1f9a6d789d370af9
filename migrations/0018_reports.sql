CREATE TABLE `dmarc_records` (
	`report_id` text NOT NULL,
	`seq` integer NOT NULL,
	`source_ip` text NOT NULL,
	`count` integer NOT NULL,
	`disposition` text NOT NULL,
	`dkim` text NOT NULL,
	`spf` text NOT NULL,
	`header_from` text NOT NULL,
	PRIMARY KEY(`report_id`, `seq`),
	FOREIGN KEY (`report_id`) REFERENCES `dmarc_reports`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `dmarc_reports` (
	`id` text PRIMARY KEY NOT NULL,
	`domain_id` text NOT NULL,
	`org_name` text NOT NULL,
	`report_id` text NOT NULL,
	`begin_at` text NOT NULL,
	`end_at` text NOT NULL,
	`policy` text,
	`received_at` text NOT NULL,
	FOREIGN KEY (`domain_id`) REFERENCES `domains`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `dmarc_reports_unique` ON `dmarc_reports` (`domain_id`,`org_name`,`report_id`);--> statement-breakpoint
CREATE INDEX `dmarc_reports_domain_begin` ON `dmarc_reports` (`domain_id`,`begin_at`);--> statement-breakpoint
CREATE INDEX `dmarc_reports_received` ON `dmarc_reports` (`received_at`);--> statement-breakpoint
CREATE TABLE `tls_reports` (
	`id` text PRIMARY KEY NOT NULL,
	`domain_id` text NOT NULL,
	`org_name` text NOT NULL,
	`report_id` text NOT NULL,
	`begin_at` text NOT NULL,
	`end_at` text NOT NULL,
	`success_count` integer NOT NULL,
	`failure_count` integer NOT NULL,
	`policies` text NOT NULL,
	`received_at` text NOT NULL,
	FOREIGN KEY (`domain_id`) REFERENCES `domains`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tls_reports_unique` ON `tls_reports` (`domain_id`,`org_name`,`report_id`);--> statement-breakpoint
CREATE INDEX `tls_reports_domain_begin` ON `tls_reports` (`domain_id`,`begin_at`);--> statement-breakpoint
CREATE INDEX `tls_reports_received` ON `tls_reports` (`received_at`);