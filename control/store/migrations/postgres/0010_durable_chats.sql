-- 0010 durable chats (issue 13): what a chat carries from one message to the next is kept
-- with its conversation, so any node answers the next message, after a restart too. Keep in
-- step with ../sqlite/0010_durable_chats.sql.
--
-- chat_lease names the one holder (node and a token) that may answer a message of the chat
-- until chat_lease_until; chat_idle_at is when the chat ends for want of messages.
ALTER TABLE conversations ADD COLUMN chat_turns integer NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN chat_failures integer NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN chat_cost jsonb NOT NULL DEFAULT '{}';
ALTER TABLE conversations ADD COLUMN chat_idle_seconds integer NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN chat_idle_at timestamptz;
ALTER TABLE conversations ADD COLUMN chat_lease text;
ALTER TABLE conversations ADD COLUMN chat_lease_until timestamptz;

CREATE INDEX conversations_chat_idle ON conversations (chat_idle_at) WHERE channel = 'chat' AND status = 'in_progress';

-- The LLM messages of a chat (without the system prompt), in order: n starts at 1.
CREATE TABLE chat_messages (
	conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	n integer NOT NULL CHECK (n >= 1),
	message jsonb NOT NULL,
	PRIMARY KEY (conversation_id, n)
);
