package control

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/store"
)

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, _, err := config.Parse("test", config.ScopeServe, []string{"--http-addr", "127.0.0.1:0", "--sip-addr", "127.0.0.1:0", "--webrtc-udp-port", "0", "--data-dir", t.TempDir(), "--drain-timeout", "5s", "--max-body-bytes", "2048"}, func(string) string { return "" }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestMiddlewareStack(t *testing.T) {
	r := chi.NewRouter()
	r.Use(requestID, accessLog(quietLog(), newMetrics()), recoverer(quietLog()), bodyLimit(16))
	r.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("kaboom") })
	r.Post("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		w.Write(b)
	})

	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	var doc map[string]any
	json.Unmarshal(rec.Body.Bytes(), &doc)
	rid := rec.Header().Get("X-Request-Id")
	if rec.Code != 500 || doc["code"] != "internal_error" || doc["request_id"] != rid || rid == "" {
		t.Fatalf("panic: %d %v (X-Request-Id %q)", rec.Code, doc, rid)
	}
	if strings.Contains(rec.Body.String(), "kaboom") {
		t.Fatal("panic value leaked to the client")
	}

	req := httptest.NewRequest("POST", "/echo", strings.NewReader(strings.Repeat("x", 17)))
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != 413 {
		t.Fatalf("over-limit body (declared length): %d", rec.Code)
	}
	req = httptest.NewRequest("POST", "/echo", io.MultiReader(strings.NewReader(strings.Repeat("y", 40))))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != 413 {
		t.Fatalf("over-limit body (chunked): %d", rec.Code)
	}
	req = httptest.NewRequest("POST", "/echo", strings.NewReader("small"))
	req.Header.Set("X-Request-Id", "client-chosen-id-123")
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Body.String() != "small" || rec.Header().Get("X-Request-Id") != "client-chosen-id-123" {
		t.Fatalf("echo: %d %q id %q", rec.Code, rec.Body, rec.Header().Get("X-Request-Id"))
	}
	req = httptest.NewRequest("GET", "/boom", nil)
	req.Header.Set("X-Request-Id", "bad id with spaces\n")
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if got := rec.Header().Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
		t.Fatalf("unsafe client request id echoed: %q", got)
	}
}

// Cancelling Run drains: the node reports draining (readyz 503), a request in progress finishes,
// and Run returns nil.
func TestNodeDrain(t *testing.T) {
	var out bytes.Buffer
	n, err := NewNode(context.Background(), testConfig(t), quietLog(), &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "sk_live_") || !strings.Contains(out.String(), "sk_test_") {
		t.Fatalf("first start printed no keys: %q", out.String())
	}
	release := make(chan struct{})
	entered := make(chan struct{})
	inner := n.handler
	mux := chi.NewRouter()
	mux.Get("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "finished")
	})
	mux.Mount("/", inner)
	n.handler = mux

	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	base := "http://" + n.Addr().String()

	rec := httptest.NewRecorder()
	n.handler.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Fatalf("readyz before drain: %d %s", rec.Code, rec.Body)
	}
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-entered
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for !n.Draining() {
		if time.Now().After(deadline) {
			t.Fatal("node never started draining")
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec = httptest.NewRecorder()
	n.handler.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "draining") {
		t.Fatalf("readyz while draining: %d %s", rec.Code, rec.Body)
	}
	select {
	case err := <-runErr:
		t.Fatalf("Run returned before the request finished: %v", err)
	default:
	}
	close(release)
	if s := <-got; s != "finished" {
		t.Fatalf("request in progress during drain: %q", s)
	}
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after drain")
	}
	if err := n.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	n, err := NewNode(context.Background(), testConfig(t), quietLog(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	h := n.Handler()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `parley_http_requests_total{method="GET",route="/healthz",status="200"} 1`) {
		t.Fatalf("metrics: %d\n%s", rec.Code, rec.Body)
	}
}

// TestNodeEdges: over-large headers get a problem document, not net/http's plain text, and
// /readyz names this node's last sighting and an empty peer list rather than zero and null.
func TestNodeEdges(t *testing.T) {
	n, err := NewNode(context.Background(), testConfig(t), quietLog(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	base := "http://" + n.Addr().String()
	req, _ := http.NewRequest("GET", base+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", 2<<20))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.NewDecoder(res.Body).Decode(&doc)
	res.Body.Close()
	if res.StatusCode != 431 || res.Header.Get("Content-Type") != "application/problem+json" || doc["code"] != "request_headers_too_large" {
		t.Fatalf("2 MB header: %d %s %v", res.StatusCode, res.Header.Get("Content-Type"), doc)
	}
	res, err = http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Node struct {
			LastSeen time.Time `json:"last_seen"`
		} `json:"node"`
		Peers []any `json:"peers"`
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	json.Unmarshal(raw, &ready)
	if ready.Node.LastSeen.IsZero() || ready.Peers == nil || !strings.Contains(string(raw), `"peers":[]`) {
		t.Fatalf("readyz: %s", raw)
	}
}

// TestFirstStartCredit: on the embedded default the first start gives the organization it
// creates PARLEY_STARTING_CREDIT, so the README's first call does not answer 402, and says so.
func TestFirstStartCredit(t *testing.T) {
	var out bytes.Buffer
	n, err := NewNode(context.Background(), testConfig(t), quietLog(), &out)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	orgs, err := n.Store.ListOrgs(context.Background())
	if err != nil || len(orgs) != 1 {
		t.Fatalf("orgs %v, %v", orgs, err)
	}
	if orgs[0].CreditMicros != 10_000_000 || !strings.Contains(out.String(), "credit        10.00 USD") {
		t.Fatalf("starting credit %d; printed:\n%s", orgs[0].CreditMicros, out.String())
	}
	// The bootstrap is in the audit log, without the keys' secrets.
	events, err := n.Store.ListAudit(context.Background(), store.AuditFilter{OrgID: orgs[0].ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]int{}
	for _, e := range events {
		actions[e.Action]++
		for _, secret := range regexp.MustCompile(`sk_(live|test)_[A-Za-z0-9]{20,}`).FindAllString(out.String(), -1) {
			if strings.Contains(string(e.Data), secret) {
				t.Fatalf("an audit event carries a key's secret: %s", e.Data)
			}
		}
	}
	if actions["organization.created"] != 1 || actions["project.created"] != 1 || actions["api_key.created"] != 2 {
		t.Fatalf("bootstrap audit events %v", actions)
	}
}
