package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Knowledge (issue 16): knowledge bases, their documents (uploads, and the pages of crawls) and
// the chunks that retrieval searches. Every read and write of a caller's object takes its Scope;
// the indexer and the crawler (system work on the job queue) use the By-id methods, which cross
// organizations, after loading the object through a scope or from a job.

// Typed ids of knowledge.
type (
	KnowledgeBaseID     string
	KnowledgeDocumentID string
	KnowledgeCrawlID    string
	KnowledgeChunkID    string
)

// Document statuses.
const (
	DocProcessing = "processing"
	DocReady      = "ready"
	DocFailed     = "failed"
)

// Crawl statuses.
const (
	CrawlQueued  = "queued"
	CrawlRunning = "running"
	CrawlDone    = "done"
	CrawlFailed  = "failed"
)

// KnowledgeBase is a named collection of documents in a project.
type KnowledgeBase struct {
	ID          KnowledgeBaseID
	OrgID       OrgID
	ProjectID   ProjectID
	Name        string
	Description string
	Documents   int // documents in it (read only)
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// KnowledgeDocument is one document of a knowledge base: an upload, or a page of a crawl
// (CrawlID and SourceURL set).
type KnowledgeDocument struct {
	ID            KnowledgeDocumentID
	KBID          KnowledgeBaseID
	OrgID         OrgID
	ProjectID     ProjectID
	CrawlID       KnowledgeCrawlID
	Name          string
	SourceURL     string
	ContentType   string
	Status        string
	FailureReason string
	Bytes         int64
	Pages         int
	Chunks        int
	ContentHash   string
	ETag          string
	LastModified  string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	IndexedAt     *time.Time
}

// KnowledgeChunk is one searchable piece of a document, with where it came from.
type KnowledgeChunk struct {
	ID         KnowledgeChunkID
	KBID       KnowledgeBaseID
	DocumentID KnowledgeDocumentID
	Seq        int
	Heading    string // the heading path, " > " between levels
	Page       int    // 1-based page of a paged document (PDF); 0 when none
	Body       string
	Tokens     int
	Embedding  []float32 // nil without embeddings
}

// KnowledgeCrawl is a crawl of a website into a knowledge base.
type KnowledgeCrawl struct {
	ID             KnowledgeCrawlID
	KBID           KnowledgeBaseID
	OrgID          OrgID
	ProjectID      ProjectID
	StartURL       string
	Allowed        []string // allowed domains or URL prefixes
	MaxDepth       int
	MaxPages       int
	RefreshHours   int // 0: no scheduled refresh
	Status         string
	FailureReason  string
	PagesOK        int
	PagesFailed    int
	PagesRemoved   int
	PagesUnchanged int
	LastStartedAt  *time.Time
	LastFinishedAt *time.Time
	NextRefreshAt  *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// KnowledgeHit is one chunk found by a search, with its document's name and URL and the
// engine's score (BM25 on SQLite, ts_rank_cd on PostgreSQL; higher is better). RawScore is for
// the domain, which keeps the engine's score there when it rescales Score.
type KnowledgeHit struct {
	Chunk        KnowledgeChunk
	DocumentName string
	SourceURL    string
	Score        float64
	RawScore     float64
}

// KnowledgeUpload is a document's body waiting for the indexer.
type KnowledgeUpload struct {
	Data        []byte
	ContentType string
	Name        string
}

// Knowledge is the repository of knowledge bases, documents, chunks and crawls.
type Knowledge struct{ q *Queries }

// Knowledge returns the knowledge repository.
func (q *Queries) Knowledge() Knowledge { return Knowledge{q} }

const kbCols = `id, org_id, project_id, name, description, (SELECT count(*) FROM knowledge_documents d WHERE d.kb_id = knowledge_bases.id), created_at, updated_at`

func scanKB(r rowScanner) (KnowledgeBase, error) {
	var k KnowledgeBase
	err := r.Scan(&k.ID, &k.OrgID, &k.ProjectID, &k.Name, &k.Description, &k.Documents, timeCol{&k.CreatedAt}, timeCol{&k.UpdatedAt})
	return k, err
}

// CreateBase stores a knowledge base in a project the scope reaches (ErrNotFound otherwise); a
// name already used in the project (ignoring case) is ErrConflict.
func (r Knowledge) CreateBase(ctx context.Context, sc Scope, k KnowledgeBase) (KnowledgeBase, error) {
	if err := checkName("knowledge base", k.Name); err != nil {
		return KnowledgeBase{}, err
	}
	p, err := r.q.Projects().Get(ctx, sc, k.ProjectID)
	if err != nil {
		return KnowledgeBase{}, err
	}
	now := r.q.s.timeNow()
	k.ID, k.OrgID, k.ProjectID, k.Documents, k.CreatedAt, k.UpdatedAt = newID[KnowledgeBaseID](), p.OrgID, p.ID, 0, now, now
	_, err = r.q.exec(ctx, "create knowledge base",
		`INSERT INTO knowledge_bases (id, org_id, project_id, name, name_key, description, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
		string(k.ID), string(k.OrgID), string(k.ProjectID), k.Name, strings.ToLower(k.Name), k.Description, ts(now))
	if err != nil {
		return KnowledgeBase{}, err
	}
	return k, nil
}

func (r Knowledge) baseSel(sc Scope) *sel {
	return newSel(`SELECT `+kbCols+` FROM knowledge_bases`).scope(sc, "org_id", "project_id", "")
}

// GetBase returns the scope's knowledge base with id, or ErrNotFound.
func (r Knowledge) GetBase(ctx context.Context, sc Scope, id KnowledgeBaseID) (KnowledgeBase, error) {
	return one(ctx, r.q, "get knowledge base", r.baseSel(sc).id("id", string(id)), scanKB)
}

// BasesByName returns the knowledge bases of project p named in names (ignoring case), in the
// order of names; names with no base are left out.
func (r Knowledge) BasesByName(ctx context.Context, sc Scope, p ProjectID, names []string) ([]KnowledgeBase, error) {
	if len(names) == 0 {
		return nil, nil
	}
	b := r.baseSel(sc).id("project_id", string(p))
	ph := make([]string, len(names))
	for i, n := range names {
		ph[i] = b.arg(strings.ToLower(n))
	}
	b.where = append(b.where, "name_key IN ("+strings.Join(ph, ", ")+")")
	ks, err := many(ctx, r.q, "knowledge bases by name", b, " ORDER BY id", scanKB)
	if err != nil {
		return nil, err
	}
	out := make([]KnowledgeBase, 0, len(ks))
	for _, n := range names {
		for _, k := range ks {
			if strings.EqualFold(k.Name, n) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// ListBases returns a page of the scope's knowledge bases (of project p when set), oldest first.
func (r Knowledge) ListBases(ctx context.Context, sc Scope, p ProjectID, pg Page) ([]KnowledgeBase, error) {
	b := r.baseSel(sc).optID("project_id", string(p))
	return many(ctx, r.q, "list knowledge bases", b, b.page("id", pg, false), scanKB)
}

// UpdateBase sets the base's name and description (nil: unchanged).
func (r Knowledge) UpdateBase(ctx context.Context, sc Scope, id KnowledgeBaseID, name, description *string) (KnowledgeBase, error) {
	var k KnowledgeBase
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if k, err = q.Knowledge().GetBase(ctx, sc, id); err != nil {
			return err
		}
		if name != nil {
			if err := checkName("knowledge base", *name); err != nil {
				return err
			}
			k.Name = *name
		}
		if description != nil {
			k.Description = *description
		}
		k.UpdatedAt = q.s.timeNow()
		_, err = q.exec(ctx, "update knowledge base",
			`UPDATE knowledge_bases SET name = $2, name_key = $3, description = $4, updated_at = $5 WHERE id = $1`,
			string(k.ID), k.Name, strings.ToLower(k.Name), k.Description, ts(k.UpdatedAt))
		return err
	})
	return k, err
}

// DeleteBase deletes the base with its crawls, documents and chunks.
func (r Knowledge) DeleteBase(ctx context.Context, sc Scope, id KnowledgeBaseID) error {
	return r.q.atomic(ctx, func(q *Queries) error {
		k, err := q.Knowledge().GetBase(ctx, sc, id)
		if err != nil {
			return err
		}
		// The chunks go first and one by one through the engine's triggers, so that the
		// full-text index forgets them too.
		if _, err := q.exec(ctx, "delete knowledge chunks", `DELETE FROM knowledge_chunks WHERE kb_id = $1`, string(k.ID)); err != nil {
			return err
		}
		_, err = q.exec(ctx, "delete knowledge base", `DELETE FROM knowledge_bases WHERE id = $1`, string(k.ID))
		return err
	})
}

const docCols = `id, kb_id, org_id, project_id, crawl_id, name, source_url, content_type, status, failure_reason, bytes, pages, chunks, content_hash, etag, last_modified, created_at, updated_at, indexed_at`

func scanDoc(r rowScanner) (KnowledgeDocument, error) {
	var d KnowledgeDocument
	err := r.Scan(&d.ID, &d.KBID, &d.OrgID, &d.ProjectID, nullTextCol[KnowledgeCrawlID]{&d.CrawlID}, &d.Name, nullTextCol[string]{&d.SourceURL},
		&d.ContentType, &d.Status, &d.FailureReason, &d.Bytes, &d.Pages, &d.Chunks, &d.ContentHash, &d.ETag, &d.LastModified,
		timeCol{&d.CreatedAt}, timeCol{&d.UpdatedAt}, nullTimeCol{&d.IndexedAt})
	return d, err
}

// CreateDocument stores a document of the scope's base kb, status processing, with its upload
// waiting for the indexer.
func (r Knowledge) CreateDocument(ctx context.Context, sc Scope, kb KnowledgeBaseID, name string, up KnowledgeUpload) (KnowledgeDocument, error) {
	var d KnowledgeDocument
	err := r.q.atomic(ctx, func(q *Queries) error {
		k, err := q.Knowledge().GetBase(ctx, sc, kb)
		if err != nil {
			return err
		}
		now := q.s.timeNow()
		d = KnowledgeDocument{ID: newID[KnowledgeDocumentID](), KBID: k.ID, OrgID: k.OrgID, ProjectID: k.ProjectID, Name: name,
			ContentType: up.ContentType, Status: DocProcessing, Bytes: int64(len(up.Data)), CreatedAt: now, UpdatedAt: now}
		if _, err := q.exec(ctx, "create knowledge document",
			`INSERT INTO knowledge_documents (id, kb_id, org_id, project_id, name, content_type, status, bytes, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
			string(d.ID), string(d.KBID), string(d.OrgID), string(d.ProjectID), d.Name, d.ContentType, d.Status, d.Bytes, ts(now)); err != nil {
			return err
		}
		return q.Knowledge().putUpload(ctx, d.ID, up, now)
	})
	return d, err
}

func (r Knowledge) putUpload(ctx context.Context, id KnowledgeDocumentID, up KnowledgeUpload, now time.Time) error {
	if _, err := r.q.exec(ctx, "drop knowledge upload", `DELETE FROM knowledge_uploads WHERE document_id = $1`, string(id)); err != nil {
		return err
	}
	_, err := r.q.exec(ctx, "store knowledge upload",
		`INSERT INTO knowledge_uploads (document_id, data, content_type, name, created_at) VALUES ($1, $2, $3, $4, $5)`,
		string(id), up.Data, up.ContentType, up.Name, ts(now))
	return err
}

// ReplaceDocument puts a new upload in place of the document's content: the document is
// processing again, and its old chunks keep serving until the indexer swaps in the new ones.
func (r Knowledge) ReplaceDocument(ctx context.Context, sc Scope, kb KnowledgeBaseID, id KnowledgeDocumentID, name string, up KnowledgeUpload) (KnowledgeDocument, error) {
	var d KnowledgeDocument
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if d, err = q.Knowledge().GetDocument(ctx, sc, kb, id); err != nil {
			return err
		}
		now := q.s.timeNow()
		d.Name, d.ContentType, d.Status, d.FailureReason, d.Bytes, d.UpdatedAt = name, up.ContentType, DocProcessing, "", int64(len(up.Data)), now
		if _, err := q.exec(ctx, "replace knowledge document",
			`UPDATE knowledge_documents SET name = $2, content_type = $3, status = $4, failure_reason = '', bytes = $5, updated_at = $6 WHERE id = $1`,
			string(d.ID), d.Name, d.ContentType, d.Status, d.Bytes, ts(now)); err != nil {
			return err
		}
		return q.Knowledge().putUpload(ctx, d.ID, up, now)
	})
	return d, err
}

func (r Knowledge) docSel(sc Scope, kb KnowledgeBaseID) *sel {
	return newSel(`SELECT `+docCols+` FROM knowledge_documents`).scope(sc, "org_id", "project_id", "").id("kb_id", string(kb))
}

// GetDocument returns the document id of the scope's base kb, or ErrNotFound.
func (r Knowledge) GetDocument(ctx context.Context, sc Scope, kb KnowledgeBaseID, id KnowledgeDocumentID) (KnowledgeDocument, error) {
	return one(ctx, r.q, "get knowledge document", r.docSel(sc, kb).id("id", string(id)), scanDoc)
}

// DocumentText returns the extracted text of the document.
func (r Knowledge) DocumentText(ctx context.Context, sc Scope, kb KnowledgeBaseID, id KnowledgeDocumentID) (string, error) {
	b := newSel(`SELECT coalesce(t.text, '') FROM knowledge_documents d LEFT JOIN knowledge_texts t ON t.document_id = d.id`).
		scope(sc, "d.org_id", "d.project_id", "").id("d.kb_id", string(kb)).id("d.id", string(id))
	return one(ctx, r.q, "knowledge document text", b, func(r rowScanner) (s string, err error) { err = r.Scan(&s); return s, err })
}

// DocumentFilter narrows a list of documents.
type DocumentFilter struct {
	CrawlID KnowledgeCrawlID // only this crawl's pages
	Status  string
}

// ListDocuments returns a page of the documents of the scope's base kb, oldest first.
func (r Knowledge) ListDocuments(ctx context.Context, sc Scope, kb KnowledgeBaseID, f DocumentFilter, pg Page) ([]KnowledgeDocument, error) {
	b := r.docSel(sc, kb).optID("crawl_id", string(f.CrawlID))
	if f.Status != "" {
		b.cond("status = ?", f.Status)
	}
	return many(ctx, r.q, "list knowledge documents", b, b.page("id", pg, false), scanDoc)
}

// DeleteDocument deletes the document and its chunks.
func (r Knowledge) DeleteDocument(ctx context.Context, sc Scope, kb KnowledgeBaseID, id KnowledgeDocumentID) (KnowledgeDocument, error) {
	var d KnowledgeDocument
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if d, err = q.Knowledge().GetDocument(ctx, sc, kb, id); err != nil {
			return err
		}
		return q.Knowledge().deleteDocByID(ctx, d.ID)
	})
	return d, err
}

func (r Knowledge) deleteDocByID(ctx context.Context, id KnowledgeDocumentID) error {
	if _, err := r.q.exec(ctx, "delete knowledge chunks", `DELETE FROM knowledge_chunks WHERE document_id = $1`, string(id)); err != nil {
		return err
	}
	_, err := r.q.exec(ctx, "delete knowledge document", `DELETE FROM knowledge_documents WHERE id = $1`, string(id))
	return err
}

// DocumentByID returns a document whatever its organization (the indexer's read).
func (r Knowledge) DocumentByID(ctx context.Context, id KnowledgeDocumentID) (KnowledgeDocument, error) {
	return one(ctx, r.q, "get knowledge document", newSel(`SELECT `+docCols+` FROM knowledge_documents`).id("id", string(id)), scanDoc)
}

// Upload returns the document's upload waiting for the indexer, or ErrNotFound when none waits.
func (r Knowledge) Upload(ctx context.Context, id KnowledgeDocumentID) (KnowledgeUpload, error) {
	b := newSel(`SELECT data, content_type, name FROM knowledge_uploads`).id("document_id", string(id))
	return one(ctx, r.q, "get knowledge upload", b, func(r rowScanner) (u KnowledgeUpload, err error) {
		err = r.Scan(&u.Data, &u.ContentType, &u.Name)
		return u, err
	})
}

// Indexed is what the indexer made of a document.
type Indexed struct {
	Text         string
	Pages        int
	ContentHash  string
	Chunks       []KnowledgeChunk
	ETag         string
	LastModified string
}

// FinishIndex swaps the document's chunks for ix's in one transaction (readers see the old
// chunks or the new ones, never none), marks it ready and drops its upload. A document deleted
// meanwhile is ErrNotFound.
func (r Knowledge) FinishIndex(ctx context.Context, id KnowledgeDocumentID, ix Indexed) error {
	return r.q.atomic(ctx, func(q *Queries) error {
		d, err := q.Knowledge().DocumentByID(ctx, id)
		if err != nil {
			return err
		}
		if _, err := q.exec(ctx, "drop old knowledge chunks", `DELETE FROM knowledge_chunks WHERE document_id = $1`, string(id)); err != nil {
			return err
		}
		if err := q.Knowledge().insertChunks(ctx, d, ix.Chunks); err != nil {
			return err
		}
		now := q.s.timeNow()
		if _, err := q.exec(ctx, "finish knowledge document",
			`UPDATE knowledge_documents SET status = 'ready', failure_reason = '', pages = $2, chunks = $3, content_hash = $4,
			etag = $5, last_modified = $6, updated_at = $7, indexed_at = $7 WHERE id = $1`,
			string(id), ix.Pages, len(ix.Chunks), ix.ContentHash, ix.ETag, ix.LastModified, ts(now)); err != nil {
			return err
		}
		// The text lives apart from the document's row (migration 0017).
		if _, err := q.exec(ctx, "store knowledge document text",
			`INSERT INTO knowledge_texts (document_id, text) VALUES ($1, $2) ON CONFLICT (document_id) DO UPDATE SET text = excluded.text`,
			string(id), ix.Text); err != nil {
			return err
		}
		_, err = q.exec(ctx, "drop knowledge upload", `DELETE FROM knowledge_uploads WHERE document_id = $1`, string(id))
		return err
	})
}

// chunkBatch is how many chunks one INSERT carries.
const chunkBatch = 200

func (r Knowledge) insertChunks(ctx context.Context, d KnowledgeDocument, cs []KnowledgeChunk) error {
	for start := 0; start < len(cs); start += chunkBatch {
		part := cs[start:min(start+chunkBatch, len(cs))]
		var sb strings.Builder
		sb.WriteString(`INSERT INTO knowledge_chunks (id, kb_id, document_id, org_id, seq, heading, page, body, tokens, embedding) VALUES `)
		args := make([]any, 0, len(part)*10)
		for i, c := range part {
			if i > 0 {
				sb.WriteString(", ")
			}
			if r.q.s.d.name == SQLite {
				// Plain "?": SQLite keeps the names of numbered parameters in a list the
				// driver searches for each one, quadratic in a statement of 2,000.
				sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			} else {
				n := len(args)
				fmt.Fprintf(&sb, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9, n+10)
			}
			var page any
			if c.Page > 0 {
				page = c.Page
			}
			var emb any
			if c.Embedding != nil {
				emb = EncodeVector(c.Embedding)
			}
			args = append(args, string(newID[KnowledgeChunkID]()), string(d.KBID), string(d.ID), string(d.OrgID), start+i, c.Heading, page, c.Body, c.Tokens, emb)
		}
		if _, err := r.q.exec(ctx, "insert knowledge chunks", sb.String(), args...); err != nil {
			return err
		}
	}
	if r.q.s.d.name == SQLite && len(cs) > 0 {
		// The full-text index takes the document's chunks in one statement (see migration 0017).
		_, err := r.q.exec(ctx, "index knowledge chunks",
			`INSERT INTO knowledge_fts (rowid, heading, body) SELECT n, heading, body FROM knowledge_chunks WHERE document_id = $1 ORDER BY n`, string(d.ID))
		return err
	}
	return nil
}

// FailIndex marks the document failed with reason, keeping the chunks it had (a replacement
// that cannot be read leaves the old content serving), and drops its upload.
func (r Knowledge) FailIndex(ctx context.Context, id KnowledgeDocumentID, reason string) error {
	return r.q.atomic(ctx, func(q *Queries) error {
		if _, err := q.exec(ctx, "fail knowledge document",
			`UPDATE knowledge_documents SET status = 'failed', failure_reason = $2, updated_at = $3 WHERE id = $1`,
			string(id), reason, ts(q.s.timeNow())); err != nil {
			return err
		}
		_, err := q.exec(ctx, "drop knowledge upload", `DELETE FROM knowledge_uploads WHERE document_id = $1`, string(id))
		return err
	})
}

// PendingUploads lists the documents whose uploads wait for the indexer (after a restart, the
// ones whose job was lost), oldest first.
func (r Knowledge) PendingUploads(ctx context.Context, limit int) ([]KnowledgeDocumentID, error) {
	return list(ctx, r.q, "pending knowledge uploads",
		`SELECT document_id FROM knowledge_uploads ORDER BY document_id LIMIT $1`, []any{clampLimit(limit)},
		func(r rowScanner) (id KnowledgeDocumentID, err error) { err = r.Scan(&id); return id, err })
}

// Chunks returns the chunks of a document in order.
func (r Knowledge) Chunks(ctx context.Context, id KnowledgeDocumentID) ([]KnowledgeChunk, error) {
	return list(ctx, r.q, "knowledge chunks",
		`SELECT id, kb_id, document_id, seq, heading, page, body, tokens, embedding FROM knowledge_chunks WHERE document_id = $1 ORDER BY seq`,
		[]any{string(id)}, scanChunk)
}

func scanChunk(r rowScanner) (KnowledgeChunk, error) {
	var c KnowledgeChunk
	var page *int64
	var emb []byte
	err := r.Scan(&c.ID, &c.KBID, &c.DocumentID, &c.Seq, &c.Heading, &page, &c.Body, &c.Tokens, &emb)
	if page != nil {
		c.Page = int(*page)
	}
	if emb != nil {
		c.Embedding = DecodeVector(emb)
	}
	return c, err
}

// RankBudget bounds the chunks one search ranks, which is what a search costs: the terms are
// taken rarest first while the chunks they match (counted through the index) stay within it.
// The terms left out are the common ones (in a 20,000-chunk manual, "type" or "value"), which
// BM25 would weigh near zero anyway. When the rarest term alone matches more, the search asks
// for chunks holding both of the two rarest; a search that still matches more ranks the first
// RankBudget chunks of the index's order (a question of common words only).
const RankBudget = 1000

// pgRerank is how many of the candidates ts_rank_cd orders best PostgreSQL ranks by BM25.
const pgRerank = 100

// termBudget is the most chunks one term may match and still be kept (counting stops there).
const termBudget = 250

// allTerms is how many of the rarest terms a search of common terms only asks chunks to hold
// all of, before it asks for fewer (two at the least).
const allTerms = 4

// Search finds the chunks of the bases kbs (of organization org) that best match terms (plain
// words, already stripped of operators), best first: BM25 over FTS5 on SQLite, BM25 over the
// tsvector's lexemes on PostgreSQL. Any of the terms may match; terms matching more than
// CommonTerm chunks are left out unless no other term matches.
func (r Knowledge) Search(ctx context.Context, org OrgID, kbs []KnowledgeBaseID, terms []string, limit int) ([]KnowledgeHit, error) {
	if len(kbs) == 0 || len(terms) == 0 || !validID(org) {
		return nil, nil
	}
	var ids []KnowledgeBaseID
	for _, k := range kbs {
		if validID(k) {
			ids = append(ids, k)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	terms, dfs, all, err := r.narrowTerms(ctx, terms)
	if err != nil || len(terms) == 0 {
		return nil, err
	}
	if !all {
		return r.search(ctx, org, ids, terms, dfs, false, limit)
	}
	// Every term is common: chunks holding all of the rarest few (up to allTerms), fewer of
	// them while that finds too little.
	for n := len(terms); n >= 2; n-- {
		hits, err := r.search(ctx, org, ids, terms[:n], dfs[:n], true, limit)
		if err != nil || len(hits) >= limit {
			return hits, err
		}
	}
	// No chunk holds two of them: chunks holding either of the two rarest.
	return r.search(ctx, org, ids, terms[:2], dfs[:2], false, limit)
}

// search ranks the chunks of the bases ids holding any of terms (every one when all), whose
// document frequencies are dfs.
func (r Knowledge) search(ctx context.Context, org OrgID, ids []KnowledgeBaseID, terms []string, dfs []int, all bool, limit int) ([]KnowledgeHit, error) {
	args := []any{string(org), limit}
	ph := make([]string, 0, len(ids))
	for _, k := range ids {
		args = append(args, string(k))
		ph = append(ph, fmt.Sprintf("$%d", len(args)))
	}
	in := strings.Join(ph, ", ")
	var query string
	if r.q.s.d.name == SQLite {
		return r.searchSQLite(ctx, args, in, terms, all, limit)
	} else {
		// ts_rank_cd has no inverse document frequency: on the Go specification it found the
		// answering section in the top 3 for 0.76 of the questions of the quality test, against
		// 0.94 for BM25. So the candidates the GIN index finds are ordered by ts_rank_cd, and the
		// best pgRerank of them ranked by BM25 computed here from their lexemes (term
		// frequencies, a heading's lexemes counting twice) with the document frequencies
		// narrowTerms counted.
		op := " | "
		if all {
			op = " & "
		}
		args = append(args, strings.Join(terms, op), terms, dfs)
		or, ts, ds := fmt.Sprintf("$%d", len(args)-2), fmt.Sprintf("$%d", len(args)-1), fmt.Sprintf("$%d", len(args))
		query = `WITH q AS (
			SELECT to_tsquery('english', ` + or + `) AS q
		), terms AS (
			SELECT (tsvector_to_array(to_tsvector('english', t.term)))[1] AS lexeme, t.df::float8 AS df FROM unnest(` + ts + `::text[], ` + ds + `::int[]) AS t(term, df)
		), cand AS (
			SELECT c.id, c.tsv FROM knowledge_chunks c, q WHERE c.tsv @@ q.q AND c.org_id = $1 AND c.kb_id IN (` + in + `) LIMIT ` + fmt.Sprint(RankBudget) + `
		), top AS (
			SELECT cand.id, cand.tsv FROM cand, q ORDER BY ts_rank_cd(cand.tsv, q.q, 1) DESC LIMIT ` + fmt.Sprint(pgRerank) + `
		), stats AS (
			SELECT (SELECT coalesce(sum(chunks), 0) FROM knowledge_documents WHERE org_id = $1 AND kb_id IN (` + in + `))::float8 AS n,
			coalesce(avg(length(tsv)), 1)::float8 AS avgdl FROM top
		), tf AS (
			SELECT top.id, u.lexeme, (cardinality(u.positions) + cardinality(array_positions(u.weights, 'A')))::float8 AS tf, length(top.tsv)::float8 AS dl
			FROM top, unnest(top.tsv) u WHERE u.lexeme IN (SELECT lexeme FROM terms)
		), scored AS (
			SELECT tf.id, sum(ln(1 + (s.n - t.df + 0.5) / (t.df + 0.5)) * tf.tf * 2.2 / (tf.tf + 1.2 * (0.25 + 0.75 * tf.dl / s.avgdl))) AS score
			FROM tf JOIN terms t USING (lexeme) CROSS JOIN stats s GROUP BY tf.id
		)
		SELECT c.id, c.kb_id, c.document_id, c.seq, c.heading, c.page, c.body, c.tokens, c.embedding, d.name, d.source_url, scored.score
		FROM scored JOIN knowledge_chunks c ON c.id = scored.id JOIN knowledge_documents d ON d.id = c.document_id
		ORDER BY scored.score DESC, c.id LIMIT $2`
	}
	return list(ctx, r.q, "search knowledge", query, args, scanHit)
}

// searchOver is how many of the whole index's best chunks the fast path of a SQLite search
// ranks before keeping the bases' own.
const searchOver = 64

// searchSQLite ranks with FTS5's bm25 (a heading match weighs twice a body match, kbtok not at
// all; it is negative, better when lower). The fast path ranks the whole index's matches and
// keeps the bases' among the best searchOver, so that no chunk row is read for the others; when
// that leaves fewer than limit (other bases hold most of the matches), the chunks are filtered
// to the bases before ranking.
func (r Knowledge) searchSQLite(ctx context.Context, args []any, in string, terms []string, all bool, limit int) ([]KnowledgeHit, error) {
	m := ftsMatch(terms)
	if all {
		m = ftsAll(terms)
	}
	args = append(args, m, max(searchOver, limit))
	mp, over := fmt.Sprint(len(args)-1), fmt.Sprint(len(args))
	cols := `SELECT c.id, c.kb_id, c.document_id, c.seq, c.heading, c.page, c.body, c.tokens, c.embedding, d.name, d.source_url, -f.score`
	fast := cols + ` FROM (SELECT n, score FROM (SELECT rowid AS n, bm25(knowledge_fts, 2.0, 1.0) AS score FROM knowledge_fts
			WHERE knowledge_fts MATCH $` + mp + ` LIMIT ` + fmt.Sprint(RankBudget) + `) ORDER BY score LIMIT $` + over + `) f
		JOIN knowledge_chunks c ON c.n = f.n JOIN knowledge_documents d ON d.id = c.document_id
		WHERE c.org_id = $1 AND c.kb_id IN (` + in + `) ORDER BY f.score LIMIT $2`
	hits, err := list(ctx, r.q, "search knowledge", fast, args, scanHit)
	if err != nil || len(hits) >= limit {
		return hits, err
	}
	slow := cols + ` FROM (SELECT n, score FROM (SELECT k.n, bm25(knowledge_fts, 2.0, 1.0) AS score FROM knowledge_fts JOIN knowledge_chunks k ON k.n = knowledge_fts.rowid
			WHERE knowledge_fts MATCH $` + mp + ` AND k.org_id = $1 AND k.kb_id IN (` + in + `) LIMIT ` + fmt.Sprint(RankBudget) + `) ORDER BY score LIMIT $2) f
		JOIN knowledge_chunks c ON c.n = f.n JOIN knowledge_documents d ON d.id = c.document_id
		ORDER BY f.score`
	return list(ctx, r.q, "search knowledge", slow, args[:len(args)-1], scanHit)
}

// ftsMatch is the FTS5 query of chunks holding any of terms.
func ftsMatch(terms []string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, ``) + `"`
	}
	return strings.Join(quoted, " OR ")
}

// ftsAll is the FTS5 query of chunks holding every one of terms.
func ftsAll(terms []string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, ``) + `"`
	}
	return strings.Join(quoted, " AND ")
}

// narrowTerms counts through the index (up to termBudget + 1) the chunks each term matches and
// keeps the rarest terms within RankBudget, each within termBudget (see there); all says the
// search needs every term kept (the two rarest, when the rarest alone is over termBudget). Counts are of the whole
// index, as FTS5 weighs terms by the whole index too.
func (r Knowledge) narrowTerms(ctx context.Context, terms []string) (kept []string, dfs []int, all bool, err error) {
	type counted struct {
		term string
		n    int
	}
	var cs []counted
	for _, t := range terms {
		var query string
		args := []any{termBudget + 1, t}
		if r.q.s.d.name == SQLite {
			args[1] = ftsMatch([]string{t})
			query = `SELECT count(*) FROM (SELECT 1 FROM knowledge_fts WHERE knowledge_fts MATCH $2 LIMIT $1)`
		} else {
			query = `SELECT count(*) FROM (SELECT 1 FROM knowledge_chunks WHERE tsv @@ plainto_tsquery('english', $2) LIMIT $1) x`
		}
		var n int
		if err := r.q.get(ctx, "count a search term", query, args, func(rs rowScanner) error { return rs.Scan(&n) }); err != nil {
			return nil, nil, false, err
		}
		if n > 0 {
			cs = append(cs, counted{t, n})
		}
	}
	// Counts stop at termBudget + 1, so the terms over it tie: of those, the longer word is
	// taken as the rarer (Zipf: the common words of a language are short).
	slices.SortStableFunc(cs, func(a, b counted) int {
		if a.n != b.n {
			return a.n - b.n
		}
		if a.n > termBudget {
			return len(b.term) - len(a.term)
		}
		return 0
	})
	sum := 0
	for _, c := range cs {
		if len(kept) > 0 && (sum+c.n > RankBudget || c.n > termBudget) {
			break
		}
		kept = append(kept, c.term)
		dfs = append(dfs, c.n)
		sum += c.n
	}
	if len(cs) >= 2 && cs[0].n > termBudget {
		kept, dfs = kept[:0], dfs[:0]
		for _, c := range cs[:min(len(cs), allTerms)] {
			kept = append(kept, c.term)
			dfs = append(dfs, c.n)
		}
		return kept, dfs, true, nil
	}
	return kept, dfs, false, nil
}

func scanHit(r rowScanner) (KnowledgeHit, error) {
	var h KnowledgeHit
	var page *int64
	var emb []byte
	err := r.Scan(&h.Chunk.ID, &h.Chunk.KBID, &h.Chunk.DocumentID, &h.Chunk.Seq, &h.Chunk.Heading, &page, &h.Chunk.Body, &h.Chunk.Tokens, &emb,
		&h.DocumentName, nullTextCol[string]{&h.SourceURL}, &h.Score)
	if page != nil {
		h.Chunk.Page = int(*page)
	}
	if emb != nil {
		h.Chunk.Embedding = DecodeVector(emb)
	}
	return h, err
}

// Embedded returns every chunk of the bases kbs that has an embedding (brute-force vector
// search; fine to about 100,000 chunks), with its document's name and URL.
func (r Knowledge) Embedded(ctx context.Context, org OrgID, kbs []KnowledgeBaseID) ([]KnowledgeHit, error) {
	args := []any{string(org)}
	ph := []string{}
	for _, k := range kbs {
		if validID(k) {
			args = append(args, string(k))
			ph = append(ph, fmt.Sprintf("$%d", len(args)))
		}
	}
	if len(ph) == 0 || !validID(org) {
		return nil, nil
	}
	return list(ctx, r.q, "embedded knowledge chunks",
		`SELECT c.id, c.kb_id, c.document_id, c.seq, c.heading, c.page, c.body, c.tokens, c.embedding, d.name, d.source_url, 0.0
		FROM knowledge_chunks c JOIN knowledge_documents d ON d.id = c.document_id
		WHERE c.org_id = $1 AND c.kb_id IN (`+strings.Join(ph, ", ")+`) AND c.embedding IS NOT NULL`, args, scanHit)
}

const crawlCols = `id, kb_id, org_id, project_id, start_url, allowed, max_depth, max_pages, refresh_hours, status, failure_reason,
pages_ok, pages_failed, pages_removed, pages_unchanged, last_started_at, last_finished_at, next_refresh_at, created_at, updated_at`

func scanCrawl(r rowScanner) (KnowledgeCrawl, error) {
	var c KnowledgeCrawl
	err := r.Scan(&c.ID, &c.KBID, &c.OrgID, &c.ProjectID, &c.StartURL, jsonCol{&c.Allowed}, &c.MaxDepth, &c.MaxPages, &c.RefreshHours,
		&c.Status, &c.FailureReason, &c.PagesOK, &c.PagesFailed, &c.PagesRemoved, &c.PagesUnchanged,
		nullTimeCol{&c.LastStartedAt}, nullTimeCol{&c.LastFinishedAt}, nullTimeCol{&c.NextRefreshAt}, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt})
	return c, err
}

// CreateCrawl stores a crawl of the scope's base c.KBID, queued.
func (r Knowledge) CreateCrawl(ctx context.Context, sc Scope, c KnowledgeCrawl) (KnowledgeCrawl, error) {
	err := r.q.atomic(ctx, func(q *Queries) error {
		k, err := q.Knowledge().GetBase(ctx, sc, c.KBID)
		if err != nil {
			return err
		}
		if c.Allowed == nil {
			c.Allowed = []string{}
		}
		allowed, err := jsonText(c.Allowed)
		if err != nil {
			return err
		}
		now := q.s.timeNow()
		c.ID, c.OrgID, c.ProjectID, c.Status, c.CreatedAt, c.UpdatedAt = newID[KnowledgeCrawlID](), k.OrgID, k.ProjectID, CrawlQueued, now, now
		_, err = q.exec(ctx, "create knowledge crawl",
			`INSERT INTO knowledge_crawls (id, kb_id, org_id, project_id, start_url, allowed, max_depth, max_pages, refresh_hours, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
			string(c.ID), string(c.KBID), string(c.OrgID), string(c.ProjectID), c.StartURL, allowed, c.MaxDepth, c.MaxPages, c.RefreshHours, c.Status, ts(now))
		return err
	})
	return c, err
}

// GetCrawl returns the crawl id of the scope's base kb, or ErrNotFound.
func (r Knowledge) GetCrawl(ctx context.Context, sc Scope, kb KnowledgeBaseID, id KnowledgeCrawlID) (KnowledgeCrawl, error) {
	b := newSel(`SELECT `+crawlCols+` FROM knowledge_crawls`).scope(sc, "org_id", "project_id", "").id("kb_id", string(kb)).id("id", string(id))
	return one(ctx, r.q, "get knowledge crawl", b, scanCrawl)
}

// CrawlByID returns a crawl whatever its organization (the crawler's read).
func (r Knowledge) CrawlByID(ctx context.Context, id KnowledgeCrawlID) (KnowledgeCrawl, error) {
	return one(ctx, r.q, "get knowledge crawl", newSel(`SELECT `+crawlCols+` FROM knowledge_crawls`).id("id", string(id)), scanCrawl)
}

// ListCrawls returns a page of the crawls of the scope's base kb, oldest first.
func (r Knowledge) ListCrawls(ctx context.Context, sc Scope, kb KnowledgeBaseID, pg Page) ([]KnowledgeCrawl, error) {
	b := newSel(`SELECT `+crawlCols+` FROM knowledge_crawls`).scope(sc, "org_id", "project_id", "").id("kb_id", string(kb))
	return many(ctx, r.q, "list knowledge crawls", b, b.page("id", pg, false), scanCrawl)
}

// DeleteCrawl deletes the crawl with its pages and their chunks.
func (r Knowledge) DeleteCrawl(ctx context.Context, sc Scope, kb KnowledgeBaseID, id KnowledgeCrawlID) error {
	return r.q.atomic(ctx, func(q *Queries) error {
		c, err := q.Knowledge().GetCrawl(ctx, sc, kb, id)
		if err != nil {
			return err
		}
		if _, err := q.exec(ctx, "delete crawl chunks",
			`DELETE FROM knowledge_chunks WHERE document_id IN (SELECT id FROM knowledge_documents WHERE crawl_id = $1)`, string(c.ID)); err != nil {
			return err
		}
		_, err = q.exec(ctx, "delete knowledge crawl", `DELETE FROM knowledge_crawls WHERE id = $1`, string(c.ID))
		return err
	})
}

// QueueCrawl marks the crawl queued (a refresh asked for); a crawl already queued or running is
// ErrConflict.
func (r Knowledge) QueueCrawl(ctx context.Context, sc Scope, kb KnowledgeBaseID, id KnowledgeCrawlID) (KnowledgeCrawl, error) {
	var c KnowledgeCrawl
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		if c, err = q.Knowledge().GetCrawl(ctx, sc, kb, id); err != nil {
			return err
		}
		if c.Status == CrawlQueued || c.Status == CrawlRunning {
			return fmt.Errorf("store: crawl %s: %w: it is %s", id, ErrConflict, c.Status)
		}
		c.Status, c.UpdatedAt = CrawlQueued, q.s.timeNow()
		_, err = q.exec(ctx, "queue knowledge crawl", `UPDATE knowledge_crawls SET status = $2, updated_at = $3 WHERE id = $1`,
			string(c.ID), c.Status, ts(c.UpdatedAt))
		return err
	})
	return c, err
}

// StartCrawl marks the crawl running.
func (r Knowledge) StartCrawl(ctx context.Context, id KnowledgeCrawlID, at time.Time) error {
	_, err := r.q.exec(ctx, "start knowledge crawl",
		`UPDATE knowledge_crawls SET status = 'running', failure_reason = '', last_started_at = $2, updated_at = $2 WHERE id = $1`, string(id), ts(normTime(at)))
	return err
}

// CrawlResult is how a run of a crawl ended.
type CrawlResult struct {
	Failed                              string // "" when it succeeded
	OK, FailedPages, Removed, Unchanged int
	NextRefresh                         *time.Time
}

// FinishCrawl records the end of a run.
func (r Knowledge) FinishCrawl(ctx context.Context, id KnowledgeCrawlID, res CrawlResult, at time.Time) error {
	status := CrawlDone
	if res.Failed != "" {
		status = CrawlFailed
	}
	_, err := r.q.exec(ctx, "finish knowledge crawl",
		`UPDATE knowledge_crawls SET status = $2, failure_reason = $3, pages_ok = $4, pages_failed = $5, pages_removed = $6, pages_unchanged = $7,
		last_finished_at = $8, next_refresh_at = $9, updated_at = $8 WHERE id = $1`,
		string(id), status, res.Failed, res.OK, res.FailedPages, res.Removed, res.Unchanged, ts(normTime(at)), nullTS(res.NextRefresh))
	return err
}

// DueCrawls returns the crawls whose scheduled refresh is due at now and marks them queued, so
// that one worker enqueues each.
func (r Knowledge) DueCrawls(ctx context.Context, now time.Time, limit int) ([]KnowledgeCrawl, error) {
	var out []KnowledgeCrawl
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		out, err = list(ctx, q, "due knowledge crawls",
			`SELECT `+crawlCols+` FROM knowledge_crawls WHERE next_refresh_at <= $1 AND status NOT IN ('queued', 'running') ORDER BY next_refresh_at LIMIT $2 `+q.s.d.skipLocked,
			[]any{ts(normTime(now)), clampLimit(limit)}, scanCrawl)
		if err != nil {
			return err
		}
		for i := range out {
			out[i].Status = CrawlQueued
			if _, err := q.exec(ctx, "queue due crawl", `UPDATE knowledge_crawls SET status = 'queued', updated_at = $2 WHERE id = $1`,
				string(out[i].ID), ts(normTime(now))); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// CrawlPage returns the page of a crawl at url, or ErrNotFound.
func (r Knowledge) CrawlPage(ctx context.Context, crawl KnowledgeCrawlID, url string) (KnowledgeDocument, error) {
	b := newSel(`SELECT `+docCols+` FROM knowledge_documents`).id("crawl_id", string(crawl)).cond("source_url = ?", url)
	return one(ctx, r.q, "get crawl page", b, scanDoc)
}

// CrawlPages returns every page of a crawl.
func (r Knowledge) CrawlPages(ctx context.Context, crawl KnowledgeCrawlID) ([]KnowledgeDocument, error) {
	b := newSel(`SELECT `+docCols+` FROM knowledge_documents`).id("crawl_id", string(crawl))
	return many(ctx, r.q, "crawl pages", b, " ORDER BY id", scanDoc)
}

// EnsureCrawlPage returns the crawl's page at url, creating it (processing) when it is new.
func (r Knowledge) EnsureCrawlPage(ctx context.Context, c KnowledgeCrawl, url, contentType string) (KnowledgeDocument, error) {
	var d KnowledgeDocument
	err := r.q.atomic(ctx, func(q *Queries) error {
		var err error
		d, err = q.Knowledge().CrawlPage(ctx, c.ID, url)
		if err == nil || !isNotFound(err) {
			return err
		}
		now := q.s.timeNow()
		d = KnowledgeDocument{ID: newID[KnowledgeDocumentID](), KBID: c.KBID, OrgID: c.OrgID, ProjectID: c.ProjectID, CrawlID: c.ID,
			Name: url, SourceURL: url, ContentType: contentType, Status: DocProcessing, CreatedAt: now, UpdatedAt: now}
		_, err = q.exec(ctx, "create crawl page",
			`INSERT INTO knowledge_documents (id, kb_id, org_id, project_id, crawl_id, name, source_url, content_type, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
			string(d.ID), string(d.KBID), string(d.OrgID), string(d.ProjectID), string(c.ID), d.Name, url, contentType, d.Status, ts(now))
		return err
	})
	return d, err
}

// TouchCrawlPage records a page fetched again unchanged (304, or the same content hash).
func (r Knowledge) TouchCrawlPage(ctx context.Context, id KnowledgeDocumentID, etag, lastModified string) error {
	_, err := r.q.exec(ctx, "touch crawl page",
		`UPDATE knowledge_documents SET etag = $2, last_modified = $3, status = 'ready', failure_reason = '', updated_at = $4 WHERE id = $1`,
		string(id), etag, lastModified, ts(r.q.s.timeNow()))
	return err
}

// RemoveCrawlPages deletes the crawl's pages whose URLs are not in keep (gone from the site),
// with their chunks, and returns how many went.
func (r Knowledge) RemoveCrawlPages(ctx context.Context, crawl KnowledgeCrawlID, keep map[string]bool) (int, error) {
	n := 0
	err := r.q.atomic(ctx, func(q *Queries) error {
		pages, err := q.Knowledge().CrawlPages(ctx, crawl)
		if err != nil {
			return err
		}
		for _, p := range pages {
			if keep[p.SourceURL] {
				continue
			}
			if err := q.Knowledge().deleteDocByID(ctx, p.ID); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// EncodeVector packs a vector as little-endian float32s.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		u := math.Float32bits(f)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

// DecodeVector unpacks EncodeVector's form.
func DecodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return v
}

// AgentsReferencing returns the names of the project's agents (not deleted) whose definition
// names the knowledge base called name (ignoring case), in references.knowledge_bases.
func (r Knowledge) AgentsReferencing(ctx context.Context, p ProjectID, name string) ([]string, error) {
	type row struct {
		name string
		def  json.RawMessage
	}
	rows, err := list(ctx, r.q, "agents referencing a knowledge base",
		`SELECT name, definition FROM agents WHERE project_id = $1 AND deleted_at IS NULL ORDER BY name_key`, []any{string(p)},
		func(rs rowScanner) (v row, err error) { err = rs.Scan(&v.name, jsonCol{&v.def}); return v, err })
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range rows {
		var d struct {
			References struct {
				KnowledgeBases []string `json:"knowledge_bases"`
			} `json:"references"`
		}
		if json.Unmarshal(a.def, &d) != nil {
			continue
		}
		for _, k := range d.References.KnowledgeBases {
			if strings.EqualFold(k, name) {
				out = append(out, a.name)
				break
			}
		}
	}
	return out, nil
}
