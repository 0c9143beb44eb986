package cdp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

func TestBrowserEval(t *testing.T) {
	bin := testenv.NeedCommand(t, "chromium")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>t</title><script>console.log("hello from the page"); window.answer = 42;</script>`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Launch(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Navigate(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Answer int    `json:"answer"`
		Title  string `json:"title"`
	}
	if err := p.Eval(ctx, `(async () => ({answer: window.answer, title: document.title}))()`, &got); err != nil {
		t.Fatal(err)
	}
	if got.Answer != 42 || got.Title != "t" {
		t.Fatalf("got %+v", got)
	}
	if err := p.Eval(ctx, `(() => { throw new Error("boom") })()`, nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("exception not reported: %v", err)
	}
	found := false
	for _, l := range p.Logs() {
		found = found || strings.Contains(l, "hello from the page")
	}
	if !found {
		t.Fatalf("console output not collected: %v", p.Logs())
	}
}
