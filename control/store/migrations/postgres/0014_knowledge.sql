-- 0011 knowledge (issue 16): knowledge bases, their documents (uploaded, or pages of a crawl),
-- the chunks retrieval searches (full text through a tsvector with a GIN index, ranked with
-- ts_rank_cd; an optional embedding beside each chunk), uploads waiting to be indexed, and
-- crawls. Keep in step with ../sqlite.

CREATE TABLE knowledge_bases (
	id uuid PRIMARY KEY,
	org_id uuid NOT NULL REFERENCES organizations (id),
	project_id uuid NOT NULL REFERENCES projects (id),
	name text NOT NULL,
	name_key text NOT NULL,
	description text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE UNIQUE INDEX knowledge_bases_project_name ON knowledge_bases (project_id, name_key);
CREATE INDEX knowledge_bases_org_id ON knowledge_bases (org_id, id);

CREATE TABLE knowledge_crawls (
	id uuid PRIMARY KEY,
	kb_id uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
	org_id uuid NOT NULL,
	project_id uuid NOT NULL,
	start_url text NOT NULL,
	allowed jsonb NOT NULL DEFAULT '[]',
	max_depth integer NOT NULL CHECK (max_depth >= 0),
	max_pages integer NOT NULL CHECK (max_pages >= 1),
	refresh_hours integer NOT NULL CHECK (refresh_hours >= 0),
	status text NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
	failure_reason text NOT NULL DEFAULT '',
	pages_ok integer NOT NULL DEFAULT 0,
	pages_failed integer NOT NULL DEFAULT 0,
	pages_removed integer NOT NULL DEFAULT 0,
	pages_unchanged integer NOT NULL DEFAULT 0,
	last_started_at timestamptz,
	last_finished_at timestamptz,
	next_refresh_at timestamptz,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);

CREATE INDEX knowledge_crawls_kb ON knowledge_crawls (kb_id, id);
CREATE INDEX knowledge_crawls_due ON knowledge_crawls (next_refresh_at) WHERE next_refresh_at IS NOT NULL;

CREATE TABLE knowledge_documents (
	id uuid PRIMARY KEY,
	kb_id uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
	org_id uuid NOT NULL,
	project_id uuid NOT NULL,
	crawl_id uuid REFERENCES knowledge_crawls (id) ON DELETE CASCADE,
	name text NOT NULL,
	source_url text,
	content_type text NOT NULL,
	status text NOT NULL CHECK (status IN ('processing', 'ready', 'failed')),
	failure_reason text NOT NULL DEFAULT '',
	bytes bigint NOT NULL DEFAULT 0,
	pages integer NOT NULL DEFAULT 0,
	chunks integer NOT NULL DEFAULT 0,
	content_hash text NOT NULL DEFAULT '',
	text text NOT NULL DEFAULT '',
	etag text NOT NULL DEFAULT '',
	last_modified text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	indexed_at timestamptz
);

CREATE INDEX knowledge_documents_kb ON knowledge_documents (kb_id, id);
CREATE UNIQUE INDEX knowledge_documents_crawl_url ON knowledge_documents (crawl_id, source_url) WHERE crawl_id IS NOT NULL;

CREATE TABLE knowledge_uploads (
	document_id uuid PRIMARY KEY REFERENCES knowledge_documents (id) ON DELETE CASCADE,
	data bytea NOT NULL,
	content_type text NOT NULL,
	name text NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE TABLE knowledge_chunks (
	id uuid PRIMARY KEY,
	kb_id uuid NOT NULL,
	document_id uuid NOT NULL REFERENCES knowledge_documents (id) ON DELETE CASCADE,
	org_id uuid NOT NULL,
	seq integer NOT NULL,
	heading text NOT NULL DEFAULT '',
	page integer,
	body text NOT NULL,
	tokens integer NOT NULL DEFAULT 0,
	embedding bytea,
	tsv tsvector GENERATED ALWAYS AS (setweight(to_tsvector('english', heading), 'A') || setweight(to_tsvector('english', body), 'D')) STORED
);

CREATE INDEX knowledge_chunks_document ON knowledge_chunks (document_id, seq);
CREATE INDEX knowledge_chunks_kb ON knowledge_chunks (kb_id);
CREATE INDEX knowledge_chunks_tsv ON knowledge_chunks USING gin (tsv);
