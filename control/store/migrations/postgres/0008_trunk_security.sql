-- 0008 trunk security (issue 21): SRTP and TLS settings of a trunk (PostgreSQL). The client
-- certificate's private key is sealed with the master key. Keep in step with
-- ../sqlite/0008_trunk_security.sql.

ALTER TABLE sip_trunks ADD COLUMN srtp text NOT NULL DEFAULT 'disabled' CHECK (srtp IN ('disabled', 'allowed', 'required'));
ALTER TABLE sip_trunks ADD COLUMN srtp_over_clear boolean NOT NULL DEFAULT false;
ALTER TABLE sip_trunks ADD COLUMN tls_ca text NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN tls_client_cert text NOT NULL DEFAULT '';
ALTER TABLE sip_trunks ADD COLUMN tls_client_key_sealed text;
