-- 0010 voice (issue 22): how a call leg ended, and the networks a trunk's transfers and media
-- may use (PostgreSQL). Keep in step with ../sqlite/0010_voice.sql.

ALTER TABLE conversations ADD COLUMN end_sip_status integer CHECK (end_sip_status IS NULL OR end_sip_status BETWEEN 100 AND 699);
ALTER TABLE conversations ADD COLUMN end_q850_cause integer CHECK (end_q850_cause IS NULL OR end_q850_cause BETWEEN 1 AND 127);
ALTER TABLE conversations ADD COLUMN end_detail text;

ALTER TABLE sip_trunks ADD COLUMN transfer_allow jsonb NOT NULL DEFAULT '[]';
ALTER TABLE sip_trunks ADD COLUMN media_cidrs jsonb NOT NULL DEFAULT '[]';
