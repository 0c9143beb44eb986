package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// TestMCPRefresh: a server's stored tool list is refreshed when a warm session hears
// notifications/tools/list_changed, and by the refresher once its ttl has passed; a refresh
// that fails keeps the last good list and says why in last_error.
func TestMCPRefresh(t *testing.T) {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1"}, nil)
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	server.AddTool(&mcp.Tool{Name: "first", InputSchema: json.RawMessage(`{"type":"object"}`)}, noop)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(h)
	stop := func() { srv.CloseClientConnections(); srv.Close() } // the warm session's SSE stream stays open
	defer stop()

	st, err := store.Open(ctx, store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	org, _ := st.CreateOrg(ctx, "Acme")
	p, _ := st.CreateProject(ctx, org.ID, "One")
	m := &MCP{Guard: netguard.MustNew(netguard.Options{AllowPrivate: true})}
	defer m.Close()
	src := &Source{Store: st, MCP: m, Guard: m.Guard}
	defer src.Close()
	refreshed := make(chan struct{}, 4)
	m.OnListChanged = func(id store.MCPServerID) {
		if err := src.Refresh(ctx, id); err != nil {
			t.Errorf("refresh: %v", err)
		}
		refreshed <- struct{}{}
	}
	spec := apptools.ServerSpec{URL: srv.URL, TimeoutMS: 5000, TTLMS: 60000}
	raw, _ := json.Marshal(spec)
	row, err := st.MCPServers().Create(ctx, store.OrgScope(org.ID), store.ToolWrite{ProjectID: p.ID, Name: "changing", Spec: raw},
		m.Discover(ctx, srv.URL, 5*time.Second, nil))
	if err != nil {
		t.Fatal(err)
	}
	names := func() string {
		got, _ := st.MCPServersByID(ctx, row.ID)
		_, ts, _ := apptools.ParseServerSpec(got)
		var n []string
		for _, x := range ts {
			n = append(n, x.Name)
		}
		return strings.Join(n, ",") + "|" + got.LastError
	}
	if got := names(); got != "first|" {
		t.Fatalf("discovered %q", got)
	}
	// A warm session (a call opens it) hears the server's tools/list_changed.
	if _, err := m.Call(ctx, row, spec, nil, "first", nil); err != nil {
		t.Fatal(err)
	}
	server.AddTool(&mcp.Tool{Name: "second", InputSchema: json.RawMessage(`{"type":"object"}`)}, noop)
	select {
	case <-refreshed:
	case <-time.After(10 * time.Second):
		t.Fatal("no refresh on tools/list_changed")
	}
	if got := names(); got != "first,second|" {
		t.Fatalf("after list_changed: %q", got)
	}
	// The ttl: a list refreshed long ago is fetched again by the refresher; a server that went
	// away keeps its last list, with the reason.
	old := time.Now().Add(-2 * time.Hour)
	cur, _ := st.MCPServersByID(ctx, row.ID)
	if err := st.SetDiscovery(ctx, row.ID, cur.UpdatedAt, store.Discovery{Tools: cur.Discovered, ProtocolVersion: cur.ProtocolVersion, At: old}); err != nil {
		t.Fatal(err)
	}
	m.Close() // the warm session goes; the server too
	stop()
	src.refreshDue(ctx)
	got := names()
	if !strings.HasPrefix(got, "first,second|connect:") {
		t.Fatalf("after the ttl with the server gone: %q", got)
	}
	if after, _ := st.MCPServersByID(ctx, row.ID); after.RefreshedAt == nil || after.RefreshedAt.Before(time.Now().Add(-time.Minute)) {
		t.Fatalf("refreshed_at %v", after.RefreshedAt)
	}
}

// TestMCPCallListsNothing: calls inside turns go over the warm session and never ask the server
// for its tool list (only saving, a ttl refresh or tools/list_changed do).
func TestMCPCallListsNothing(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "counting", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var mu sync.Mutex
	methods := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			var msg struct {
				Method string `json:"method"`
			}
			json.Unmarshal(b, &msg)
			mu.Lock()
			methods[msg.Method]++
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	}))
	defer func() { srv.CloseClientConnections(); srv.Close() }()
	m := &MCP{Guard: netguard.MustNew(netguard.Options{AllowPrivate: true})}
	defer m.Close()
	ctx := context.Background()
	if d := m.Discover(ctx, srv.URL, 5*time.Second, nil); d.LastError != "" {
		t.Fatal(d.LastError)
	}
	row := store.MCPServer{ID: "0190a6f0-0000-7000-8000-0000000000d1", UpdatedAt: time.Now()}
	spec := apptools.ServerSpec{URL: srv.URL, TimeoutMS: 5000}
	for range 5 {
		if _, err := m.Call(ctx, row, spec, nil, "noop", nil); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if methods["tools/list"] != 1 || methods["tools/call"] != 5 || methods["initialize"] != 2 {
		t.Fatalf("methods the server saw: %v (want one tools/list at discovery, two initializes: discovery and the warm session)", methods)
	}
}
