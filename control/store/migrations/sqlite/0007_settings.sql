-- 0007 settings of the service itself, such as the master key's check value (a value sealed
-- under the master key: a start with another key is refused). Keep in step with ../postgres.
CREATE TABLE service_settings (
	name TEXT PRIMARY KEY,
	value TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
