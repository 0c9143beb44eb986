-- 0016 whatsapp (issue 19): the messaging-app channel (PostgreSQL). A sender is a WhatsApp Cloud API
-- phone number of a project with the agent that answers it; its access token and app secret are
-- vault secrets, referenced by id (never stored here). A whatsapp conversation is one
-- conversation row plus its thread (sender, user, last inbound time: the 24-hour window); every
-- message in or out is kept with Meta's id (wamid, unique: Meta retries deliveries) and status.
-- Keep in step with ../sqlite/0016_whatsapp.sql.

CREATE TABLE whatsapp_senders (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	agent_id uuid REFERENCES agents (id) ON DELETE SET NULL,
	phone_number_id text NOT NULL UNIQUE,
	business_account_id text NOT NULL DEFAULT '',
	display_number text NOT NULL DEFAULT '',
	access_token_secret_id text,
	app_secret_secret_id text,
	verify_token text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE INDEX whatsapp_senders_org_id ON whatsapp_senders (org_id, id);

CREATE TABLE whatsapp_conversations (
	conversation_id uuid PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
	org_id uuid NOT NULL REFERENCES organizations (id),
	sender_id uuid NOT NULL REFERENCES whatsapp_senders (id) ON DELETE CASCADE,
	user_id text NOT NULL,
	last_inbound_at timestamptz,
	created_at timestamptz NOT NULL
);

CREATE INDEX whatsapp_conversations_thread ON whatsapp_conversations (sender_id, user_id, conversation_id);

-- The thread of a number and a user points at its current conversation. A conversation is
-- started only by moving the pointer from the one it replaces (compare-and-set, in the
-- transaction that creates it), so two messages of a new user arriving together, on any nodes,
-- start one conversation.
CREATE TABLE whatsapp_threads (
	sender_id uuid NOT NULL REFERENCES whatsapp_senders (id) ON DELETE CASCADE,
	user_id text NOT NULL,
	conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	PRIMARY KEY (sender_id, user_id)
);

CREATE TABLE whatsapp_messages (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	sender_id uuid NOT NULL REFERENCES whatsapp_senders (id) ON DELETE CASCADE,
	conversation_id uuid REFERENCES conversations (id) ON DELETE CASCADE,
	direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
	wamid text UNIQUE,
	user_id text NOT NULL,
	type text NOT NULL,
	body jsonb NOT NULL DEFAULT '{}',
	status text NOT NULL,
	error_code integer,
	error_title text NOT NULL DEFAULT '',
	note text NOT NULL DEFAULT '',
	sent_at timestamptz,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE INDEX whatsapp_messages_conversation ON whatsapp_messages (conversation_id, id);
