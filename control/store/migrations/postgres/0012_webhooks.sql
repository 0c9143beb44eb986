-- 0010 webhooks (issue 14): receivers that hear a project's events, the deliveries made to them
-- (one per event and receiver; its id is the webhook-id of every attempt) and each attempt.
-- A delivery is carried by a job of the queue (kind webhooks.deliver), enqueued in the
-- transaction that records the event. Conversations gain their post-call analysis and collected
-- values. Keep in step with ../sqlite/0010_webhooks.sql.

CREATE TABLE webhook_receivers (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	mode text NOT NULL CHECK (mode IN ('live', 'test')),
	url text NOT NULL,
	-- The event types heard (a JSON array); NULL: the default set, which grows with new types.
	events jsonb,
	agent_ids jsonb NOT NULL DEFAULT '[]',
	include_values boolean NOT NULL DEFAULT true,
	-- The signing secret, sealed under the master key; after a rotation the previous one signs
	-- too until prev_secret_until.
	secret_sealed text NOT NULL,
	prev_secret_sealed text,
	prev_secret_until timestamptz,
	disabled_at timestamptz,
	disabled_reason text,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE INDEX webhook_receivers_project ON webhook_receivers (project_id, mode);
CREATE INDEX webhook_receivers_org ON webhook_receivers (org_id, id);

CREATE TABLE webhook_deliveries (
	id uuid PRIMARY KEY,
	receiver_id uuid NOT NULL REFERENCES webhook_receivers (id) ON DELETE CASCADE,
	event_id uuid NOT NULL,
	event_type text NOT NULL,
	status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
	attempts integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz,
	last_status_code integer,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	delivered_at timestamptz
);

CREATE INDEX webhook_deliveries_receiver ON webhook_deliveries (receiver_id, id);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (receiver_id, status, id);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);

CREATE TABLE webhook_attempts (
	delivery_id uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
	n integer NOT NULL CHECK (n >= 1),
	at timestamptz NOT NULL,
	status_code integer,
	duration_ms integer NOT NULL,
	response_body text NOT NULL DEFAULT '',
	error text NOT NULL DEFAULT '',
	PRIMARY KEY (delivery_id, n)
);

-- GET /v1/events: newest first by organization and mode, with type and conversation filters;
-- the 30-day purge.
CREATE INDEX events_org_mode ON events (org_id, mode, id);
CREATE INDEX events_conversation ON events (conversation_id, id) WHERE conversation_id IS NOT NULL;
CREATE INDEX events_created ON events (created_at);

ALTER TABLE conversations ADD COLUMN analysis jsonb;
ALTER TABLE conversations ADD COLUMN collected jsonb;
ALTER TABLE conversations ADD COLUMN analyzed_at timestamptz;

-- The queue's claim of due jobs, oldest first, reads this index in order (issue 14: a thousand
-- deliveries a second claim often; jobs_due alone left the tie-break on id to a sort).
CREATE INDEX jobs_due_order ON jobs (next_attempt_at, id) WHERE state = 'queued';
