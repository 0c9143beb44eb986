-- 0001 foundation: organizations, credit, projects, API keys, audit log (PostgreSQL).
-- Keep in step with ../sqlite/0001_foundation.sql.

CREATE TABLE organizations (
	id uuid PRIMARY KEY,
	name text NOT NULL UNIQUE,
	frozen boolean NOT NULL DEFAULT false,
	credit_micros bigint NOT NULL DEFAULT 0,
	timezone text NOT NULL DEFAULT 'UTC',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE TABLE credit_transactions (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	amount_micros bigint NOT NULL,
	balance_after bigint NOT NULL,
	reason text NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE INDEX credit_transactions_org_id ON credit_transactions (org_id, id);

CREATE TABLE projects (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	name text NOT NULL,
	frozen boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	UNIQUE (org_id, name)
);

CREATE INDEX projects_org_id ON projects (org_id, id);

CREATE TABLE api_keys (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	name text NOT NULL,
	mode text NOT NULL CHECK (mode IN ('live', 'test')),
	prefix text NOT NULL,
	hash text NOT NULL UNIQUE,
	scopes jsonb NOT NULL DEFAULT '[]',
	all_projects boolean NOT NULL DEFAULT false,
	project_ids jsonb NOT NULL DEFAULT '[]',
	expires_at timestamptz,
	revoked_at timestamptz,
	last_used_at timestamptz,
	created_at timestamptz NOT NULL
);

CREATE INDEX api_keys_org_id ON api_keys (org_id, id);

CREATE TABLE audit_events (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid,
	actor_type text NOT NULL CHECK (actor_type IN ('api_key', 'operator', 'system')),
	actor_id text NOT NULL,
	actor_mode text CHECK (actor_mode IN ('live', 'test')),
	action text NOT NULL,
	object_type text NOT NULL,
	object_id text NOT NULL,
	request_id text NOT NULL,
	data jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL
);

CREATE INDEX audit_events_org_id ON audit_events (org_id, id);
CREATE INDEX audit_events_org_action ON audit_events (org_id, action, id);
