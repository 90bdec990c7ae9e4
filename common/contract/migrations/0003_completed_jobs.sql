-- The job that last completed each book. A worker checks it before running a job, so a job whose
-- completion the queue never heard of (the key-value store stalled as it finished) is closed, not
-- run again when its lease lapses and the reaper hands it back.
ALTER TABLE book_ingestions ADD COLUMN IF NOT EXISTS completed_job_id text;
