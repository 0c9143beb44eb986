-- 0017 knowledge full text (issue 16, retrieval and indexing speed): the FTS5 index no longer
-- keeps its own copy of every chunk's heading and body (external content: knowledge_chunks
-- holds them, rowid n), and loses the kbtok column, which no search used (a search is narrowed
-- to its bases through knowledge_chunks). Without the column, a query needs no column filter.
-- A document's extracted text moves to knowledge_texts: in the WITHOUT ROWID documents table a
-- row of 200 KB made every seek that compared with it read all its overflow pages (a search
-- joins the documents of its hits). Keep in step with ../postgres.

CREATE TABLE knowledge_texts (
	document_id TEXT PRIMARY KEY REFERENCES knowledge_documents (id) ON DELETE CASCADE,
	text TEXT NOT NULL
) STRICT;

INSERT INTO knowledge_texts (document_id, text) SELECT id, text FROM knowledge_documents WHERE text <> '';
UPDATE knowledge_documents SET text = '' WHERE text <> '';

DROP TRIGGER knowledge_chunks_ai;
DROP TRIGGER knowledge_chunks_ad;
DROP TABLE knowledge_fts;

CREATE VIRTUAL TABLE knowledge_fts USING fts5(heading, body, content='knowledge_chunks', content_rowid='n', tokenize='porter unicode61');

-- New chunks are indexed by the statement that stores a document's chunks (Knowledge.insertChunks:
-- one INSERT … SELECT for the whole document, where a trigger would have FTS5 flush its pending
-- terms to a new segment at every statement). An external-content index forgets a row only
-- when told its old values.

CREATE TRIGGER knowledge_chunks_ad AFTER DELETE ON knowledge_chunks BEGIN
	INSERT INTO knowledge_fts (knowledge_fts, rowid, heading, body) VALUES ('delete', old.n, old.heading, old.body);
END;

CREATE TRIGGER knowledge_chunks_au AFTER UPDATE OF heading, body ON knowledge_chunks BEGIN
	INSERT INTO knowledge_fts (knowledge_fts, rowid, heading, body) VALUES ('delete', old.n, old.heading, old.body);
	INSERT INTO knowledge_fts (rowid, heading, body) VALUES (new.n, new.heading, new.body);
END;

INSERT INTO knowledge_fts (knowledge_fts) VALUES ('rebuild');
