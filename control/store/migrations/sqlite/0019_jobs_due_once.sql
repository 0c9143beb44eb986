-- 0019 one index for the claim of due jobs (issue 15: the dialler's bookkeeping per attempt)
-- jobs_due (next_attempt_at) is a prefix of jobs_due_order (next_attempt_at, id), which 0012
-- added for the claim's order: every query jobs_due served, jobs_due_order serves, and each
-- job that is queued, claimed or requeued no longer updates both. Keep in step with ../postgres.
DROP INDEX jobs_due;
