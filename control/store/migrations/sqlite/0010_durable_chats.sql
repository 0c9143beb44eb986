-- 0010 durable chats (issue 13): what a chat carries from one message to the next is kept
-- with its conversation, so any node answers the next message, after a restart too. Keep in
-- step with ../postgres/0010_durable_chats.sql.
--
-- chat_lease names the one holder (node and a token) that may answer a message of the chat
-- until chat_lease_until; chat_idle_at is when the chat ends for want of messages.
ALTER TABLE conversations ADD COLUMN chat_turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN chat_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN chat_cost TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(chat_cost));
ALTER TABLE conversations ADD COLUMN chat_idle_seconds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN chat_idle_at TEXT;
ALTER TABLE conversations ADD COLUMN chat_lease TEXT;
ALTER TABLE conversations ADD COLUMN chat_lease_until TEXT;

CREATE INDEX conversations_chat_idle ON conversations (chat_idle_at) WHERE channel = 'chat' AND status = 'in_progress';

-- The LLM messages of a chat (without the system prompt), in order: n starts at 1.
CREATE TABLE chat_messages (
	conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	n INTEGER NOT NULL CHECK (n >= 1),
	message TEXT NOT NULL CHECK (json_valid(message)),
	PRIMARY KEY (conversation_id, n)
) STRICT;
