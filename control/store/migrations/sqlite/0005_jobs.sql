-- 0005 jobs: the one durable lease queue for everything that runs later or again (scheduled-call
-- dialling, purges, the lost-conversation reaper; later webhook deliveries, campaign attempts).
-- SQLite has one writer: a claim is one UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING inside
-- an IMMEDIATE transaction, so two workers never take the same row. A row whose lease ran out
-- (its worker died) is claimed again. See control/jobs.
-- Keep in step with ../postgres/0005_jobs.sql.

CREATE TABLE jobs (
	id TEXT PRIMARY KEY,
	kind TEXT NOT NULL CHECK (kind <> ''),
	payload TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
	state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'dead')),
	-- A job enqueued with a key that a kept row holds is not enqueued again (periodic runs
	-- carry one key per period). NULLs never collide.
	dedupe_key TEXT UNIQUE,
	next_attempt_at TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
	-- The worker that holds (or last held) the job; the lease runs while the job is running.
	lease_owner TEXT,
	lease_expires_at TEXT,
	last_error TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	finished_at TEXT,
	CHECK (state <> 'running' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
	CHECK ((state IN ('done', 'dead')) = (finished_at IS NOT NULL))
) STRICT, WITHOUT ROWID;

-- What a claim reads: due queued jobs, and running jobs whose lease ran out.
CREATE INDEX jobs_due ON jobs (next_attempt_at) WHERE state = 'queued';
CREATE INDEX jobs_leased ON jobs (lease_expires_at) WHERE state = 'running';
-- Listing by state, newest first (ids are UUIDv7).
CREATE INDEX jobs_state_id ON jobs (state, id);
-- The purge of finished jobs.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
