-- 0003 conversations: conversations with their transcript lines and steering commands,
-- scheduled calls, chat attachments, the do-not-call list and recorded events (SQLite).
-- Keep in step with ../postgres/0003_conversations.sql.

-- agent_id has no foreign key: a conversation outlives the purge of its agent.
CREATE TABLE conversations (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	agent_id TEXT NOT NULL,
	agent_version INTEGER CHECK (agent_version IS NULL OR agent_version >= 1),
	channel TEXT NOT NULL CHECK (channel IN ('phone', 'voice', 'chat', 'whatsapp')),
	direction TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
	mode TEXT NOT NULL CHECK (mode IN ('live', 'test')),
	status TEXT NOT NULL CHECK (status IN ('pending', 'ringing', 'in_progress', 'ended')),
	end_reason TEXT,
	via_api INTEGER NOT NULL DEFAULT 0,
	external_id TEXT,
	language TEXT NOT NULL,
	from_number TEXT,
	to_number TEXT,
	phone_number_id TEXT,
	metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
	variables TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(variables)),
	turns TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(turns)),
	cost TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(cost)),
	cost_micros INTEGER NOT NULL DEFAULT 0,
	owner_node TEXT,
	recording TEXT,
	last_seq INTEGER NOT NULL DEFAULT 0,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	ringing_at TEXT,
	started_at TEXT,
	ended_at TEXT,
	deleted_at TEXT
) STRICT;

CREATE INDEX conversations_org_id ON conversations (org_id, id);
CREATE INDEX conversations_live ON conversations (status, updated_at) WHERE status <> 'ended';

CREATE TABLE conversation_lines (
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	seq INTEGER NOT NULL CHECK (seq >= 1),
	role TEXT NOT NULL,
	text TEXT NOT NULL,
	start_at TEXT NOT NULL,
	end_at TEXT NOT NULL,
	interrupted INTEGER NOT NULL DEFAULT 0,
	meta TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta)),
	created_at TEXT NOT NULL,
	PRIMARY KEY (conversation_id, seq)
) STRICT;

CREATE TABLE conversation_commands (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	kind TEXT NOT NULL CHECK (kind IN ('say', 'note', 'transfer', 'end')),
	status TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
	reason TEXT,
	params TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(params)),
	created_at TEXT NOT NULL,
	completed_at TEXT
) STRICT;

CREATE INDEX conversation_commands_conversation ON conversation_commands (conversation_id, status);

CREATE TABLE scheduled_calls (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	agent_id TEXT NOT NULL,
	mode TEXT NOT NULL CHECK (mode IN ('live', 'test')),
	request TEXT NOT NULL CHECK (json_valid(request)),
	to_number TEXT NOT NULL,
	dial_at TEXT NOT NULL,
	due_at TEXT NOT NULL,
	status TEXT NOT NULL CHECK (status IN ('scheduled', 'dialing', 'placed', 'failed', 'cancelled')),
	failure_code TEXT,
	failure_reason TEXT,
	conversation_id TEXT,
	attempts INTEGER NOT NULL DEFAULT 0,
	leased_by TEXT,
	lease_until TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	placed_at TEXT,
	cancelled_at TEXT
) STRICT;

CREATE INDEX scheduled_calls_org_id ON scheduled_calls (org_id, id);
CREATE INDEX scheduled_calls_due ON scheduled_calls (status, due_at);

CREATE TABLE attachments (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	key_id TEXT NOT NULL,
	mime TEXT NOT NULL,
	size INTEGER NOT NULL CHECK (size > 0),
	path TEXT NOT NULL,
	conversation_id TEXT,
	created_at TEXT NOT NULL
) STRICT;

CREATE INDEX attachments_conversation ON attachments (conversation_id);
CREATE INDEX attachments_created ON attachments (created_at) WHERE conversation_id IS NULL;

CREATE TABLE do_not_call (
	org_id TEXT NOT NULL REFERENCES organizations (id),
	number TEXT NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	PRIMARY KEY (org_id, number)
) STRICT;

CREATE TABLE events (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT,
	mode TEXT NOT NULL CHECK (mode IN ('live', 'test')),
	type TEXT NOT NULL,
	conversation_id TEXT,
	agent_id TEXT,
	data TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(data)),
	created_at TEXT NOT NULL
) STRICT;

CREATE INDEX events_org_id ON events (org_id, id);
