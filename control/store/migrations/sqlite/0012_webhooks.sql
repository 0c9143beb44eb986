-- 0010 webhooks (issue 14): receivers that hear a project's events, the deliveries made to them
-- (one per event and receiver; its id is the webhook-id of every attempt) and each attempt.
-- A delivery is carried by a job of the queue (kind webhooks.deliver), enqueued in the
-- transaction that records the event. Conversations gain their post-call analysis and collected
-- values. Keep in step with ../postgres/0010_webhooks.sql.

CREATE TABLE webhook_receivers (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	mode TEXT NOT NULL CHECK (mode IN ('live', 'test')),
	url TEXT NOT NULL,
	-- The event types heard (a JSON array); NULL: the default set, which grows with new types.
	events TEXT CHECK (events IS NULL OR json_valid(events)),
	agent_ids TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(agent_ids)),
	include_values INTEGER NOT NULL DEFAULT 1,
	-- The signing secret, sealed under the master key; after a rotation the previous one signs
	-- too until prev_secret_until.
	secret_sealed TEXT NOT NULL,
	prev_secret_sealed TEXT,
	prev_secret_until TEXT,
	disabled_at TEXT,
	disabled_reason TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;

CREATE INDEX webhook_receivers_project ON webhook_receivers (project_id, mode);
CREATE INDEX webhook_receivers_org ON webhook_receivers (org_id, id);

CREATE TABLE webhook_deliveries (
	id TEXT PRIMARY KEY,
	receiver_id TEXT NOT NULL REFERENCES webhook_receivers (id) ON DELETE CASCADE,
	event_id TEXT NOT NULL,
	event_type TEXT NOT NULL,
	status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
	attempts INTEGER NOT NULL DEFAULT 0,
	next_attempt_at TEXT,
	last_status_code INTEGER,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	delivered_at TEXT
) STRICT;

CREATE INDEX webhook_deliveries_receiver ON webhook_deliveries (receiver_id, id);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (receiver_id, status, id);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);

CREATE TABLE webhook_attempts (
	delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
	n INTEGER NOT NULL CHECK (n >= 1),
	at TEXT NOT NULL,
	status_code INTEGER,
	duration_ms INTEGER NOT NULL,
	response_body TEXT NOT NULL DEFAULT '',
	error TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (delivery_id, n)
) STRICT, WITHOUT ROWID;

-- GET /v1/events: newest first by organization and mode, with type and conversation filters;
-- the 30-day purge.
CREATE INDEX events_org_mode ON events (org_id, mode, id);
CREATE INDEX events_conversation ON events (conversation_id, id) WHERE conversation_id IS NOT NULL;
CREATE INDEX events_created ON events (created_at);

ALTER TABLE conversations ADD COLUMN analysis TEXT CHECK (analysis IS NULL OR json_valid(analysis));
ALTER TABLE conversations ADD COLUMN collected TEXT CHECK (collected IS NULL OR json_valid(collected));
ALTER TABLE conversations ADD COLUMN analyzed_at TEXT;

-- The queue's claim of due jobs, oldest first, reads this index in order (issue 14: a thousand
-- deliveries a second claim often; jobs_due alone left the tie-break on id to a sort).
CREATE INDEX jobs_due_order ON jobs (next_attempt_at, id) WHERE state = 'queued';
