-- 0011 evaluations (issue 18): saved conversations of an agent and the runs that rehearse
-- them (PostgreSQL). Keep in step with ../sqlite/0011_evaluations.sql.

CREATE TABLE evaluations (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	agent_id uuid NOT NULL,
	name text NOT NULL DEFAULT '',
	conversation_id uuid,
	spec jsonb NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE INDEX evaluations_agent ON evaluations (agent_id, id);
CREATE INDEX evaluations_org_id ON evaluations (org_id, id);

CREATE TABLE evaluation_runs (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	agent_id uuid NOT NULL,
	agent_version integer NOT NULL DEFAULT 0,
	mode text NOT NULL CHECK (mode IN ('live', 'test')),
	status text NOT NULL CHECK (status IN ('queued', 'running', 'finished', 'failed')),
	reason text NOT NULL DEFAULT '',
	results jsonb NOT NULL DEFAULT '[]',
	totals jsonb NOT NULL DEFAULT '{}',
	attempts integer NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL,
	started_at timestamptz,
	finished_at timestamptz
);

CREATE UNIQUE INDEX evaluation_runs_one_active ON evaluation_runs (org_id) WHERE status IN ('queued', 'running');
CREATE INDEX evaluation_runs_org_id ON evaluation_runs (org_id, id);
