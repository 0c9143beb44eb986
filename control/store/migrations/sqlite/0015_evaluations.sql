-- 0011 evaluations (issue 18): saved conversations of an agent and the runs that rehearse
-- them (SQLite). Keep in step with ../postgres/0011_evaluations.sql.

-- A saved conversation: the script (user turns, DTMF, tool mocks), the criteria, the
-- variables, language and channel, as one JSON document the domain reads.
CREATE TABLE evaluations (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	agent_id TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	conversation_id TEXT,
	spec TEXT NOT NULL,
	created_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX evaluations_agent ON evaluations (agent_id, id);
CREATE INDEX evaluations_org_id ON evaluations (org_id, id);

-- A run: queued, running, finished or failed. At most one run of an organization is queued or
-- running at a time (the partial unique index makes the second one a conflict).
CREATE TABLE evaluation_runs (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	agent_id TEXT NOT NULL,
	agent_version INTEGER NOT NULL DEFAULT 0, -- 0: the current definition
	mode TEXT NOT NULL CHECK (mode IN ('live', 'test')),
	status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'finished', 'failed')),
	reason TEXT NOT NULL DEFAULT '',
	results TEXT NOT NULL DEFAULT '[]',
	totals TEXT NOT NULL DEFAULT '{}',
	attempts INTEGER NOT NULL DEFAULT 0,
	created_at TEXT NOT NULL,
	started_at TEXT,
	finished_at TEXT
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX evaluation_runs_one_active ON evaluation_runs (org_id) WHERE status IN ('queued', 'running');
CREATE INDEX evaluation_runs_org_id ON evaluation_runs (org_id, id);
