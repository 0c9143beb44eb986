-- 0006 credit ledger: each credit transaction names its kind (top_up, call_minutes, chat_turns,
-- stt_seconds, llm_tokens, tts_characters, testing, adjustment, usage; the set is open and
-- checked by the store) and the conversation it charges; calls in progress reserve credit
-- (SQLite). Keep in step with ../postgres/0006_credit_ledger.sql.

ALTER TABLE credit_transactions ADD COLUMN kind TEXT NOT NULL DEFAULT 'adjustment';
ALTER TABLE credit_transactions ADD COLUMN conversation_id TEXT;

-- Transactions made before kinds: credit added is a top-up; a conversation's charge, which
-- was one sum, is usage; any other change stays an adjustment.
UPDATE credit_transactions SET kind = 'top_up' WHERE amount_micros > 0;
UPDATE credit_transactions SET kind = 'usage', conversation_id = substr(reason, 14)
	WHERE amount_micros < 0 AND reason LIKE 'conversation %' AND length(reason) = 49;

CREATE INDEX credit_transactions_org_kind ON credit_transactions (org_id, kind, id);

-- A call in progress holds credit: amount_micros covers it until covered_until, and the hold
-- counts against the organization's available credit until expires_at (a little after, so a
-- renewal a moment late does not free it; a node that died stops holding by itself). The
-- hold is dropped in the transaction that charges the conversation.
CREATE TABLE credit_reservations (
	conversation_id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	amount_micros INTEGER NOT NULL CHECK (amount_micros >= 0),
	covered_until TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX credit_reservations_org ON credit_reservations (org_id, expires_at);
