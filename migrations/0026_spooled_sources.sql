PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_spooled_messages` (
	`job_id` text PRIMARY KEY NOT NULL,
	`raw` blob NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_spooled_messages`("job_id", "raw", "created_at") SELECT "job_id", "raw", "created_at" FROM `spooled_messages`;--> statement-breakpoint
DROP TABLE `spooled_messages`;--> statement-breakpoint
ALTER TABLE `__new_spooled_messages` RENAME TO `spooled_messages`;--> statement-breakpoint
PRAGMA foreign_keys=ON;