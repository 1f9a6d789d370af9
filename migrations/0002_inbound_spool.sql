CREATE TABLE `spooled_messages` (
	`job_id` text PRIMARY KEY NOT NULL,
	`raw` blob NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`job_id`) REFERENCES `jobs`(`id`) ON UPDATE no action ON DELETE cascade
);
