-- 0007 settings of the service itself, such as the master key's check value (a value sealed
-- under the master key: a start with another key is refused). Keep in step with ../sqlite.
CREATE TABLE service_settings (
	name text PRIMARY KEY,
	value text NOT NULL,
	updated_at timestamptz NOT NULL
);
