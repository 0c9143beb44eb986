package control

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/crawler"
	"github.com/parley-voice/parley/control/embeddings"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/internal/netguard"
)

// issue 16: the knowledge bases' service (shared by the API, the conversation runtime and the
// workers), its crawler over the SSRF guard, and its jobs.

const (
	crawlsDueEvery = time.Minute
	indexTimeout   = 5 * time.Minute  // one document: extract, chunk, embed, index
	crawlTimeout   = 30 * time.Minute // one run of a crawl (at most max_pages pages)
)

// guardURLs checks crawl addresses with the SSRF guard at save time.
type guardURLs struct{ g *netguard.Guard }

func (u guardURLs) CheckURL(ctx context.Context, raw string) error {
	return u.g.CheckURL(ctx, raw, netguard.HTTPOrHTTPS)
}

// knowledgeService builds the node's knowledge service: crawl addresses checked by the guard,
// workers woken through the bus, embeddings when a server is configured.
func (n *Node) knowledgeService() *knowledge.Service {
	s := &knowledge.Service{Store: n.Store, Wake: jobs.NewQueue(n.Store, n.Bus, n.log), Log: n.log}
	if n.Outbound != nil {
		s.Guard = guardURLs{n.Outbound}
	}
	if n.cfg.EmbeddingsBaseURL != "" {
		s.Embedder = &embeddings.Client{BaseURL: n.cfg.EmbeddingsBaseURL, APIKey: n.cfg.EmbeddingsKey, Model: n.cfg.EmbeddingsModel}
	}
	return s
}

// registerKnowledgeJobs gives w the indexing and crawling jobs: every fetch of a crawl goes
// through the SSRF guard's client.
func registerKnowledgeJobs(w *jobs.Worker, s *knowledge.Service, guard *netguard.Guard) {
	w.Register(knowledge.KindIndex, func(ctx context.Context, j *jobs.Job) error { return s.IndexJob(ctx, j.Payload) },
		jobs.WithTimeout(indexTimeout))
	cr := &crawler.Crawler{Client: guard.Client(0)}
	w.Register(knowledge.KindCrawl, func(ctx context.Context, j *jobs.Job) error { return s.CrawlJob(ctx, cr, j.Payload) },
		jobs.WithTimeout(crawlTimeout))
	w.Register(knowledge.KindCrawlsDue, func(ctx context.Context, _ *jobs.Job) error { _, err := s.CrawlsDue(ctx); return err },
		jobs.WithTimeout(jobTimeout), jobs.WithMaxAttempts(1))
	w.Every(knowledge.KindCrawlsDue, crawlsDueEvery)
}

// isDocumentUpload reports an upload or replacement of a knowledge document
// (POST /v1/knowledge-bases/{id}/documents, PUT …/documents/{id}), whose body may be 25 MB.
func isDocumentUpload(r *http.Request) bool {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		return false
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	return len(parts) >= 4 && len(parts) <= 5 && parts[0] == "v1" && parts[1] == "knowledge-bases" && parts[3] == "documents"
}
