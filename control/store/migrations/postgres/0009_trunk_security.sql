-- 0009 trunk security (issue 21): SRTP and TLS settings of a trunk (PostgreSQL). The client
-- certificate's private key is sealed with the master key. Keep in step with
-- ../sqlite/0009_trunk_security.sql.

ALTER TABLE sip_trunks ADD COLUMN srtp text NOT NULL DEFAULT 'disabled' CHECK (srtp IN ('disabled', 'allowed', 'required'));
ALTER TABLE sip_trunks ADD COLUMN srtp_over_clear boolean NOT NULL DEFAULT false;
ALTER TABLE sip_trunks ADD COLUMN tls_ca text NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN tls_client_cert text NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN tls_client_key_sealed text;

-- Registration (issue 21): a trunk may register to a registrar (with the trunk's digest
-- credentials), and each media node records the state of its binding.
ALTER TABLE sip_trunks ADD COLUMN reg_registrar text NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN reg_backup text NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN reg_aor text NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN reg_proxy text NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN reg_expires integer NOT NULL DEFAULT 0 CHECK (reg_expires BETWEEN 0 AND 86400);

CREATE TABLE sip_registrations (
	trunk_id uuid NOT NULL REFERENCES sip_trunks (id) ON DELETE CASCADE,
	node_id text NOT NULL,
	state text NOT NULL CHECK (state IN ('registering', 'registered', 'failed', 'unregistered')),
	registrar text NOT NULL DEFAULT '',
	error text NOT NULL DEFAULT '',
	expires_at timestamptz,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (trunk_id, node_id)
);
