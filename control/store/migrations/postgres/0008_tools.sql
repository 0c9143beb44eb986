-- 0008 tools (issue 17): the credential vault, HTTP tools, MCP servers and the record of tool
-- calls (PostgreSQL). Keep in step with ../sqlite/0008_tools.sql.

-- A vault secret's value is sealed under its own data key (AES-256-GCM, value_sealed); the data
-- key is wrapped by the master key named by key_id (data_key_wrapped). Both bind the
-- organization and the secret's id as additional data. No column holds a value in clear.
CREATE TABLE vault_secrets (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	name text NOT NULL,
	name_key text NOT NULL,
	description text NOT NULL DEFAULT '',
	type text NOT NULL CHECK (type IN ('bearer', 'header', 'basic', 'query')),
	header_name text NOT NULL DEFAULT '',
	query_name text NOT NULL DEFAULT '',
	username text NOT NULL DEFAULT '',
	key_id text NOT NULL,
	data_key_wrapped text NOT NULL,
	value_sealed text NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	last_used_at timestamptz
);

CREATE UNIQUE INDEX vault_secrets_project_name ON vault_secrets (project_id, name_key);
CREATE INDEX vault_secrets_org_id ON vault_secrets (org_id, id);
CREATE INDEX vault_secrets_key_id ON vault_secrets (key_id);

-- What uses a secret (a tool, an MCP server, a messaging-app sender, …): a secret in use cannot
-- be deleted. Each user registers its own rows, replaced whenever it changes.
CREATE TABLE vault_secret_uses (
	secret_id uuid NOT NULL REFERENCES vault_secrets (id),
	org_id uuid NOT NULL,
	user_type text NOT NULL,
	user_id text NOT NULL,
	user_name text NOT NULL,
	PRIMARY KEY (secret_id, user_type, user_id)
);

CREATE INDEX vault_secret_uses_user ON vault_secret_uses (user_type, user_id);

CREATE TABLE tools (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	name text NOT NULL,
	name_key text NOT NULL,
	spec jsonb NOT NULL,
	secret_id uuid REFERENCES vault_secrets (id),
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX tools_project_name ON tools (project_id, name_key);
CREATE INDEX tools_org_id ON tools (org_id, id);

-- An MCP server with the tool list discovered when it was saved or last refreshed.
CREATE TABLE mcp_servers (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	name text NOT NULL,
	name_key text NOT NULL,
	spec jsonb NOT NULL,
	secret_id uuid REFERENCES vault_secrets (id),
	discovered jsonb NOT NULL DEFAULT '[]',
	protocol_version text NOT NULL DEFAULT '',
	last_error text NOT NULL DEFAULT '',
	refreshed_at timestamptz,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX mcp_servers_project_name ON mcp_servers (project_id, name_key);
CREATE INDEX mcp_servers_org_id ON mcp_servers (org_id, id);

-- One tool call of a conversation: the arguments with secrets redacted, never a result's content.
CREATE TABLE tool_calls (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL,
	conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	tool_name text NOT NULL,
	kind text NOT NULL CHECK (kind IN ('http', 'mcp')),
	arguments jsonb NOT NULL,
	status text NOT NULL,
	duration_ms integer NOT NULL,
	result_bytes integer NOT NULL,
	error text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL
);

CREATE INDEX tool_calls_conversation ON tool_calls (conversation_id, id);
