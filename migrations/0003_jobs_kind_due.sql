DROP INDEX `jobs_kind_status`;--> statement-breakpoint
CREATE INDEX `jobs_kind_due` ON `jobs` (`kind`,`status`,`run_at`);