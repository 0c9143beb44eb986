-- 0004 trunks: the SIP trunks Parley exchanges calls with (PostgreSQL). Trunks belong to the
-- deployment, not to an organization; the digest password is stored sealed with the master key.
-- Keep in step with ../sqlite/0004_trunks.sql.

CREATE TABLE sip_trunks (
	id uuid PRIMARY KEY,
	name text NOT NULL UNIQUE,
	uri text NOT NULL,
	transport text NOT NULL CHECK (transport IN ('udp', 'tcp', 'tls')),
	username text NOT NULL DEFAULT '',
	password_sealed text,
	allowed_sources jsonb NOT NULL DEFAULT '[]',
	inbound_auth boolean NOT NULL DEFAULT false,
	from_domain text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);
