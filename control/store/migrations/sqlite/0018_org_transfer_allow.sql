-- 0018 organization transfer allow-list (issue 22 item 7)
-- The non-public networks (CIDRs) every call of the organization may be transferred
-- to, on top of the node's PARLEY_TRANSFER_ALLOW and the call's trunk's list. It is what calls
-- with no trunk of their own (a number without a trunk) go by. Keep in step with ../postgres.
ALTER TABLE organizations ADD COLUMN transfer_allow TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(transfer_allow));
