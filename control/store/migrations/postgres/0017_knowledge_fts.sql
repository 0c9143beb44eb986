-- 0017 knowledge full text (issue 16, retrieval speed): the GIN index without its pending list
-- (fastupdate off), so that a search never scans unmerged entries; chunks are written a
-- document at a time, so the cost lands on indexing, not on a turn. Keep in step with ../sqlite.

DROP INDEX knowledge_chunks_tsv;
CREATE INDEX knowledge_chunks_tsv ON knowledge_chunks USING gin (tsv) WITH (fastupdate = off);
