-- 0004 trunks: the SIP trunks Parley exchanges calls with (SQLite). Trunks belong to the
-- deployment, not to an organization: the operator manages them (`parley admin trunks`), and
-- phone numbers name theirs. The digest password is stored sealed with the master key
-- (secrets.Box, AES-256-GCM, bound to "trunk:<id>:password"), never in clear.
-- Keep in step with ../postgres/0004_trunks.sql.

CREATE TABLE sip_trunks (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	uri TEXT NOT NULL,
	transport TEXT NOT NULL CHECK (transport IN ('udp', 'tcp', 'tls')),
	username TEXT NOT NULL DEFAULT '',
	password_sealed TEXT,
	allowed_sources TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(allowed_sources)),
	inbound_auth INTEGER NOT NULL DEFAULT 0 CHECK (inbound_auth IN (0, 1)),
	from_domain TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;
