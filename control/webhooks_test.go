package control

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/api"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/store"
)

// TestNodeDeliversWebhooks: a node composed as serve makes it (the API with the master key and
// the SSRF guard, the delivery worker woken on commit) delivers a receiver's test event to a
// local HTTPS receiver trusted through the extra-CA setting, with loopback allowed.
func TestNodeDeliversWebhooks(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.TLS.Certificates[0].Certificate[0]}), 0o600)
	cfg, _, err := config.Parse("test", config.ScopeServe, []string{"--http-addr", "127.0.0.1:0", "--sip-addr", "127.0.0.1:0", "--webrtc-udp-port", "0",
		"--data-dir", t.TempDir(), "--drain-timeout", "5s", "--outbound-allow-private", "--outbound-ca-file", ca, "--webhook-retry-schedule", "50ms"},
		func(string) string { return "" }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNode(context.Background(), cfg, quietLog(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	orgs, _ := n.Store.ListOrgs(context.Background())
	projects, _ := n.Store.ListProjects(context.Background(), orgs[0].ID)
	_, key, err := n.Store.CreateKey(context.Background(), store.NewKey{OrgID: orgs[0].ID, Name: "hooks", Scopes: api.Scopes, AllProjects: true})
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path string, body any) map[string]any {
		t.Helper()
		var b []byte
		if body != nil {
			b, _ = json.Marshal(body)
		}
		r := httptest.NewRequest(method, path, bytes.NewReader(b))
		r.Header.Set("Authorization", "Bearer "+key)
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		n.Handler().ServeHTTP(rec, r)
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		if rec.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return m
	}
	rc := call("POST", "/v1/webhooks", map[string]any{"project_id": projects[0].ID, "url": srv.URL + "/hook"})
	d := call("POST", "/v1/webhooks/"+rc["id"].(string)+"/test", nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		l := call("GET", "/v1/webhooks/"+rc["id"].(string)+"/deliveries?status=delivered", nil)
		if len(l["data"].([]any)) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test event was not delivered: %v", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Get("webhook-id") != d["id"] || got[0].Get("webhook-signature") == "" {
		t.Fatalf("the receiver got %v", got)
	}
}
