-- 0010 campaigns (issue 15): contacts, the do-not-call list's reason and source, campaigns,
-- their contacts and each attempt at calling one (SQLite). Keep in step with
-- ../postgres/0010_campaigns.sql.

CREATE TABLE contacts (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	number TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	timezone TEXT NOT NULL DEFAULT '',
	external_id TEXT,
	variables TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(variables)),
	metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;

CREATE UNIQUE INDEX contacts_number ON contacts (project_id, number);
CREATE UNIQUE INDEX contacts_external ON contacts (project_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX contacts_org_id ON contacts (org_id, id);

ALTER TABLE do_not_call ADD COLUMN source TEXT NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'caller_request', 'import'));

-- agent_id has no foreign key: a campaign's history outlives the purge of its agent.
CREATE TABLE campaigns (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	agent_id TEXT NOT NULL,
	mode TEXT NOT NULL CHECK (mode IN ('live', 'test')),
	name TEXT NOT NULL,
	status TEXT NOT NULL CHECK (status IN ('draft', 'scheduled', 'running', 'paused', 'completed', 'cancelled')),
	settings TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(settings)),
	start_at TEXT,
	paused_reason TEXT,
	paused_code TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	started_at TEXT,
	finished_at TEXT
) STRICT;

CREATE INDEX campaigns_org_id ON campaigns (org_id, id);
CREATE INDEX campaigns_status ON campaigns (status, start_at);

-- A campaign's copy of each contact: it keeps the number and values it was called with (a
-- tombstone once the contact itself is deleted).
CREATE TABLE campaign_contacts (
	id TEXT PRIMARY KEY,
	campaign_id TEXT NOT NULL REFERENCES campaigns (id),
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	contact_id TEXT,
	to_number TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	timezone TEXT NOT NULL DEFAULT '',
	external_id TEXT,
	variables TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(variables)),
	metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
	state TEXT NOT NULL CHECK (state IN ('queued', 'dialing', 'in_call', 'completed', 'no_answer', 'busy', 'voicemail', 'failed', 'skipped_dnc', 'cancelled')),
	attempts INTEGER NOT NULL DEFAULT 0,
	last_outcome TEXT,
	last_detail TEXT,
	next_attempt_at TEXT,
	conversation_id TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	finished_at TEXT
) STRICT;

CREATE UNIQUE INDEX campaign_contacts_number ON campaign_contacts (campaign_id, to_number);
CREATE INDEX campaign_contacts_due ON campaign_contacts (campaign_id, state, next_attempt_at);
CREATE INDEX campaign_contacts_contact ON campaign_contacts (contact_id);

-- One row per attempt, made when the attempt is leased: its id is the conversation id the
-- call will take, minted before the INVITE.
CREATE TABLE campaign_attempts (
	conversation_id TEXT PRIMARY KEY,
	campaign_id TEXT NOT NULL REFERENCES campaigns (id),
	campaign_contact_id TEXT NOT NULL REFERENCES campaign_contacts (id),
	attempt INTEGER NOT NULL,
	state TEXT NOT NULL CHECK (state IN ('leased', 'placed', 'finished', 'not_dialled')),
	outcome TEXT,
	detail TEXT,
	created_at TEXT NOT NULL,
	finished_at TEXT
) STRICT;

-- An attempt given back before anything was dialled keeps its number, which the next takes again.
CREATE INDEX campaign_attempts_contact ON campaign_attempts (campaign_contact_id, attempt);
CREATE INDEX campaign_attempts_open ON campaign_attempts (campaign_id, state);
CREATE INDEX campaign_attempts_started ON campaign_attempts (campaign_id, created_at);
