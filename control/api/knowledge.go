package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// issue 16: knowledge bases, documents, crawls and search.

// MaxDocumentUpload is the largest request body a document upload takes (the node's body
// limit allows it on the documents' paths).
const MaxDocumentUpload = knowledge.MaxDocumentBytes + 64<<10

type listKnowledgeBasesIn struct {
	listQuery
	ProjectID string `query:"project_id" format:"uuid" doc:"Only this project's knowledge bases; 404 when the key reaches no such project."`
}

func (a *API) listKnowledgeBases(ctx context.Context, c *call, in *listKnowledgeBasesIn) (*list[knowledge.KnowledgeBase], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ks, err := a.Knowledge.ListBases(ctx, c.actor(ctx), in.ProjectID, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ks, func(k knowledge.KnowledgeBase) string { return k.ID }), nil
}

type createKnowledgeBaseIn struct {
	Body knowledge.KnowledgeBaseCreate `body:"required"`
}

func (a *API) createKnowledgeBase(ctx context.Context, c *call, in *createKnowledgeBaseIn) (*knowledge.KnowledgeBase, error) {
	k, err := a.Knowledge.CreateBase(ctx, c.actor(ctx), in.Body)
	return &k, err
}

type knowledgeBaseIn struct {
	KB string `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
}

func (a *API) getKnowledgeBase(ctx context.Context, c *call, in *knowledgeBaseIn) (*knowledge.KnowledgeBase, error) {
	k, err := a.Knowledge.GetBase(ctx, c.actor(ctx), in.KB)
	return &k, err
}

type updateKnowledgeBaseIn struct {
	KB   string                        `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Body knowledge.KnowledgeBaseUpdate `body:"required"`
}

func (a *API) updateKnowledgeBase(ctx context.Context, c *call, in *updateKnowledgeBaseIn) (*knowledge.KnowledgeBase, error) {
	k, err := a.Knowledge.UpdateBase(ctx, c.actor(ctx), in.KB, in.Body)
	return &k, err
}

func (a *API) deleteKnowledgeBase(ctx context.Context, c *call, in *knowledgeBaseIn) (*knowledge.KnowledgeDeleted, error) {
	d, err := a.Knowledge.DeleteBase(ctx, c.actor(ctx), in.KB)
	return &d, err
}

type searchKnowledgeBaseIn struct {
	KB   string                    `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Body knowledge.KnowledgeSearch `body:"required"`
}

func (a *API) searchKnowledgeBase(ctx context.Context, c *call, in *searchKnowledgeBaseIn) (*knowledge.KnowledgeSearchResult, error) {
	r, err := a.Knowledge.Search(ctx, c.actor(ctx), in.KB, in.Body)
	return &r, err
}

type listKnowledgeDocumentsIn struct {
	listQuery
	KB     string `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Status string `query:"status" enum:"processing,ready,failed" doc:"Only documents in this status."`
}

func (a *API) listKnowledgeDocuments(ctx context.Context, c *call, in *listKnowledgeDocumentsIn) (*list[knowledge.KnowledgeDocument], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ds, err := a.Knowledge.ListDocuments(ctx, c.actor(ctx), in.KB, store.DocumentFilter{Status: in.Status}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ds, func(d knowledge.KnowledgeDocument) string { return d.ID }), nil
}

type uploadKnowledgeDocumentIn struct {
	KB   string                            `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Name string                            `query:"name" doc:"The document's name for a raw body (a multipart upload names it by its file name)."`
	Body knowledge.KnowledgeDocumentUpload `body:"required"`
}

func (a *API) uploadKnowledgeDocument(ctx context.Context, c *call, w http.ResponseWriter, r *http.Request, in *uploadKnowledgeDocumentIn) error {
	up, err := readDocument(w, r, in.Name)
	if err != nil {
		return err
	}
	d, err := a.Knowledge.Upload(ctx, c.actor(ctx), in.KB, up)
	if err != nil {
		return err
	}
	return a.writeAnswer(ctx, w, c, &d)
}

type knowledgeDocumentIn struct {
	KB  string `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Doc string `path:"document_id" format:"uuid" doc:"The document."`
}

func (a *API) getKnowledgeDocument(ctx context.Context, c *call, in *knowledgeDocumentIn) (*knowledge.KnowledgeDocument, error) {
	d, err := a.Knowledge.GetDocument(ctx, c.actor(ctx), in.KB, in.Doc)
	return &d, err
}

func (a *API) getKnowledgeDocumentText(ctx context.Context, c *call, in *knowledgeDocumentIn) (*knowledge.KnowledgeDocumentText, error) {
	t, err := a.Knowledge.Text(ctx, c.actor(ctx), in.KB, in.Doc)
	return &t, err
}

type replaceKnowledgeDocumentIn struct {
	KB   string                            `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Doc  string                            `path:"document_id" format:"uuid" doc:"The document."`
	Name string                            `query:"name" doc:"The document's new name for a raw body."`
	Body knowledge.KnowledgeDocumentUpload `body:"required"`
}

func (a *API) replaceKnowledgeDocument(ctx context.Context, c *call, w http.ResponseWriter, r *http.Request, in *replaceKnowledgeDocumentIn) error {
	up, err := readDocument(w, r, in.Name)
	if err != nil {
		return err
	}
	d, err := a.Knowledge.Replace(ctx, c.actor(ctx), in.KB, in.Doc, up)
	if err != nil {
		return err
	}
	return a.writeAnswer(ctx, w, c, &d)
}

func (a *API) deleteKnowledgeDocument(ctx context.Context, c *call, in *knowledgeDocumentIn) (*knowledge.KnowledgeDeleted, error) {
	d, err := a.Knowledge.DeleteDocument(ctx, c.actor(ctx), in.KB, in.Doc)
	return &d, err
}

type listKnowledgeCrawlsIn struct {
	listQuery
	KB string `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
}

func (a *API) listKnowledgeCrawls(ctx context.Context, c *call, in *listKnowledgeCrawlsIn) (*list[knowledge.KnowledgeCrawl], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	cs, err := a.Knowledge.ListCrawls(ctx, c.actor(ctx), in.KB, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, cs, func(k knowledge.KnowledgeCrawl) string { return k.ID }), nil
}

type createKnowledgeCrawlIn struct {
	KB   string                         `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Body knowledge.KnowledgeCrawlCreate `body:"required"`
}

func (a *API) createKnowledgeCrawl(ctx context.Context, c *call, in *createKnowledgeCrawlIn) (*knowledge.KnowledgeCrawl, error) {
	k, err := a.Knowledge.CreateCrawl(ctx, c.actor(ctx), in.KB, in.Body)
	return &k, err
}

type knowledgeCrawlIn struct {
	KB    string `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Crawl string `path:"crawl_id" format:"uuid" doc:"The crawl."`
}

func (a *API) getKnowledgeCrawl(ctx context.Context, c *call, in *knowledgeCrawlIn) (*knowledge.KnowledgeCrawl, error) {
	k, err := a.Knowledge.GetCrawl(ctx, c.actor(ctx), in.KB, in.Crawl)
	return &k, err
}

func (a *API) refreshKnowledgeCrawl(ctx context.Context, c *call, in *knowledgeCrawlIn) (*knowledge.KnowledgeCrawl, error) {
	k, err := a.Knowledge.RefreshCrawl(ctx, c.actor(ctx), in.KB, in.Crawl)
	return &k, err
}

func (a *API) deleteKnowledgeCrawl(ctx context.Context, c *call, in *knowledgeCrawlIn) (*knowledge.KnowledgeDeleted, error) {
	d, err := a.Knowledge.DeleteCrawl(ctx, c.actor(ctx), in.KB, in.Crawl)
	return &d, err
}

type listKnowledgeCrawlPagesIn struct {
	listQuery
	KB    string `path:"knowledge_base_id" format:"uuid" doc:"The knowledge base."`
	Crawl string `path:"crawl_id" format:"uuid" doc:"The crawl."`
}

func (a *API) listKnowledgeCrawlPages(ctx context.Context, c *call, in *listKnowledgeCrawlPagesIn) (*list[knowledge.KnowledgeDocument], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ds, err := a.Knowledge.ListCrawlPages(ctx, c.actor(ctx), in.KB, in.Crawl, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ds, func(d knowledge.KnowledgeDocument) string { return d.ID }), nil
}

// readDocument reads a document upload: multipart/form-data with one part named file (its
// file name and type kept), or the raw document as the body with its own Content-Type.
func readDocument(w http.ResponseWriter, r *http.Request, name string) (knowledge.Upload, error) {
	tooLarge := fault.E(fault.CodeBodyTooLarge, "A document is at most %d bytes (25 MB).", knowledge.MaxDocumentBytes)
	if r.ContentLength > MaxDocumentUpload {
		return knowledge.Upload{}, tooLarge
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxDocumentUpload)
	var mbe *http.MaxBytesError
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil && r.Header.Get("Content-Type") != "" {
		return knowledge.Upload{}, fault.E(fault.CodeUnsupportedMediaType, "The Content-Type %q cannot be read.", r.Header.Get("Content-Type"))
	}
	if mt != "multipart/form-data" {
		data, err := io.ReadAll(io.LimitReader(r.Body, knowledge.MaxDocumentBytes+1))
		if errors.As(err, &mbe) || len(data) > knowledge.MaxDocumentBytes {
			return knowledge.Upload{}, tooLarge
		}
		if err != nil {
			return knowledge.Upload{}, app.Invalid(jsoncheck.Problem{Pointer: "", Code: "malformed", Detail: "The body cannot be read: " + err.Error()})
		}
		return knowledge.Upload{Name: name, ContentType: mt, Data: data}, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return knowledge.Upload{}, fault.E(fault.CodeUnsupportedMediaType, "The body is not multipart/form-data: %v.", err)
	}
	var up *knowledge.Upload
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.As(err, &mbe) {
			return knowledge.Upload{}, tooLarge
		}
		if err != nil {
			return knowledge.Upload{}, app.Invalid(jsoncheck.Problem{Pointer: "", Code: "malformed", Detail: "The multipart body cannot be read: " + err.Error()})
		}
		if part.FormName() != "file" {
			part.Close()
			return knowledge.Upload{}, app.Invalid(jsoncheck.Problem{Pointer: "/" + jsoncheck.EscapePointer(part.FormName()), Code: jsoncheck.CodeUnknownField,
				Detail: fmt.Sprintf("Unknown part %q: the upload takes one part, file.", part.FormName())})
		}
		if up != nil {
			return knowledge.Upload{}, app.Invalid(jsoncheck.Problem{Pointer: "/file", Code: "not_unique", Detail: "Send one file per upload."})
		}
		data, err := io.ReadAll(io.LimitReader(part, knowledge.MaxDocumentBytes+1))
		if errors.As(err, &mbe) || len(data) > knowledge.MaxDocumentBytes {
			return knowledge.Upload{}, tooLarge
		}
		if err != nil {
			return knowledge.Upload{}, app.Invalid(jsoncheck.Problem{Pointer: "/file", Code: "malformed", Detail: "The file cannot be read: " + err.Error()})
		}
		n := part.FileName()
		if n == "" {
			n = name
		}
		up = &knowledge.Upload{Name: n, ContentType: part.Header.Get("Content-Type"), Data: data}
	}
	if up == nil {
		return knowledge.Upload{}, app.Invalid(jsoncheck.Problem{Pointer: "/file", Code: jsoncheck.CodeRequired, Detail: "The upload needs a part named file."})
	}
	return *up, nil
}
