-- 0011 knowledge (issue 16): knowledge bases, their documents (uploaded, or pages of a crawl),
-- the chunks retrieval searches (full text through FTS5 with BM25; an optional embedding
-- beside each chunk), uploads waiting to be indexed, and crawls. Keep in step with ../postgres.

CREATE TABLE knowledge_bases (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL REFERENCES organizations (id),
	project_id TEXT NOT NULL REFERENCES projects (id),
	name TEXT NOT NULL,
	-- name_key is the name folded to lower case: names are unique in a project whatever their case.
	name_key TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX knowledge_bases_project_name ON knowledge_bases (project_id, name_key);
CREATE INDEX knowledge_bases_org_id ON knowledge_bases (org_id, id);

CREATE TABLE knowledge_crawls (
	id TEXT PRIMARY KEY,
	kb_id TEXT NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
	org_id TEXT NOT NULL,
	project_id TEXT NOT NULL,
	start_url TEXT NOT NULL,
	allowed TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(allowed)),
	max_depth INTEGER NOT NULL CHECK (max_depth >= 0),
	max_pages INTEGER NOT NULL CHECK (max_pages >= 1),
	refresh_hours INTEGER NOT NULL CHECK (refresh_hours >= 0),
	status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
	failure_reason TEXT NOT NULL DEFAULT '',
	pages_ok INTEGER NOT NULL DEFAULT 0,
	pages_failed INTEGER NOT NULL DEFAULT 0,
	pages_removed INTEGER NOT NULL DEFAULT 0,
	pages_unchanged INTEGER NOT NULL DEFAULT 0,
	last_started_at TEXT,
	last_finished_at TEXT,
	next_refresh_at TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX knowledge_crawls_kb ON knowledge_crawls (kb_id, id);
CREATE INDEX knowledge_crawls_due ON knowledge_crawls (next_refresh_at) WHERE next_refresh_at IS NOT NULL;

CREATE TABLE knowledge_documents (
	id TEXT PRIMARY KEY,
	kb_id TEXT NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
	org_id TEXT NOT NULL,
	project_id TEXT NOT NULL,
	crawl_id TEXT REFERENCES knowledge_crawls (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	source_url TEXT,
	content_type TEXT NOT NULL,
	status TEXT NOT NULL CHECK (status IN ('processing', 'ready', 'failed')),
	failure_reason TEXT NOT NULL DEFAULT '',
	bytes INTEGER NOT NULL DEFAULT 0,
	pages INTEGER NOT NULL DEFAULT 0,
	chunks INTEGER NOT NULL DEFAULT 0,
	content_hash TEXT NOT NULL DEFAULT '',
	text TEXT NOT NULL DEFAULT '',
	etag TEXT NOT NULL DEFAULT '',
	last_modified TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	indexed_at TEXT
) STRICT, WITHOUT ROWID;

CREATE INDEX knowledge_documents_kb ON knowledge_documents (kb_id, id);
CREATE UNIQUE INDEX knowledge_documents_crawl_url ON knowledge_documents (crawl_id, source_url) WHERE crawl_id IS NOT NULL;

-- An upload (or a replacement) waiting for the indexer; deleted once indexed.
CREATE TABLE knowledge_uploads (
	document_id TEXT PRIMARY KEY REFERENCES knowledge_documents (id) ON DELETE CASCADE,
	data BLOB NOT NULL,
	content_type TEXT NOT NULL,
	name TEXT NOT NULL,
	created_at TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE knowledge_chunks (
	n INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	kb_id TEXT NOT NULL,
	document_id TEXT NOT NULL REFERENCES knowledge_documents (id) ON DELETE CASCADE,
	org_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	heading TEXT NOT NULL DEFAULT '',
	page INTEGER,
	body TEXT NOT NULL,
	tokens INTEGER NOT NULL DEFAULT 0,
	embedding BLOB
) STRICT;

CREATE INDEX knowledge_chunks_document ON knowledge_chunks (document_id, seq);
CREATE INDEX knowledge_chunks_kb ON knowledge_chunks (kb_id);

-- The full-text index: an FTS5 table over the chunks' heading and body (Porter stemmer over
-- Unicode words) with kbtok, the base's id as one token ("k" and its 32 hex digits), so that a
-- search is narrowed to its bases inside the index. Its rowid is the chunk's n; triggers keep
-- it in step.
CREATE VIRTUAL TABLE knowledge_fts USING fts5(heading, body, kbtok, tokenize='porter unicode61');

CREATE TRIGGER knowledge_chunks_ai AFTER INSERT ON knowledge_chunks BEGIN
	INSERT INTO knowledge_fts (rowid, heading, body, kbtok) VALUES (new.n, new.heading, new.body, 'k' || replace(new.kb_id, '-', ''));
END;

CREATE TRIGGER knowledge_chunks_ad AFTER DELETE ON knowledge_chunks BEGIN
	DELETE FROM knowledge_fts WHERE rowid = old.n;
END;
