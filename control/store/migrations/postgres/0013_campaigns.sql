-- 0010 campaigns (issue 15): contacts, the do-not-call list's reason and source, campaigns,
-- their contacts and each attempt at calling one (PostgreSQL). Keep in step with
-- ../sqlite/0010_campaigns.sql.

CREATE TABLE contacts (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	number text NOT NULL,
	name text NOT NULL DEFAULT '',
	timezone text NOT NULL DEFAULT '',
	external_id text,
	variables jsonb NOT NULL DEFAULT '{}',
	metadata jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX contacts_number ON contacts (project_id, number);
CREATE UNIQUE INDEX contacts_external ON contacts (project_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX contacts_org_id ON contacts (org_id, id);

ALTER TABLE do_not_call ADD COLUMN source text NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'caller_request', 'import'));

-- agent_id has no foreign key: a campaign's history outlives the purge of its agent.
CREATE TABLE campaigns (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	agent_id uuid NOT NULL,
	mode text NOT NULL CHECK (mode IN ('live', 'test')),
	name text NOT NULL,
	status text NOT NULL CHECK (status IN ('draft', 'scheduled', 'running', 'paused', 'completed', 'cancelled')),
	settings jsonb NOT NULL DEFAULT '{}',
	start_at timestamptz,
	paused_reason text,
	paused_code text,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	started_at timestamptz,
	finished_at timestamptz
);

CREATE INDEX campaigns_org_id ON campaigns (org_id, id);
CREATE INDEX campaigns_status ON campaigns (status, start_at);

-- A campaign's copy of each contact: it keeps the number and values it was called with (a
-- tombstone once the contact itself is deleted).
CREATE TABLE campaign_contacts (
	id uuid PRIMARY KEY,
	campaign_id uuid NOT NULL REFERENCES campaigns (id),
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	contact_id uuid,
	to_number text NOT NULL,
	name text NOT NULL DEFAULT '',
	timezone text NOT NULL DEFAULT '',
	external_id text,
	variables jsonb NOT NULL DEFAULT '{}',
	metadata jsonb NOT NULL DEFAULT '{}',
	state text NOT NULL CHECK (state IN ('queued', 'dialing', 'in_call', 'completed', 'no_answer', 'busy', 'voicemail', 'failed', 'skipped_dnc', 'cancelled')),
	attempts integer NOT NULL DEFAULT 0,
	last_outcome text,
	last_detail text,
	next_attempt_at timestamptz,
	conversation_id uuid,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	finished_at timestamptz
);

CREATE UNIQUE INDEX campaign_contacts_number ON campaign_contacts (campaign_id, to_number);
CREATE INDEX campaign_contacts_due ON campaign_contacts (campaign_id, state, next_attempt_at);
CREATE INDEX campaign_contacts_contact ON campaign_contacts (contact_id);

-- One row per attempt, made when the attempt is leased: its id is the conversation id the
-- call will take, minted before the INVITE.
CREATE TABLE campaign_attempts (
	conversation_id uuid PRIMARY KEY,
	campaign_id uuid NOT NULL REFERENCES campaigns (id),
	campaign_contact_id uuid NOT NULL REFERENCES campaign_contacts (id),
	attempt integer NOT NULL,
	state text NOT NULL CHECK (state IN ('leased', 'placed', 'finished', 'not_dialled')),
	outcome text,
	detail text,
	created_at timestamptz NOT NULL,
	finished_at timestamptz
);

-- An attempt given back before anything was dialled keeps its number, which the next takes again.
CREATE INDEX campaign_attempts_contact ON campaign_attempts (campaign_contact_id, attempt);
CREATE INDEX campaign_attempts_open ON campaign_attempts (campaign_id, state);
CREATE INDEX campaign_attempts_started ON campaign_attempts (campaign_id, created_at);
