-- 0003 conversations: conversations with their transcript lines and steering commands,
-- scheduled calls, chat attachments, the do-not-call list and recorded events (PostgreSQL).
-- Keep in step with ../sqlite/0003_conversations.sql.

-- agent_id has no foreign key: a conversation outlives the purge of its agent.
CREATE TABLE conversations (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	agent_id uuid NOT NULL,
	agent_version integer CHECK (agent_version IS NULL OR agent_version >= 1),
	channel text NOT NULL CHECK (channel IN ('phone', 'voice', 'chat', 'whatsapp')),
	direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
	mode text NOT NULL CHECK (mode IN ('live', 'test')),
	status text NOT NULL CHECK (status IN ('pending', 'ringing', 'in_progress', 'ended')),
	end_reason text,
	via_api boolean NOT NULL DEFAULT false,
	external_id text,
	language text NOT NULL,
	from_number text,
	to_number text,
	phone_number_id uuid,
	metadata jsonb NOT NULL DEFAULT '{}',
	variables jsonb NOT NULL DEFAULT '{}',
	turns jsonb NOT NULL DEFAULT '[]',
	cost jsonb NOT NULL DEFAULT '{}',
	cost_micros bigint NOT NULL DEFAULT 0,
	owner_node text,
	recording text,
	last_seq bigint NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	ringing_at timestamptz,
	started_at timestamptz,
	ended_at timestamptz,
	deleted_at timestamptz
);

CREATE INDEX conversations_org_id ON conversations (org_id, id);
CREATE INDEX conversations_live ON conversations (status, updated_at) WHERE status <> 'ended';

CREATE TABLE conversation_lines (
	conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	seq bigint NOT NULL CHECK (seq >= 1),
	role text NOT NULL,
	text text NOT NULL,
	start_at timestamptz NOT NULL,
	end_at timestamptz NOT NULL,
	interrupted boolean NOT NULL DEFAULT false,
	meta jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL,
	PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE conversation_commands (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	kind text NOT NULL CHECK (kind IN ('say', 'note', 'transfer', 'end')),
	status text NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
	reason text,
	params jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL,
	completed_at timestamptz
);

CREATE INDEX conversation_commands_conversation ON conversation_commands (conversation_id, status);

CREATE TABLE scheduled_calls (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	agent_id uuid NOT NULL,
	mode text NOT NULL CHECK (mode IN ('live', 'test')),
	request jsonb NOT NULL,
	to_number text NOT NULL,
	dial_at timestamptz NOT NULL,
	due_at timestamptz NOT NULL,
	status text NOT NULL CHECK (status IN ('scheduled', 'dialing', 'placed', 'failed', 'cancelled')),
	failure_code text,
	failure_reason text,
	conversation_id uuid,
	attempts integer NOT NULL DEFAULT 0,
	leased_by text,
	lease_until timestamptz,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	placed_at timestamptz,
	cancelled_at timestamptz
);

CREATE INDEX scheduled_calls_org_id ON scheduled_calls (org_id, id);
CREATE INDEX scheduled_calls_due ON scheduled_calls (status, due_at);

CREATE TABLE attachments (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	key_id text NOT NULL,
	mime text NOT NULL,
	size bigint NOT NULL CHECK (size > 0),
	path text NOT NULL,
	conversation_id uuid,
	created_at timestamptz NOT NULL
);

CREATE INDEX attachments_conversation ON attachments (conversation_id);
CREATE INDEX attachments_created ON attachments (created_at) WHERE conversation_id IS NULL;

CREATE TABLE do_not_call (
	org_id uuid NOT NULL REFERENCES organizations (id),
	number text NOT NULL,
	reason text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	PRIMARY KEY (org_id, number)
);

CREATE TABLE events (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid,
	mode text NOT NULL CHECK (mode IN ('live', 'test')),
	type text NOT NULL,
	conversation_id uuid,
	agent_id uuid,
	data jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL
);

CREATE INDEX events_org_id ON events (org_id, id);
