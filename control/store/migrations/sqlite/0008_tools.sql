-- 0008 tools (issue 17): the credential vault, HTTP tools, MCP servers and the record of tool
-- calls (SQLite). Keep in step with ../postgres/0008_tools.sql.

-- A vault secret's value is sealed under its own data key (AES-256-GCM, value_sealed); the data
-- key is wrapped by the master key named by key_id (data_key_wrapped). Both bind the
-- organization and the secret's id as additional data. No column holds a value in clear.
CREATE TABLE vault_secrets (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	name TEXT NOT NULL,
	name_key TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	type TEXT NOT NULL CHECK (type IN ('bearer', 'header', 'basic', 'query')),
	header_name TEXT NOT NULL DEFAULT '',
	query_name TEXT NOT NULL DEFAULT '',
	username TEXT NOT NULL DEFAULT '',
	key_id TEXT NOT NULL,
	data_key_wrapped TEXT NOT NULL,
	value_sealed TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	last_used_at TEXT
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX vault_secrets_project_name ON vault_secrets (project_id, name_key);
CREATE INDEX vault_secrets_org_id ON vault_secrets (org_id, id);
CREATE INDEX vault_secrets_key_id ON vault_secrets (key_id);

-- What uses a secret (a tool, an MCP server, a messaging-app sender, …): a secret in use cannot
-- be deleted. Each user registers its own rows, replaced whenever it changes.
CREATE TABLE vault_secret_uses (
	secret_id TEXT NOT NULL REFERENCES vault_secrets (id),
	org_id TEXT NOT NULL,
	user_type TEXT NOT NULL,
	user_id TEXT NOT NULL,
	user_name TEXT NOT NULL,
	PRIMARY KEY (secret_id, user_type, user_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX vault_secret_uses_user ON vault_secret_uses (user_type, user_id);

CREATE TABLE tools (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	name TEXT NOT NULL,
	name_key TEXT NOT NULL,
	spec TEXT NOT NULL CHECK (json_valid(spec)),
	secret_id TEXT REFERENCES vault_secrets (id),
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX tools_project_name ON tools (project_id, name_key);
CREATE INDEX tools_org_id ON tools (org_id, id);

-- An MCP server with the tool list discovered when it was saved or last refreshed.
CREATE TABLE mcp_servers (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	name TEXT NOT NULL,
	name_key TEXT NOT NULL,
	spec TEXT NOT NULL CHECK (json_valid(spec)),
	secret_id TEXT REFERENCES vault_secrets (id),
	discovered TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(discovered)),
	protocol_version TEXT NOT NULL DEFAULT '',
	last_error TEXT NOT NULL DEFAULT '',
	refreshed_at TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX mcp_servers_project_name ON mcp_servers (project_id, name_key);
CREATE INDEX mcp_servers_org_id ON mcp_servers (org_id, id);

-- One tool call of a conversation: the arguments with secrets redacted, never a result's content.
CREATE TABLE tool_calls (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	tool_name TEXT NOT NULL,
	kind TEXT NOT NULL CHECK (kind IN ('http', 'mcp')),
	arguments TEXT NOT NULL CHECK (json_valid(arguments)),
	status TEXT NOT NULL,
	duration_ms INTEGER NOT NULL,
	result_bytes INTEGER NOT NULL,
	error TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX tool_calls_conversation ON tool_calls (conversation_id, id);
