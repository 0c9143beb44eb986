-- 0008 trunk security (issue 21): SRTP and TLS settings of a trunk (SQLite). The client
-- certificate's private key is sealed with the master key like the digest password (bound to
-- "trunk:<id>:tls_key"), never stored in clear. Keep in step with ../postgres/0008_trunk_security.sql.

ALTER TABLE sip_trunks ADD COLUMN srtp TEXT NOT NULL DEFAULT 'disabled' CHECK (srtp IN ('disabled', 'allowed', 'required'));
ALTER TABLE sip_trunks ADD COLUMN srtp_over_clear INTEGER NOT NULL DEFAULT 0 CHECK (srtp_over_clear IN (0, 1));
ALTER TABLE sip_trunks ADD COLUMN tls_ca TEXT NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN tls_client_cert TEXT NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN tls_client_key_sealed TEXT;
