-- 0018 organization transfer allow-list (issue 22 item 7)
-- (PostgreSQL). Keep in step with ../sqlite/0018_org_transfer_allow.sql.
ALTER TABLE organizations ADD COLUMN transfer_allow jsonb NOT NULL DEFAULT '[]';
