// Package knowledge holds the rules of knowledge bases (issue 16): their documents (uploaded,
// extracted with well-kept libraries, chunked along their headings), website crawls with
// scheduled refresh, and retrieval: full text always (SQLite FTS5 with BM25, PostgreSQL
// tsvector with ts_rank_cd) and, when an embeddings provider is configured, vectors fused with
// the full-text ranking by reciprocal rank.
//
// Indexing and crawling run on the job queue (KindIndex, KindCrawl), never in a request; the
// retrieval of a conversation's turn runs on the engine's reply goroutine, never on a media
// goroutine. The package must never import net/http's server side or the transport.
package knowledge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Job kinds of knowledge on the job queue.
const (
	KindIndex     = "knowledge.index"      // extract, chunk and index one document
	KindCrawl     = "knowledge.crawl"      // one run of a crawl (first crawl or refresh)
	KindCrawlsDue = "knowledge.crawls_due" // periodic: enqueue the crawls whose refresh is due
)

// Limits.
const (
	// MaxDocumentBytes is the largest document an upload takes (413 above).
	MaxDocumentBytes = 25 << 20
	// DefaultMaxPages is a crawl's page limit when none is given; MaxPagesLimit the most.
	DefaultMaxPages = 500
	MaxPagesLimit   = 5000
	// DefaultRefreshHours is how often a crawl refreshes by itself when not told (daily).
	DefaultRefreshHours = 24
)

// Waker wakes the workers for a job enqueued in a committed transaction (jobs.Queue).
type Waker interface {
	Wake(ctx context.Context, kind string)
}

// Service serves knowledge bases.
type Service struct {
	Store *store.Store
	// Wake, when set, wakes the workers after a job is enqueued.
	Wake Waker
	// Guard checks crawl addresses when a crawl is created (the SSRF guard's CheckURL).
	Guard URLChecker
	// Embedder, when set, embeds chunks at indexing and queries at search.
	Embedder Embedder
	Chunking ChunkOptions
	Log      *slog.Logger
	Now      func() time.Time
}

// URLChecker checks at save time that a customer's address is public HTTP(S) and resolves.
type URLChecker interface {
	CheckURL(ctx context.Context, rawURL string) error
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// KnowledgeBase is the knowledge base object.
type KnowledgeBase struct {
	Object      string   `json:"object" jsonschema:"enum=knowledge_base"`
	ID          string   `json:"id" jsonschema:"format=uuid"`
	ProjectID   string   `json:"project_id" jsonschema:"format=uuid"`
	Name        string   `json:"name" doc:"Unique in the project, ignoring case; agents name it in references.knowledge_bases."`
	Description string   `json:"description"`
	Documents   int      `json:"documents" doc:"Documents in it, uploaded and crawled."`
	CreatedAt   app.Time `json:"created_at"`
	UpdatedAt   app.Time `json:"updated_at"`
}

// SchemaDoc describes the object.
func (KnowledgeBase) SchemaDoc() string {
	return "A knowledge base: documents (uploads and crawled pages) an agent answers from."
}

// KnowledgeBaseCreate is the body of creating a knowledge base.
type KnowledgeBaseCreate struct {
	ProjectID   string `json:"project_id" jsonschema:"format=uuid" doc:"The project it belongs to."`
	Name        string `json:"name" doc:"1 to 120 characters, unique in the project ignoring case." jsonschema:"minLength=1,maxLength=120,pattern=^[^\\p{Cc}]*$"`
	Description string `json:"description,omitempty" jsonschema:"maxLength=2000"`
}

// KnowledgeBaseUpdate is the body of updating a knowledge base.
type KnowledgeBaseUpdate struct {
	Name        *string `json:"name,omitempty" doc:"A new name; refused (409) while agents name the base by its old name." jsonschema:"minLength=1,maxLength=120,pattern=^[^\\p{Cc}]*$"`
	Description *string `json:"description,omitempty" jsonschema:"maxLength=2000"`
}

// SchemaExtras: the body names at least one member.
func (KnowledgeBaseUpdate) SchemaExtras() map[string]any { return map[string]any{"minProperties": 1} }

// KnowledgeDocument is the knowledge document object.
type KnowledgeDocument struct {
	Object          string    `json:"object" jsonschema:"enum=knowledge_document"`
	ID              string    `json:"id" jsonschema:"format=uuid"`
	KnowledgeBaseID string    `json:"knowledge_base_id" jsonschema:"format=uuid"`
	Name            string    `json:"name" doc:"The file name of an upload; the address of a crawled page."`
	Source          string    `json:"source" jsonschema:"enum=upload,enum=crawl"`
	CrawlID         *string   `json:"crawl_id" jsonschema:"format=uuid,nullable" doc:"The crawl a page comes from; null for an upload."`
	URL             *string   `json:"url" jsonschema:"nullable" doc:"The address of a crawled page; null for an upload."`
	ContentType     string    `json:"content_type" doc:"application/pdf, text/html, text/markdown, text/plain, text/csv or the DOCX type."`
	Status          string    `json:"status" jsonschema:"enum=processing,enum=ready,enum=failed" doc:"processing until indexed (a replaced document keeps serving its old content meanwhile); failed with failure_reason."`
	FailureReason   *string   `json:"failure_reason" jsonschema:"nullable"`
	Bytes           int64     `json:"bytes"`
	Pages           int       `json:"pages" doc:"Pages of a PDF; 1 for other documents once indexed."`
	Chunks          int       `json:"chunks" doc:"Searchable chunks made of it."`
	CreatedAt       app.Time  `json:"created_at"`
	UpdatedAt       app.Time  `json:"updated_at"`
	IndexedAt       *app.Time `json:"indexed_at" jsonschema:"nullable"`
}

// SchemaDoc describes the object.
func (KnowledgeDocument) SchemaDoc() string {
	return "A document of a knowledge base: an upload, or a page of a crawl."
}

// KnowledgeDocumentText is the extracted text of a document.
type KnowledgeDocumentText struct {
	Object     string `json:"object" jsonschema:"enum=knowledge_document_text"`
	DocumentID string `json:"document_id" jsonschema:"format=uuid"`
	Text       string `json:"text" doc:"The text extracted from the document, headings as Markdown, as it was chunked."`
}

func baseView(k store.KnowledgeBase) KnowledgeBase {
	return KnowledgeBase{Object: "knowledge_base", ID: string(k.ID), ProjectID: string(k.ProjectID), Name: k.Name, Description: k.Description,
		Documents: k.Documents, CreatedAt: app.T(k.CreatedAt), UpdatedAt: app.T(k.UpdatedAt)}
}

// DocumentView is the interface's form of a stored document.
func DocumentView(d store.KnowledgeDocument) KnowledgeDocument {
	v := KnowledgeDocument{Object: "knowledge_document", ID: string(d.ID), KnowledgeBaseID: string(d.KBID), Name: d.Name, Source: "upload",
		ContentType: d.ContentType, Status: d.Status, Bytes: d.Bytes, Pages: d.Pages, Chunks: d.Chunks,
		CreatedAt: app.T(d.CreatedAt), UpdatedAt: app.T(d.UpdatedAt), IndexedAt: app.TP(d.IndexedAt)}
	if d.CrawlID != "" {
		v.Source = "crawl"
		c, u := string(d.CrawlID), d.SourceURL
		v.CrawlID, v.URL = &c, &u
	}
	if d.FailureReason != "" {
		r := d.FailureReason
		v.FailureReason = &r
	}
	return v
}

// base loads the actor's knowledge base with id.
func base(ctx context.Context, q *store.Queries, act app.Actor, id string) (store.KnowledgeBase, error) {
	k, err := q.Knowledge().GetBase(ctx, act.Scope, store.KnowledgeBaseID(id))
	return k, app.NotFound(err, fault.CodeKnowledgeBaseNotFound, "knowledge base", id)
}

// CreateBase creates a knowledge base in a project of the actor.
func (s *Service) CreateBase(ctx context.Context, act app.Actor, in KnowledgeBaseCreate) (KnowledgeBase, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeBase, error) {
		p, err := app.Project(ctx, tx.Queries, act, in.ProjectID)
		if err != nil {
			return KnowledgeBase{}, err
		}
		if err := app.Writable(p); err != nil {
			return KnowledgeBase{}, err
		}
		k, err := tx.Knowledge().CreateBase(ctx, act.Scope, store.KnowledgeBase{ProjectID: p.ID, Name: in.Name, Description: in.Description})
		if errors.Is(err, store.ErrConflict) {
			return KnowledgeBase{}, fault.E(fault.CodeKnowledgeBaseNameTaken, "The project already has a knowledge base named %q.", in.Name)
		}
		if err != nil {
			return KnowledgeBase{}, err
		}
		return baseView(k), au.Record("knowledge_base.created", "knowledge_base", string(k.ID), k.ProjectID, map[string]any{"name": k.Name})
	})
}

// GetBase returns the actor's knowledge base.
func (s *Service) GetBase(ctx context.Context, act app.Actor, id string) (KnowledgeBase, error) {
	k, err := base(ctx, s.Store.Queries, act, id)
	if err != nil {
		return KnowledgeBase{}, err
	}
	return baseView(k), nil
}

// ListBases returns a page of the actor's knowledge bases (of one project when set), oldest first.
func (s *Service) ListBases(ctx context.Context, act app.Actor, projectID string, pg store.Page) ([]KnowledgeBase, error) {
	var p store.ProjectID
	if projectID != "" {
		pr, err := app.Project(ctx, s.Store.Queries, act, projectID)
		if err != nil {
			return nil, err
		}
		p = pr.ID
	}
	ks, err := s.Store.Knowledge().ListBases(ctx, act.Scope, p, pg)
	if err != nil {
		return nil, err
	}
	out := make([]KnowledgeBase, len(ks))
	for i, k := range ks {
		out[i] = baseView(k)
	}
	return out, nil
}

// inUse refuses a change that would break the agents that name the base.
func inUse(ctx context.Context, q *store.Queries, k store.KnowledgeBase, what string) error {
	names, err := q.Knowledge().AgentsReferencing(ctx, k.ProjectID, k.Name)
	if err != nil || len(names) == 0 {
		return err
	}
	e := fault.E(fault.CodeKnowledgeBaseInUse, "The knowledge base %q cannot be %s: the agents %s name it in references.knowledge_bases.",
		k.Name, what, quoteList(names))
	e.Extra = map[string]any{"agents": names}
	return e
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// UpdateBase renames a knowledge base or changes its description.
func (s *Service) UpdateBase(ctx context.Context, act app.Actor, id string, u KnowledgeBaseUpdate) (KnowledgeBase, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeBase, error) {
		k, err := base(ctx, tx.Queries, act, id)
		if err != nil {
			return KnowledgeBase{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, k.ProjectID); err != nil {
			return KnowledgeBase{}, err
		}
		changes := map[string]any{}
		if u.Name != nil && *u.Name != k.Name {
			if !strings.EqualFold(*u.Name, k.Name) {
				if err := inUse(ctx, tx.Queries, k, "renamed"); err != nil {
					return KnowledgeBase{}, err
				}
			}
			changes["name"] = app.Changed(k.Name, *u.Name)
		}
		if u.Description != nil && *u.Description != k.Description {
			changes["description"] = app.Changed(k.Description, *u.Description)
		}
		n, err := tx.Knowledge().UpdateBase(ctx, act.Scope, k.ID, u.Name, u.Description)
		if errors.Is(err, store.ErrConflict) {
			return KnowledgeBase{}, fault.E(fault.CodeKnowledgeBaseNameTaken, "The project already has a knowledge base named %q.", *u.Name)
		}
		if err != nil {
			return KnowledgeBase{}, err
		}
		return baseView(n), au.Record("knowledge_base.updated", "knowledge_base", string(k.ID), k.ProjectID, changes)
	})
}

// KnowledgeDeleted is the answer of a deletion.
type KnowledgeDeleted struct {
	Object  string `json:"object" doc:"The type of the deleted object."`
	ID      string `json:"id" jsonschema:"format=uuid"`
	Deleted bool   `json:"deleted" doc:"Always true."`
}

// SchemaExtras: deleted is the constant true (written out by hand, as the reflector has no
// boolean const).
func (KnowledgeDeleted) SchemaExtras() map[string]any {
	return map[string]any{"properties": map[string]any{
		"object":  map[string]any{"type": "string", "enum": []string{"knowledge_base", "knowledge_document", "knowledge_crawl"}},
		"id":      map[string]any{"type": "string", "format": "uuid"},
		"deleted": map[string]any{"const": true},
	}}
}

// DeleteBase deletes a knowledge base with its documents and crawls; a base that agents name is
// refused (409 naming them).
func (s *Service) DeleteBase(ctx context.Context, act app.Actor, id string) (KnowledgeDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeDeleted, error) {
		k, err := base(ctx, tx.Queries, act, id)
		if err != nil {
			return KnowledgeDeleted{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, k.ProjectID); err != nil {
			return KnowledgeDeleted{}, err
		}
		if err := inUse(ctx, tx.Queries, k, "deleted"); err != nil {
			return KnowledgeDeleted{}, err
		}
		if err := tx.Knowledge().DeleteBase(ctx, act.Scope, k.ID); err != nil {
			return KnowledgeDeleted{}, err
		}
		return KnowledgeDeleted{Object: "knowledge_base", ID: string(k.ID), Deleted: true},
			au.Record("knowledge_base.deleted", "knowledge_base", string(k.ID), k.ProjectID, map[string]any{"name": k.Name})
	})
}

// Upload is a document sent to be indexed.
type Upload struct {
	Name        string // the file name ("" for a raw body without one)
	ContentType string // as the client declared it
	Data        []byte
}

// checkUpload reads the upload's type (415 for one Parley does not read) and size (413).
func checkUpload(u *Upload) (string, error) {
	if len(u.Data) > MaxDocumentBytes {
		return "", fault.E(fault.CodeBodyTooLarge, "A document is at most %d bytes (25 MB); this one is %d.", MaxDocumentBytes, len(u.Data))
	}
	typ := DetectType(u.Data, u.Name, u.ContentType)
	if typ == "" {
		return "", fault.E(fault.CodeUnsupportedDocumentType, "The document (%s) is not PDF, HTML, Markdown, plain text, CSV or DOCX.", describe(u))
	}
	u.Name = strings.TrimSpace(u.Name)
	if u.Name == "" {
		u.Name = "document" + extFor(typ)
	}
	if len(u.Name) > 255 {
		u.Name = u.Name[:255]
	}
	return typ, nil
}

func describe(u *Upload) string {
	if u.Name != "" {
		return fmt.Sprintf("%q, %s", u.Name, u.ContentType)
	}
	return u.ContentType
}

func extFor(typ string) string {
	switch typ {
	case TypePDF:
		return ".pdf"
	case TypeHTML:
		return ".html"
	case TypeMarkdown:
		return ".md"
	case TypeCSV:
		return ".csv"
	case TypeDOCX:
		return ".docx"
	}
	return ".txt"
}

type indexPayload struct {
	DocumentID string `json:"document_id"`
}

// enqueueIndex enqueues the indexing of a document in tx.
func enqueueIndex(ctx context.Context, tx *store.Tx, id store.KnowledgeDocumentID) error {
	p, _ := json.Marshal(indexPayload{DocumentID: string(id)})
	_, _, err := tx.EnqueueJob(ctx, store.NewJob{Kind: KindIndex, Payload: p, MaxAttempts: 3})
	return err
}

func (s *Service) wake(ctx context.Context, kind string) {
	if s.Wake != nil {
		s.Wake.Wake(ctx, kind)
	}
}

// Upload stores a document in the actor's knowledge base and queues its indexing: the answer
// is the document, processing.
func (s *Service) Upload(ctx context.Context, act app.Actor, kbID string, u Upload) (KnowledgeDocument, error) {
	typ, err := checkUpload(&u)
	if err != nil {
		return KnowledgeDocument{}, err
	}
	d, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeDocument, error) {
		k, err := base(ctx, tx.Queries, act, kbID)
		if err != nil {
			return KnowledgeDocument{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, k.ProjectID); err != nil {
			return KnowledgeDocument{}, err
		}
		d, err := tx.Knowledge().CreateDocument(ctx, act.Scope, k.ID, u.Name, store.KnowledgeUpload{Data: u.Data, ContentType: typ, Name: u.Name})
		if err != nil {
			return KnowledgeDocument{}, err
		}
		if err := enqueueIndex(ctx, tx, d.ID); err != nil {
			return KnowledgeDocument{}, err
		}
		return DocumentView(d), au.Record("knowledge_document.created", "knowledge_document", string(d.ID), k.ProjectID,
			map[string]any{"knowledge_base_id": string(k.ID), "name": d.Name, "bytes": d.Bytes, "content_type": typ})
	})
	if err == nil {
		s.wake(ctx, KindIndex)
	}
	return d, err
}

// Replace puts a new file in place of an uploaded document and queues its indexing; its old
// chunks serve until the new ones replace them in one transaction.
func (s *Service) Replace(ctx context.Context, act app.Actor, kbID, docID string, u Upload) (KnowledgeDocument, error) {
	typ, err := checkUpload(&u)
	if err != nil {
		return KnowledgeDocument{}, err
	}
	d, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeDocument, error) {
		k, err := base(ctx, tx.Queries, act, kbID)
		if err != nil {
			return KnowledgeDocument{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, k.ProjectID); err != nil {
			return KnowledgeDocument{}, err
		}
		old, err := tx.Knowledge().GetDocument(ctx, act.Scope, k.ID, store.KnowledgeDocumentID(docID))
		if err != nil {
			return KnowledgeDocument{}, app.NotFound(err, fault.CodeKnowledgeDocNotFound, "document", docID)
		}
		if old.CrawlID != "" {
			return KnowledgeDocument{}, fault.E(fault.CodeCrawlPageNotReplaceable, "The document %s is the page %s of a crawl; refresh the crawl instead.", old.ID, old.SourceURL)
		}
		d, err := tx.Knowledge().ReplaceDocument(ctx, act.Scope, k.ID, old.ID, u.Name, store.KnowledgeUpload{Data: u.Data, ContentType: typ, Name: u.Name})
		if err != nil {
			return KnowledgeDocument{}, err
		}
		if err := enqueueIndex(ctx, tx, d.ID); err != nil {
			return KnowledgeDocument{}, err
		}
		return DocumentView(d), au.Record("knowledge_document.replaced", "knowledge_document", string(d.ID), k.ProjectID,
			map[string]any{"knowledge_base_id": string(k.ID), "name": d.Name, "bytes": d.Bytes, "content_type": typ})
	})
	if err == nil {
		s.wake(ctx, KindIndex)
	}
	return d, err
}

// GetDocument returns a document of the actor's knowledge base.
func (s *Service) GetDocument(ctx context.Context, act app.Actor, kbID, docID string) (KnowledgeDocument, error) {
	k, err := base(ctx, s.Store.Queries, act, kbID)
	if err != nil {
		return KnowledgeDocument{}, err
	}
	d, err := s.Store.Knowledge().GetDocument(ctx, act.Scope, k.ID, store.KnowledgeDocumentID(docID))
	if err != nil {
		return KnowledgeDocument{}, app.NotFound(err, fault.CodeKnowledgeDocNotFound, "document", docID)
	}
	return DocumentView(d), nil
}

// Text returns the extracted text of a document.
func (s *Service) Text(ctx context.Context, act app.Actor, kbID, docID string) (KnowledgeDocumentText, error) {
	k, err := base(ctx, s.Store.Queries, act, kbID)
	if err != nil {
		return KnowledgeDocumentText{}, err
	}
	t, err := s.Store.Knowledge().DocumentText(ctx, act.Scope, k.ID, store.KnowledgeDocumentID(docID))
	if err != nil {
		return KnowledgeDocumentText{}, app.NotFound(err, fault.CodeKnowledgeDocNotFound, "document", docID)
	}
	return KnowledgeDocumentText{Object: "knowledge_document_text", DocumentID: docID, Text: t}, nil
}

// ListDocuments returns a page of the documents of the actor's knowledge base, oldest first.
func (s *Service) ListDocuments(ctx context.Context, act app.Actor, kbID string, f store.DocumentFilter, pg store.Page) ([]KnowledgeDocument, error) {
	k, err := base(ctx, s.Store.Queries, act, kbID)
	if err != nil {
		return nil, err
	}
	ds, err := s.Store.Knowledge().ListDocuments(ctx, act.Scope, k.ID, f, pg)
	if err != nil {
		return nil, err
	}
	out := make([]KnowledgeDocument, len(ds))
	for i, d := range ds {
		out[i] = DocumentView(d)
	}
	return out, nil
}

// DeleteDocument deletes a document and its chunks.
func (s *Service) DeleteDocument(ctx context.Context, act app.Actor, kbID, docID string) (KnowledgeDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeDeleted, error) {
		k, err := base(ctx, tx.Queries, act, kbID)
		if err != nil {
			return KnowledgeDeleted{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, k.ProjectID); err != nil {
			return KnowledgeDeleted{}, err
		}
		d, err := tx.Knowledge().DeleteDocument(ctx, act.Scope, k.ID, store.KnowledgeDocumentID(docID))
		if err != nil {
			return KnowledgeDeleted{}, app.NotFound(err, fault.CodeKnowledgeDocNotFound, "document", docID)
		}
		return KnowledgeDeleted{Object: "knowledge_document", ID: string(d.ID), Deleted: true},
			au.Record("knowledge_document.deleted", "knowledge_document", string(d.ID), k.ProjectID, map[string]any{"name": d.Name})
	})
}

// IndexJob is the handler of KindIndex: it indexes the document its payload names.
func (s *Service) IndexJob(ctx context.Context, payload json.RawMessage) error {
	var p indexPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return err
	}
	return s.Index(ctx, store.KnowledgeDocumentID(p.DocumentID))
}

// Index extracts, chunks and indexes the document's waiting upload. A document that cannot be
// read is failed with the reason; a document deleted meanwhile, or with no upload waiting (it
// was indexed already), is left alone.
func (s *Service) Index(ctx context.Context, id store.KnowledgeDocumentID) error {
	up, err := s.Store.Knowledge().Upload(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	d, err := s.Store.Knowledge().DocumentByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ix, err := s.build(ctx, up.Data, up.ContentType, d.SourceURL)
	if err != nil {
		var ee *extractError
		if errors.As(err, &ee) || errors.Is(err, ErrUnsupported) {
			s.log().InfoContext(ctx, "knowledge: document failed", "document", id, "reason", err)
			return s.Store.Knowledge().FailIndex(ctx, id, err.Error())
		}
		return err
	}
	err = s.Store.Knowledge().FinishIndex(ctx, id, ix)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// build extracts and chunks a document (and embeds its chunks when an embedder is set).
func (s *Service) build(ctx context.Context, data []byte, typ, pageURL string) (store.Indexed, error) {
	pages, err := Extract(data, typ, pageURL)
	if err != nil {
		return store.Indexed{}, err
	}
	var text strings.Builder
	for i, p := range pages {
		if i > 0 {
			fmt.Fprintf(&text, "\n\n<!-- page %d -->\n\n", p.N)
		}
		text.WriteString(p.Text)
	}
	chunks := Split(pages, s.Chunking)
	if s.Embedder != nil && len(chunks) > 0 {
		if err := s.embedChunks(ctx, chunks); err != nil {
			return store.Indexed{}, err
		}
	}
	sum := sha256.Sum256([]byte(text.String()))
	return store.Indexed{Text: text.String(), Pages: len(pages), ContentHash: hex.EncodeToString(sum[:]), Chunks: chunks}, nil
}

// KnowledgeDocumentUpload documents the multipart/form-data body of an upload (the transport
// reads its parts); a raw body with the document's Content-Type is taken too.
type KnowledgeDocumentUpload struct {
	File string `json:"file" doc:"A PDF, HTML, Markdown, plain-text, CSV or DOCX file of at most 25 MB; its file name is kept as the document's name." jsonschema:"format=binary"`
}
