package knowledge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Crawler walks a website (package crawler does, over the SSRF guard's client), calling visit
// for every page it fetched or found gone, in order. It honours robots.txt and sitemaps, stays
// within the allowed domains and prefixes, and bounds depth, pages, redirects and page sizes.
type Crawler interface {
	Crawl(ctx context.Context, spec CrawlSpec, visit func(ctx context.Context, p FetchedPage) error) error
}

// CrawlSpec is what one run crawls.
type CrawlSpec struct {
	Start    string
	Allowed  []string // domains ("example.com", subdomains included) or URL prefixes ("https://example.com/docs/")
	MaxDepth int
	MaxPages int
	// Known returns the validators of a page fetched before, for a conditional request.
	Known func(url string) (etag, lastModified string)
}

// FetchedPage is one page of a crawl.
type FetchedPage struct {
	URL          string
	Depth        int
	NotModified  bool // 304 to a conditional request
	Gone         bool // 404 or 410: the page is removed from the base
	ContentType  string
	Body         []byte
	ETag         string
	LastModified string
	Err          error // a page that could not be fetched or read; its reason is kept
}

// KnowledgeCrawl is the crawl object.
type KnowledgeCrawl struct {
	Object            string     `json:"object" jsonschema:"enum=knowledge_crawl"`
	ID                string     `json:"id" jsonschema:"format=uuid"`
	KnowledgeBaseID   string     `json:"knowledge_base_id" jsonschema:"format=uuid"`
	StartURL          string     `json:"start_url"`
	Allowed           []string   `json:"allowed" doc:"Domains (subdomains included) or URL prefixes the crawl may follow links into."`
	MaxDepth          int        `json:"max_depth"`
	MaxPages          int        `json:"max_pages"`
	RefreshEveryHours int        `json:"refresh_every_hours" doc:"How often the crawl refreshes by itself; 0: only when asked."`
	Status            string     `json:"status" jsonschema:"enum=queued,enum=running,enum=done,enum=failed"`
	FailureReason     *string    `json:"failure_reason" jsonschema:"nullable"`
	Pages             CrawlPages `json:"pages" doc:"What the last run did."`
	LastStartedAt     *app.Time  `json:"last_started_at" jsonschema:"nullable"`
	LastFinishedAt    *app.Time  `json:"last_finished_at" jsonschema:"nullable"`
	NextRefreshAt     *app.Time  `json:"next_refresh_at" jsonschema:"nullable"`
	CreatedAt         app.Time   `json:"created_at"`
}

// SchemaDoc describes the object.
func (KnowledgeCrawl) SchemaDoc() string {
	return "A crawl of a website into a knowledge base. Its pages are documents of the base (source crawl); it refreshes by itself every refresh_every_hours, re-fetching with ETag and If-Modified-Since, re-indexing the pages whose content changed and removing the pages that are gone."
}

// CrawlPages counts the pages of a crawl's last run.
type CrawlPages struct {
	Indexed   int `json:"indexed" doc:"Pages new or changed, indexed."`
	Unchanged int `json:"unchanged" doc:"Pages not modified (304) or with the same content."`
	Failed    int `json:"failed"`
	Removed   int `json:"removed" doc:"Pages gone from the site (or now out of bounds), removed from the base."`
}

// KnowledgeCrawlCreate is the body of creating a crawl.
type KnowledgeCrawlCreate struct {
	StartURL          string   `json:"start_url" doc:"A public http(s) address." jsonschema:"format=uri,maxLength=2048"`
	Allowed           []string `json:"allowed,omitempty" doc:"Domains or URL prefixes links may lead into; the start address's host when left out." jsonschema:"maxItems=20"`
	MaxDepth          *int     `json:"max_depth,omitempty" doc:"Links followed from the start page; default 3." jsonschema:"minimum=0,maximum=10"`
	MaxPages          *int     `json:"max_pages,omitempty" doc:"Pages fetched at most; default 500." jsonschema:"minimum=1,maximum=5000"`
	RefreshEveryHours *int     `json:"refresh_every_hours,omitempty" doc:"Hours between refreshes; 0 turns scheduled refresh off; default 24 (daily)." jsonschema:"minimum=0,maximum=720"`
}

func crawlView(c store.KnowledgeCrawl) KnowledgeCrawl {
	v := KnowledgeCrawl{Object: "knowledge_crawl", ID: string(c.ID), KnowledgeBaseID: string(c.KBID), StartURL: c.StartURL, Allowed: c.Allowed,
		MaxDepth: c.MaxDepth, MaxPages: c.MaxPages, RefreshEveryHours: c.RefreshHours, Status: c.Status,
		Pages:         CrawlPages{Indexed: c.PagesOK, Unchanged: c.PagesUnchanged, Failed: c.PagesFailed, Removed: c.PagesRemoved},
		LastStartedAt: app.TP(c.LastStartedAt), LastFinishedAt: app.TP(c.LastFinishedAt), NextRefreshAt: app.TP(c.NextRefreshAt), CreatedAt: app.T(c.CreatedAt)}
	if v.Allowed == nil {
		v.Allowed = []string{}
	}
	if c.FailureReason != "" {
		r := c.FailureReason
		v.FailureReason = &r
	}
	return v
}

type crawlPayload struct {
	CrawlID string `json:"crawl_id"`
}

func enqueueCrawl(ctx context.Context, tx *store.Tx, id store.KnowledgeCrawlID) error {
	p, _ := json.Marshal(crawlPayload{CrawlID: string(id)})
	_, _, err := tx.EnqueueJob(ctx, store.NewJob{Kind: KindCrawl, Payload: p, MaxAttempts: 3})
	return err
}

// refused is the 422 of a crawl address.
func refused(field, format string, args ...any) error {
	e := fault.E(fault.CodeCrawlURLRefused, format, args...)
	e.Errors = []fault.FieldError{{Pointer: field, Code: "not_allowed", Detail: e.Detail}}
	return e
}

// CreateCrawl checks the address (public http(s), resolvable: 422 otherwise) and queues the
// crawl's first run.
func (s *Service) CreateCrawl(ctx context.Context, act app.Actor, kbID string, in KnowledgeCrawlCreate) (KnowledgeCrawl, error) {
	u, err := url.Parse(strings.TrimSpace(in.StartURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return KnowledgeCrawl{}, refused("/start_url", "The start address %q is not an absolute http or https address.", in.StartURL)
	}
	if u.User != nil {
		return KnowledgeCrawl{}, refused("/start_url", "The start address may not carry a user name or password.")
	}
	if s.Guard != nil {
		if err := s.Guard.CheckURL(ctx, u.String()); err != nil {
			return KnowledgeCrawl{}, refused("/start_url", "The start address %q cannot be crawled: %v.", in.StartURL, err)
		}
	}
	c := store.KnowledgeCrawl{KBID: store.KnowledgeBaseID(kbID), StartURL: u.String(), MaxDepth: 3, MaxPages: DefaultMaxPages, RefreshHours: DefaultRefreshHours}
	if in.MaxDepth != nil {
		c.MaxDepth = *in.MaxDepth
	}
	if in.MaxPages != nil {
		c.MaxPages = *in.MaxPages
	}
	if in.RefreshEveryHours != nil {
		c.RefreshHours = *in.RefreshEveryHours
	}
	for i, a := range in.Allowed {
		a = strings.TrimSpace(a)
		if a == "" || strings.ContainsAny(a, " \t\n") {
			return KnowledgeCrawl{}, refused(fmt.Sprintf("/allowed/%d", i), "An allowed entry is a domain (example.com) or an http(s) address prefix; %q is neither.", a)
		}
		if strings.Contains(a, "://") {
			p, err := url.Parse(a)
			if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				return KnowledgeCrawl{}, refused(fmt.Sprintf("/allowed/%d", i), "The allowed prefix %q is not an http(s) address.", a)
			}
		}
		c.Allowed = append(c.Allowed, strings.ToLower(a))
	}
	if len(c.Allowed) == 0 {
		c.Allowed = []string{strings.ToLower(u.Hostname())}
	}
	out, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeCrawl, error) {
		k, err := base(ctx, tx.Queries, act, kbID)
		if err != nil {
			return KnowledgeCrawl{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, k.ProjectID); err != nil {
			return KnowledgeCrawl{}, err
		}
		c.KBID = k.ID
		sc, err := tx.Knowledge().CreateCrawl(ctx, act.Scope, c)
		if err != nil {
			return KnowledgeCrawl{}, err
		}
		if err := enqueueCrawl(ctx, tx, sc.ID); err != nil {
			return KnowledgeCrawl{}, err
		}
		return crawlView(sc), au.Record("knowledge_crawl.created", "knowledge_crawl", string(sc.ID), k.ProjectID,
			map[string]any{"knowledge_base_id": string(k.ID), "start_url": sc.StartURL})
	})
	if err == nil {
		s.wake(ctx, KindCrawl)
	}
	return out, err
}

func (s *Service) crawl(ctx context.Context, q *store.Queries, act app.Actor, kbID, id string) (store.KnowledgeBase, store.KnowledgeCrawl, error) {
	k, err := base(ctx, q, act, kbID)
	if err != nil {
		return k, store.KnowledgeCrawl{}, err
	}
	c, err := q.Knowledge().GetCrawl(ctx, act.Scope, k.ID, store.KnowledgeCrawlID(id))
	return k, c, app.NotFound(err, fault.CodeKnowledgeCrawlNotFound, "crawl", id)
}

// GetCrawl returns a crawl of the actor's knowledge base.
func (s *Service) GetCrawl(ctx context.Context, act app.Actor, kbID, id string) (KnowledgeCrawl, error) {
	_, c, err := s.crawl(ctx, s.Store.Queries, act, kbID, id)
	if err != nil {
		return KnowledgeCrawl{}, err
	}
	return crawlView(c), nil
}

// ListCrawls returns a page of the crawls of the actor's knowledge base, oldest first.
func (s *Service) ListCrawls(ctx context.Context, act app.Actor, kbID string, pg store.Page) ([]KnowledgeCrawl, error) {
	k, err := base(ctx, s.Store.Queries, act, kbID)
	if err != nil {
		return nil, err
	}
	cs, err := s.Store.Knowledge().ListCrawls(ctx, act.Scope, k.ID, pg)
	if err != nil {
		return nil, err
	}
	out := make([]KnowledgeCrawl, len(cs))
	for i, c := range cs {
		out[i] = crawlView(c)
	}
	return out, nil
}

// ListCrawlPages returns a page of a crawl's pages (documents), oldest first.
func (s *Service) ListCrawlPages(ctx context.Context, act app.Actor, kbID, id string, pg store.Page) ([]KnowledgeDocument, error) {
	k, c, err := s.crawl(ctx, s.Store.Queries, act, kbID, id)
	if err != nil {
		return nil, err
	}
	ds, err := s.Store.Knowledge().ListDocuments(ctx, act.Scope, k.ID, store.DocumentFilter{CrawlID: c.ID}, pg)
	if err != nil {
		return nil, err
	}
	out := make([]KnowledgeDocument, len(ds))
	for i, d := range ds {
		out[i] = DocumentView(d)
	}
	return out, nil
}

// RefreshCrawl queues a run of the crawl now (409 while one is queued or running).
func (s *Service) RefreshCrawl(ctx context.Context, act app.Actor, kbID, id string) (KnowledgeCrawl, error) {
	out, err := app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeCrawl, error) {
		k, c, err := s.crawl(ctx, tx.Queries, act, kbID, id)
		if err != nil {
			return KnowledgeCrawl{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, k.ProjectID); err != nil {
			return KnowledgeCrawl{}, err
		}
		c, err = tx.Knowledge().QueueCrawl(ctx, act.Scope, k.ID, c.ID)
		if errors.Is(err, store.ErrConflict) {
			return KnowledgeCrawl{}, fault.E(fault.CodeCrawlInProgress, "The crawl %s is %s already.", c.ID, c.Status)
		}
		if err != nil {
			return KnowledgeCrawl{}, err
		}
		if err := enqueueCrawl(ctx, tx, c.ID); err != nil {
			return KnowledgeCrawl{}, err
		}
		return crawlView(c), au.Record("knowledge_crawl.refreshed", "knowledge_crawl", string(c.ID), k.ProjectID, nil)
	})
	if err == nil {
		s.wake(ctx, KindCrawl)
	}
	return out, err
}

// DeleteCrawl deletes a crawl with its pages.
func (s *Service) DeleteCrawl(ctx context.Context, act app.Actor, kbID, id string) (KnowledgeDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (KnowledgeDeleted, error) {
		k, c, err := s.crawl(ctx, tx.Queries, act, kbID, id)
		if err != nil {
			return KnowledgeDeleted{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, k.ProjectID); err != nil {
			return KnowledgeDeleted{}, err
		}
		if err := tx.Knowledge().DeleteCrawl(ctx, act.Scope, k.ID, c.ID); err != nil {
			return KnowledgeDeleted{}, err
		}
		return KnowledgeDeleted{Object: "knowledge_crawl", ID: string(c.ID), Deleted: true},
			au.Record("knowledge_crawl.deleted", "knowledge_crawl", string(c.ID), k.ProjectID, map[string]any{"start_url": c.StartURL})
	})
}

// CrawlJob is the handler of KindCrawl.
func (s *Service) CrawlJob(ctx context.Context, cr Crawler, payload json.RawMessage) error {
	var p crawlPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return err
	}
	return s.RunCrawl(ctx, cr, store.KnowledgeCrawlID(p.CrawlID))
}

// RunCrawl runs a crawl once: new and changed pages are indexed (a page whose extracted text
// has the same content hash is left as it is), pages not modified are kept, and the pages that
// are gone, or no longer reached, are removed. A crawl deleted meanwhile is left alone.
func (s *Service) RunCrawl(ctx context.Context, cr Crawler, id store.KnowledgeCrawlID) error {
	kq := s.Store.Knowledge()
	c, err := kq.CrawlByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := kq.StartCrawl(ctx, c.ID, s.now()); err != nil {
		return err
	}
	pages, err := kq.CrawlPages(ctx, c.ID)
	if err != nil {
		return err
	}
	known := map[string]store.KnowledgeDocument{}
	for _, p := range pages {
		known[p.SourceURL] = p
	}
	seen := map[string]bool{}
	var res store.CrawlResult
	startOK := false
	visit := func(ctx context.Context, p FetchedPage) error {
		if p.Depth == 0 && p.Err == nil && !p.Gone {
			startOK = true
		}
		switch {
		case p.Gone:
			return nil
		case p.Err != nil:
			seen[p.URL] = true
			res.FailedPages++
			d, err := kq.EnsureCrawlPage(ctx, c, p.URL, TypeHTML)
			if err != nil {
				return err
			}
			return kq.FailIndex(ctx, d.ID, p.Err.Error())
		case p.NotModified:
			seen[p.URL] = true
			if d, ok := known[p.URL]; ok {
				res.Unchanged++
				return kq.TouchCrawlPage(ctx, d.ID, p.ETag, p.LastModified)
			}
			return nil
		}
		seen[p.URL] = true
		typ := DetectType(p.Body, pathOf(p.URL), p.ContentType)
		d, err := kq.EnsureCrawlPage(ctx, c, p.URL, cmpOr(typ, TypeHTML))
		if err != nil {
			return err
		}
		if typ == "" {
			res.FailedPages++
			return kq.FailIndex(ctx, d.ID, fmt.Sprintf("The page's type (%s) is not one Parley reads.", p.ContentType))
		}
		ix, err := s.build(ctx, p.Body, typ, p.URL)
		if err != nil {
			var ee *extractError
			if errors.As(err, &ee) {
				res.FailedPages++
				return kq.FailIndex(ctx, d.ID, err.Error())
			}
			return err
		}
		if d.Status == store.DocReady && d.ContentHash == ix.ContentHash {
			res.Unchanged++
			return kq.TouchCrawlPage(ctx, d.ID, p.ETag, p.LastModified)
		}
		ix.ETag, ix.LastModified = p.ETag, p.LastModified
		res.OK++
		return kq.FinishIndex(ctx, d.ID, ix)
	}
	spec := CrawlSpec{Start: c.StartURL, Allowed: c.Allowed, MaxDepth: c.MaxDepth, MaxPages: c.MaxPages,
		Known: func(u string) (string, string) {
			if d, ok := known[u]; ok && d.Status == store.DocReady {
				return d.ETag, d.LastModified
			}
			return "", ""
		}}
	err = cr.Crawl(ctx, spec, visit)
	now := s.now()
	if c.RefreshHours > 0 {
		next := now.Add(time.Duration(c.RefreshHours) * time.Hour)
		res.NextRefresh = &next
	}
	switch {
	case ctx.Err() != nil:
		// Stopped (a shutdown, a lost lease): the job runs again and starts over.
		return errors.Join(err, ctx.Err())
	case err != nil:
		res.Failed = err.Error()
	case !startOK:
		res.Failed = fmt.Sprintf("The start page %s could not be fetched.", c.StartURL)
	default:
		if res.Removed, err = kq.RemoveCrawlPages(ctx, c.ID, seen); err != nil {
			return err
		}
	}
	s.log().InfoContext(ctx, "knowledge: crawl finished", "crawl", c.ID, "indexed", res.OK, "unchanged", res.Unchanged,
		"failed", res.FailedPages, "removed", res.Removed, "failure", res.Failed)
	return kq.FinishCrawl(ctx, c.ID, res, now)
}

// CrawlsDue queues the crawls whose scheduled refresh is due (the periodic KindCrawlsDue).
func (s *Service) CrawlsDue(ctx context.Context) (int, error) {
	n := 0
	err := s.Store.Tx(ctx, func(tx *store.Tx) error {
		cs, err := tx.Knowledge().DueCrawls(ctx, s.now(), 100)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := enqueueCrawl(ctx, tx, c.ID); err != nil {
				return err
			}
		}
		n = len(cs)
		return nil
	})
	if err == nil && n > 0 {
		s.wake(ctx, KindCrawl)
	}
	return n, err
}

func pathOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Path
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
