ALTER TABLE "spooled_messages" DROP CONSTRAINT "spooled_messages_job_id_jobs_id_fk";
