-- 0017 knowledge full text (issue 16, retrieval speed): the GIN index without its pending list
-- (fastupdate off), so that a search never scans unmerged entries; chunks are written a
-- document at a time, so the cost lands on indexing, not on a turn. A document's extracted
-- text moves to knowledge_texts, as on SQLite (where it slowed every seek in the documents).
-- Keep in step with ../sqlite.

CREATE TABLE knowledge_texts (
	document_id uuid PRIMARY KEY REFERENCES knowledge_documents (id) ON DELETE CASCADE,
	text text NOT NULL
);

INSERT INTO knowledge_texts (document_id, text) SELECT id, text FROM knowledge_documents WHERE text <> '';
UPDATE knowledge_documents SET text = '' WHERE text <> '';

DROP INDEX knowledge_chunks_tsv;
CREATE INDEX knowledge_chunks_tsv ON knowledge_chunks USING gin (tsv) WITH (fastupdate = off);
