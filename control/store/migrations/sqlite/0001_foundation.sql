-- 0001 foundation: organizations, credit, projects, API keys, audit log (SQLite).
-- IDs are UUIDv7 text; times are UTC text "YYYY-MM-DDTHH:MM:SS.ffffffZ", which sorts like the
-- time it names; booleans are 0/1; JSON is text. Keep in step with ../postgres/0001_foundation.sql.

CREATE TABLE organizations (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	frozen INTEGER NOT NULL DEFAULT 0 CHECK (frozen IN (0, 1)),
	credit_micros INTEGER NOT NULL DEFAULT 0,
	timezone TEXT NOT NULL DEFAULT 'UTC',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE credit_transactions (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	amount_micros INTEGER NOT NULL,
	balance_after INTEGER NOT NULL,
	reason TEXT NOT NULL,
	created_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX credit_transactions_org_id ON credit_transactions (org_id, id);

CREATE TABLE projects (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	name TEXT NOT NULL,
	frozen INTEGER NOT NULL DEFAULT 0 CHECK (frozen IN (0, 1)),
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	UNIQUE (org_id, name)
) STRICT, WITHOUT ROWID;

CREATE INDEX projects_org_id ON projects (org_id, id);

CREATE TABLE api_keys (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	name TEXT NOT NULL,
	mode TEXT NOT NULL CHECK (mode IN ('live', 'test')),
	prefix TEXT NOT NULL,
	hash TEXT NOT NULL UNIQUE,
	scopes TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(scopes)),
	all_projects INTEGER NOT NULL DEFAULT 0 CHECK (all_projects IN (0, 1)),
	project_ids TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(project_ids)),
	expires_at TEXT,
	revoked_at TEXT,
	last_used_at TEXT,
	created_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX api_keys_org_id ON api_keys (org_id, id);

CREATE TABLE audit_events (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT,
	actor_type TEXT NOT NULL CHECK (actor_type IN ('api_key', 'operator', 'system')),
	actor_id TEXT NOT NULL,
	actor_mode TEXT CHECK (actor_mode IN ('live', 'test')),
	action TEXT NOT NULL,
	object_type TEXT NOT NULL,
	object_id TEXT NOT NULL,
	request_id TEXT NOT NULL,
	data TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
	created_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX audit_events_org_id ON audit_events (org_id, id);
CREATE INDEX audit_events_org_action ON audit_events (org_id, action, id);
