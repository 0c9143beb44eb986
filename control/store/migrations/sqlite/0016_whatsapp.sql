-- 0016 whatsapp (issue 19): the messaging-app channel (SQLite). A sender is a WhatsApp Cloud API
-- phone number of a project with the agent that answers it; its access token and app secret are
-- vault secrets, referenced by id (never stored here). A whatsapp conversation is one
-- conversation row plus its thread (sender, user, last inbound time: the 24-hour window); every
-- message in or out is kept with Meta's id (wamid, unique: Meta retries deliveries) and status.
-- Keep in step with ../postgres/0016_whatsapp.sql.

CREATE TABLE whatsapp_senders (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	agent_id TEXT REFERENCES agents (id) ON DELETE SET NULL,
	phone_number_id TEXT NOT NULL UNIQUE,
	business_account_id TEXT NOT NULL DEFAULT '',
	display_number TEXT NOT NULL DEFAULT '',
	access_token_secret_id TEXT,
	app_secret_secret_id TEXT,
	verify_token TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;

CREATE INDEX whatsapp_senders_org_id ON whatsapp_senders (org_id, id);

CREATE TABLE whatsapp_conversations (
	conversation_id TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	sender_id TEXT NOT NULL REFERENCES whatsapp_senders (id) ON DELETE CASCADE,
	user_id TEXT NOT NULL,
	last_inbound_at TEXT,
	created_at TEXT NOT NULL
) STRICT;

CREATE INDEX whatsapp_conversations_thread ON whatsapp_conversations (sender_id, user_id, conversation_id);

-- The thread of a number and a user points at its current conversation. A conversation is
-- started only by moving the pointer from the one it replaces (compare-and-set, in the
-- transaction that creates it), so two messages of a new user arriving together, on any nodes,
-- start one conversation.
CREATE TABLE whatsapp_threads (
	sender_id TEXT NOT NULL REFERENCES whatsapp_senders (id) ON DELETE CASCADE,
	user_id TEXT NOT NULL,
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	PRIMARY KEY (sender_id, user_id)
) STRICT;

CREATE TABLE whatsapp_messages (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	sender_id TEXT NOT NULL REFERENCES whatsapp_senders (id) ON DELETE CASCADE,
	conversation_id TEXT REFERENCES conversations (id) ON DELETE CASCADE,
	direction TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
	wamid TEXT UNIQUE,
	user_id TEXT NOT NULL,
	type TEXT NOT NULL,
	body TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(body)),
	status TEXT NOT NULL,
	error_code INTEGER,
	error_title TEXT NOT NULL DEFAULT '',
	note TEXT NOT NULL DEFAULT '',
	sent_at TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;

CREATE INDEX whatsapp_messages_conversation ON whatsapp_messages (conversation_id, id);
