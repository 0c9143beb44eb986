package knowledge_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/crawler"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// TestJobsSurviveRestart: an upload and a crawl queue their jobs in the store; the process
// stops before any worker runs them; a new process on the same database runs both.
func TestJobsSurviveRestart(t *testing.T) {
	s := newSite(t)
	path := filepath.Join(t.TempDir(), "parley.db")
	st1 := openStore(t, store.Options{URL: path})
	f := newFixture(t, st1)
	kb := f.base(t, "Bakery")
	doc, err := f.svc.Upload(t.Context(), f.act, kb.ID, knowledge.Upload{Name: "faq.md", Data: []byte("# FAQ\n\nWe deliver on Saturdays.")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.svc.CreateCrawl(t.Context(), f.act, kb.ID, knowledge.KnowledgeCrawlCreate{StartURL: s.srv.URL + "/", MaxDepth: ptr(1), MaxPages: ptr(5)})
	if err != nil {
		t.Fatal(err)
	}
	st1.Close() // the process stops here

	st2 := openStore(t, store.Options{URL: path})
	svc := &knowledge.Service{Store: st2}
	w := jobs.NewWorker(jobs.Options{Store: st2, PollInterval: 50 * time.Millisecond})
	cr := &crawler.Crawler{Client: netguard.MustNew(netguard.Options{AllowPrivate: true}).Client(0)}
	w.Register(knowledge.KindIndex, func(ctx context.Context, j *jobs.Job) error { return svc.IndexJob(ctx, j.Payload) })
	w.Register(knowledge.KindCrawl, func(ctx context.Context, j *jobs.Job) error { return svc.CrawlJob(ctx, cr, j.Payload) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, _ := svc.GetDocument(t.Context(), f.act, kb.ID, doc.ID)
		cw, _ := svc.GetCrawl(t.Context(), f.act, kb.ID, c.ID)
		if d.Status == "ready" && cw.Status == "done" {
			if cw.Pages.Indexed < 3 {
				t.Fatalf("crawl %+v", cw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: document %s, crawl %s", d.Status, cw.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
