-- 0005 jobs: the one durable lease queue for everything that runs later or again (scheduled-call
-- dialling, purges, the lost-conversation reaper; later webhook deliveries, campaign attempts).
-- Workers claim due rows with SELECT … FOR UPDATE SKIP LOCKED and hold them under a lease that
-- they extend; a row whose lease ran out (its worker died) is claimed again. See control/jobs.
-- Keep in step with ../sqlite/0005_jobs.sql.

CREATE TABLE jobs (
	id uuid PRIMARY KEY,
	kind text NOT NULL CHECK (kind <> ''),
	payload jsonb NOT NULL DEFAULT '{}',
	state text NOT NULL CHECK (state IN ('queued', 'running', 'done', 'dead')),
	-- A job enqueued with a key that a kept row holds is not enqueued again (periodic runs
	-- carry one key per period). NULLs never collide.
	dedupe_key text UNIQUE,
	next_attempt_at timestamptz NOT NULL,
	attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	max_attempts integer NOT NULL CHECK (max_attempts >= 1),
	-- The worker that holds (or last held) the job; the lease runs while the job is running.
	lease_owner text,
	lease_expires_at timestamptz,
	last_error text,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	finished_at timestamptz,
	CHECK (state <> 'running' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
	CHECK ((state IN ('done', 'dead')) = (finished_at IS NOT NULL))
);

-- What a claim reads: due queued jobs, and running jobs whose lease ran out.
CREATE INDEX jobs_due ON jobs (next_attempt_at) WHERE state = 'queued';
CREATE INDEX jobs_leased ON jobs (lease_expires_at) WHERE state = 'running';
-- Listing by state, newest first (ids are UUIDv7).
CREATE INDEX jobs_state_id ON jobs (state, id);
-- The purge of finished jobs.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
