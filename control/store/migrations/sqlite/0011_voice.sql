-- 0010 voice (issue 22): how a call leg ended, and the networks a trunk's transfers and media
-- may use (SQLite). Keep in step with ../postgres/0010_voice.sql.

-- The SIP final status, the Q.850 cause (RFC 3326 Reason) and a short detail written for a
-- person, of a call that ended before or without an answer; NULL when none applies.
ALTER TABLE conversations ADD COLUMN end_sip_status INTEGER CHECK (end_sip_status IS NULL OR end_sip_status BETWEEN 100 AND 699);
ALTER TABLE conversations ADD COLUMN end_q850_cause INTEGER CHECK (end_q850_cause IS NULL OR end_q850_cause BETWEEN 1 AND 127);
ALTER TABLE conversations ADD COLUMN end_detail TEXT;

-- transfer_allow: the non-public networks (CIDRs) the trunk's calls may be transferred to, on
-- top of the node's PARLEY_TRANSFER_ALLOW. media_cidrs: the networks the carrier sends media
-- from and takes it at; empty accepts any address (the SDP's).
ALTER TABLE sip_trunks ADD COLUMN transfer_allow TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(transfer_allow));
ALTER TABLE sip_trunks ADD COLUMN media_cidrs TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(media_cidrs));
