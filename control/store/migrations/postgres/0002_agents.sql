-- 0002 agents: agents with their definitions and published versions, phone numbers, and the
-- stored answers of idempotent requests (PostgreSQL). Keep in step with ../sqlite/0002_agents.sql.

CREATE TABLE agents (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	name text NOT NULL,
	-- name_key is the name folded to lower case: names are unique in a project whatever their case.
	name_key text NOT NULL,
	description text NOT NULL DEFAULT '',
	kind text NOT NULL CHECK (kind IN ('form_filling', 'workflow', 'faq', 'custom', 'desk')),
	direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
	status text NOT NULL CHECK (status IN ('draft', 'published', 'archived')),
	channels jsonb NOT NULL DEFAULT '[]',
	definition jsonb NOT NULL,
	current_version integer NOT NULL DEFAULT 0 CHECK (current_version >= 0),
	published_at timestamptz,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	deleted_at timestamptz,
	purges_at timestamptz
);

CREATE UNIQUE INDEX agents_project_name ON agents (project_id, name_key) WHERE deleted_at IS NULL;
CREATE INDEX agents_org_id ON agents (org_id, id);
CREATE INDEX agents_purges_at ON agents (purges_at) WHERE purges_at IS NOT NULL;

CREATE TABLE agent_versions (
	agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
	version integer NOT NULL CHECK (version >= 1),
	note text NOT NULL DEFAULT '',
	definition jsonb NOT NULL,
	published_by text NOT NULL DEFAULT '',
	published_at timestamptz NOT NULL,
	PRIMARY KEY (agent_id, version)
);

CREATE TABLE phone_numbers (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	number text NOT NULL UNIQUE,
	trunk text,
	agent_id uuid REFERENCES agents (id) ON DELETE SET NULL,
	label text NOT NULL DEFAULT '',
	assigned_at timestamptz,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE INDEX phone_numbers_org_id ON phone_numbers (org_id, id);
CREATE INDEX phone_numbers_agent_id ON phone_numbers (agent_id, assigned_at, id);

CREATE TABLE idempotency_keys (
	org_id uuid NOT NULL REFERENCES organizations (id),
	operation text NOT NULL,
	key text NOT NULL,
	fingerprint text NOT NULL,
	status integer NOT NULL,
	header jsonb NOT NULL DEFAULT '{}',
	body bytea NOT NULL,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (org_id, operation, key)
);

CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
