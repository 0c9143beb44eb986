-- 0017 organization transfer allow-list (issue 22 item 7; the task's number is 0020, renumbered
-- at merge) (PostgreSQL). Keep in step with ../sqlite/0017_org_transfer_allow.sql.
ALTER TABLE organizations ADD COLUMN transfer_allow jsonb NOT NULL DEFAULT '[]';
