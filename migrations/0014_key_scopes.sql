ALTER TABLE `api_keys` ADD `scopes` text DEFAULT '["read","send","manage","review"]' NOT NULL;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `inbox_ids` text;--> statement-breakpoint
-- Keys made before scopes: read-write keys get all four (the default above), read-only keys only read.
UPDATE `api_keys` SET `scopes` = '["read"]' WHERE `read_only` = 1;
