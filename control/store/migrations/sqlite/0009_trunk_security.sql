-- 0009 trunk security (issue 21): SRTP and TLS settings of a trunk (SQLite). The client
-- certificate's private key is sealed with the master key like the digest password (bound to
-- "trunk:<id>:tls_key"), never stored in clear. Keep in step with ../postgres/0009_trunk_security.sql.

ALTER TABLE sip_trunks ADD COLUMN srtp TEXT NOT NULL DEFAULT 'disabled' CHECK (srtp IN ('disabled', 'allowed', 'required'));
ALTER TABLE sip_trunks ADD COLUMN srtp_over_clear INTEGER NOT NULL DEFAULT 0 CHECK (srtp_over_clear IN (0, 1));
ALTER TABLE sip_trunks ADD COLUMN tls_ca TEXT NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN tls_client_cert TEXT NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN tls_client_key_sealed TEXT;

-- Registration (issue 21): a trunk may register to a registrar (with the trunk's digest
-- credentials), and each media node records the state of its binding.
ALTER TABLE sip_trunks ADD COLUMN reg_registrar TEXT NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN reg_backup TEXT NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN reg_aor TEXT NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN reg_proxy TEXT NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN reg_expires INTEGER NOT NULL DEFAULT 0 CHECK (reg_expires BETWEEN 0 AND 86400);

CREATE TABLE sip_registrations (
	trunk_id TEXT NOT NULL REFERENCES sip_trunks (id) ON DELETE CASCADE,
	node_id TEXT NOT NULL,
	state TEXT NOT NULL CHECK (state IN ('registering', 'registered', 'failed', 'unregistered')),
	registrar TEXT NOT NULL DEFAULT '',
	error TEXT NOT NULL DEFAULT '',
	expires_at TEXT,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (trunk_id, node_id)
) STRICT, WITHOUT ROWID;
