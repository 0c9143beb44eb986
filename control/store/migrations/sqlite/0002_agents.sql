-- 0002 agents: agents with their definitions and published versions, phone numbers, and the
-- stored answers of idempotent requests (SQLite). Keep in step with ../postgres/0002_agents.sql.

CREATE TABLE agents (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	name TEXT NOT NULL,
	-- name_key is the name folded to lower case: names are unique in a project whatever their case.
	name_key TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	kind TEXT NOT NULL CHECK (kind IN ('form_filling', 'workflow', 'faq', 'custom', 'desk')),
	direction TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
	status TEXT NOT NULL CHECK (status IN ('draft', 'published', 'archived')),
	channels TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(channels)),
	definition TEXT NOT NULL CHECK (json_valid(definition)),
	current_version INTEGER NOT NULL DEFAULT 0 CHECK (current_version >= 0),
	published_at TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	deleted_at TEXT,
	purges_at TEXT
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX agents_project_name ON agents (project_id, name_key) WHERE deleted_at IS NULL;
CREATE INDEX agents_org_id ON agents (org_id, id);
CREATE INDEX agents_purges_at ON agents (purges_at) WHERE purges_at IS NOT NULL;

CREATE TABLE agent_versions (
	agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
	version INTEGER NOT NULL CHECK (version >= 1),
	note TEXT NOT NULL DEFAULT '',
	definition TEXT NOT NULL CHECK (json_valid(definition)),
	published_by TEXT NOT NULL DEFAULT '',
	published_at TEXT NOT NULL,
	PRIMARY KEY (agent_id, version)
) STRICT, WITHOUT ROWID;

CREATE TABLE phone_numbers (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	number TEXT NOT NULL UNIQUE,
	trunk TEXT,
	agent_id TEXT REFERENCES agents (id) ON DELETE SET NULL,
	label TEXT NOT NULL DEFAULT '',
	assigned_at TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX phone_numbers_org_id ON phone_numbers (org_id, id);
CREATE INDEX phone_numbers_agent_id ON phone_numbers (agent_id, assigned_at, id);

CREATE TABLE idempotency_keys (
	org_id TEXT NOT NULL REFERENCES organizations (id),
	operation TEXT NOT NULL,
	key TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	status INTEGER NOT NULL,
	header TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(header)),
	body BLOB NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	PRIMARY KEY (org_id, operation, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
