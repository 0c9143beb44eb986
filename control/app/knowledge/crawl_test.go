package knowledge_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/crawler"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// site is a small website served by the test: pages, robots.txt with a disallowed path, a
// sitemap naming a page no link reaches, an off-domain link (another loopback address), a
// redirect loop, an endless chain of links, a page over the size limit, an ETag, and pages that
// change or go away between crawls.
type site struct {
	srv, off *httptest.Server
	mu       sync.Mutex
	hits     map[string]int
	cond     map[string]int // conditional requests answered 304
	version  int            // 2 after the site changed
}

func newSite(t *testing.T) *site {
	s := &site{hits: map[string]int{}, cond: map[string]int{}, version: 1}
	off, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2 for the off-domain site: %v", err)
	}
	s.off = &httptest.Server{Listener: off, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits["off"+r.URL.Path]++
		s.mu.Unlock()
		fmt.Fprint(w, "<html><body>elsewhere</body></html>")
	})}}
	s.off.Start()
	t.Cleanup(s.off.Close)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	v := s.version
	s.mu.Unlock()
	html := func(body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><head><title>t</title></head><body>%s</body></html>", body)
	}
	switch p := r.URL.Path; {
	case p == "/robots.txt":
		fmt.Fprintf(w, "User-agent: *\nDisallow: /private/\nSitemap: %s/sitemap.xml\n", s.srv.URL)
	case p == "/sitemap.xml":
		fmt.Fprintf(w, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>%s/hidden</loc></url></urlset>`, s.srv.URL)
	case p == "/":
		html(fmt.Sprintf(`<h1>Home</h1><p>Welcome to the bakery.</p><a href="/hours">Hours</a> <a href="/prices">Prices</a> <a href="/private/staff">Staff</a>
			<a href="%s/x">Elsewhere</a> <a href="/loop">Loop</a> <a href="/big">Big</a> <a href="/deep/1">Deep</a> <a href="/hours#top">Top</a>`, s.off.URL))
	case p == "/hours":
		if r.Header.Get("If-None-Match") == `"hours-1"` {
			s.mu.Lock()
			s.cond[p]++
			s.mu.Unlock()
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"hours-1"`)
		html(`<h2>Opening hours</h2><p>The bakery opens at seven and closes at three, Tuesday to Sunday.</p>`)
	case p == "/prices":
		if v == 1 {
			html(`<h2>Prices</h2><p>A sourdough loaf costs four euros.</p>`)
		} else {
			html(`<h2>Prices</h2><p>A sourdough loaf costs five euros since the flour got dearer.</p>`)
		}
	case p == "/hidden":
		if v == 1 {
			html(`<h2>Catering</h2><p>We cater weddings with croissant towers.</p>`)
		} else {
			http.NotFound(w, r)
		}
	case p == "/private/staff":
		html(`<p>staff only</p>`)
	case p == "/loop":
		http.Redirect(w, r, "/loop2", http.StatusFound)
	case p == "/loop2":
		http.Redirect(w, r, "/loop", http.StatusFound)
	case p == "/big":
		w.Header().Set("Content-Type", "text/html")
		chunk := strings.Repeat("<p>crumb crumb crumb crumb crumb crumb crumb</p>\n", 1000)
		for i := 0; i < 150 && r.Context().Err() == nil; i++ { // ~7 MB unless the reader stops
			fmt.Fprint(w, chunk)
		}
	case strings.HasPrefix(p, "/deep/"):
		var n int
		fmt.Sscanf(p, "/deep/%d", &n)
		html(fmt.Sprintf(`<p>level %d of an endless staircase</p><a href="/deep/%d">next</a>`, n, n+1))
	default:
		http.NotFound(w, r)
	}
}

func (s *site) hit(p string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.hits[p] }

// TestCrawl crawls the test site, then refreshes it after it changed, on both engines.
func TestCrawl(t *testing.T) {
	engines(t, func(t *testing.T, st *store.Store) {
		s := newSite(t)
		f := newFixture(t, st)
		guard := netguard.MustNew(netguard.Options{AllowPrivate: true})
		f.svc.Guard = urlGuard{guard}
		kb := f.base(t, "Bakery")
		ctx := t.Context()
		c, err := f.svc.CreateCrawl(ctx, f.act, kb.ID, knowledge.KnowledgeCrawlCreate{StartURL: s.srv.URL + "/", MaxDepth: ptr(3), MaxPages: ptr(12)})
		if err != nil {
			t.Fatal(err)
		}
		cr := &crawler.Crawler{Client: guard.Client(0)}
		if err := f.svc.RunCrawl(ctx, cr, store.KnowledgeCrawlID(c.ID)); err != nil {
			t.Fatal(err)
		}
		pages := crawlPages(t, f, kb, c.ID)
		for _, want := range []string{"/", "/hours", "/prices", "/hidden"} {
			if pages[s.srv.URL+want].Status != "ready" {
				t.Errorf("page %s: %+v", want, pages[s.srv.URL+want])
			}
		}
		if p := pages[s.srv.URL+"/loop"]; p.Status != "failed" || !strings.Contains(*p.FailureReason, "loop") {
			t.Errorf("the redirect loop: %+v", p)
		}
		if p := pages[s.srv.URL+"/big"]; p.Status != "failed" || !strings.Contains(*p.FailureReason, "larger than 5 MB") {
			t.Errorf("the big page: %+v", p)
		}
		if s.hit("/private/staff") != 0 || s.hit("off/x") != 0 {
			t.Errorf("fetched a disallowed (%d) or off-domain (%d) page", s.hit("/private/staff"), s.hit("off/x"))
		}
		if s.hit("/deep/3") != 1 || s.hit("/deep/4") != 0 {
			t.Errorf("depth not bounded: /deep/3 %d, /deep/4 %d", s.hit("/deep/3"), s.hit("/deep/4"))
		}
		if len(pages) > 12 {
			t.Errorf("%d pages, over the limit of 12", len(pages))
		}
		if got := search(t, f, kb, "croissant towers weddings"); !strings.Contains(got, "croissant") {
			t.Fatalf("the sitemap's page is not searchable: %s", got)
		}
		got, _ := f.svc.GetCrawl(ctx, f.act, kb.ID, c.ID)
		if got.Status != "done" || got.NextRefreshAt == nil {
			t.Fatalf("crawl %+v", got)
		}

		// The site changes: /prices is new text, /hidden is gone, /hours answers 304.
		s.mu.Lock()
		s.version = 2
		s.mu.Unlock()
		hoursBefore := pages[s.srv.URL+"/hours"].IndexedAt
		if _, err := f.svc.RefreshCrawl(ctx, f.act, kb.ID, c.ID); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.RunCrawl(ctx, cr, store.KnowledgeCrawlID(c.ID)); err != nil {
			t.Fatal(err)
		}
		pages = crawlPages(t, f, kb, c.ID)
		if _, ok := pages[s.srv.URL+"/hidden"]; ok {
			t.Error("the page gone from the site is still there")
		}
		if s.cond["/hours"] != 1 || !pages[s.srv.URL+"/hours"].IndexedAt.Equal(hoursBefore.Time) {
			t.Errorf("/hours not refreshed with If-None-Match (%d 304s) or re-indexed anyway", s.cond["/hours"])
		}
		if got := search(t, f, kb, "sourdough loaf euros"); !strings.Contains(got, "five euros") || strings.Contains(got, "four euros") {
			t.Fatalf("the changed page: %s", got)
		}
		if got := search(t, f, kb, "croissant towers weddings"); strings.Contains(got, "croissant") {
			t.Fatalf("the removed page is still found: %s", got)
		}
		got, _ = f.svc.GetCrawl(ctx, f.act, kb.ID, c.ID)
		if got.Pages.Removed != 1 || got.Pages.Indexed != 1 || got.Pages.Unchanged < 2 {
			t.Fatalf("second run: %+v", got.Pages)
		}
	})
}

// TestCrawlGuard: the SSRF guard refuses a private start address when the crawl is created
// (422), and refuses at dial time a page the crawl reaches anyway.
func TestCrawlGuard(t *testing.T) {
	f := newFixture(t, openStore(t, store.Options{DataDir: t.TempDir()}))
	strict := netguard.MustNew(netguard.Options{})
	f.svc.Guard = urlGuard{strict}
	kb := f.base(t, "Guarded")
	for _, u := range []string{"http://127.0.0.1/", "http://10.1.2.3/", "http://169.254.169.254/latest/meta-data", "file:///etc/passwd", "gopher://example.com/", "http://no-such-host.invalid/"} {
		_, err := f.svc.CreateCrawl(t.Context(), f.act, kb.ID, knowledge.KnowledgeCrawlCreate{StartURL: u})
		if fe, ok := err.(*fault.Error); !ok || fe.Status != 422 || fe.Code != fault.CodeCrawlURLRefused {
			t.Errorf("%s: %v, want 422 crawl_url_refused", u, err)
		}
	}
	// Created while private addresses were allowed, crawled by a strict guard: refused at dial time.
	s := newSite(t)
	f.svc.Guard = nil
	c, err := f.svc.CreateCrawl(t.Context(), f.act, kb.ID, knowledge.KnowledgeCrawlCreate{StartURL: s.srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RunCrawl(t.Context(), &crawler.Crawler{Client: strict.Client(0)}, store.KnowledgeCrawlID(c.ID)); err != nil {
		t.Fatal(err)
	}
	got, _ := f.svc.GetCrawl(t.Context(), f.act, kb.ID, c.ID)
	if got.Status != "failed" || s.hit("/") != 0 {
		t.Fatalf("crawl %+v, %d hits", got, s.hit("/"))
	}
}

type urlGuard struct{ g *netguard.Guard }

func (u urlGuard) CheckURL(ctx context.Context, raw string) error {
	return u.g.CheckURL(ctx, raw, netguard.HTTPOrHTTPS)
}

func ptr[T any](v T) *T { return &v }

func crawlPages(t *testing.T, f *fixture, kb knowledge.KnowledgeBase, crawl string) map[string]knowledge.KnowledgeDocument {
	t.Helper()
	ds, err := f.svc.ListCrawlPages(t.Context(), f.act, kb.ID, crawl, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]knowledge.KnowledgeDocument{}
	for _, d := range ds {
		out[*d.URL] = d
	}
	return out
}

func search(t *testing.T, f *fixture, kb knowledge.KnowledgeBase, q string) string {
	t.Helper()
	r, err := f.svc.Search(t.Context(), f.act, kb.ID, knowledge.KnowledgeSearch{Query: q, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, c := range r.Data {
		sb.WriteString(c.Text + "\n")
	}
	return sb.String()
}
