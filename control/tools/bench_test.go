package tools

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// benchRunner is a runner with one HTTP tool (URL and body templates, a header secret) whose
// records go to a store on a temporary SQLite file.
func benchRunner(b *testing.B, url string, client *http.Client) (*Runner, *Source) {
	st, err := store.Open(context.Background(), store.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	org, _ := st.CreateOrg(context.Background(), "Bench")
	p, _ := st.CreateProject(context.Background(), org.ID, "One")
	ag, err := st.Agents().Create(context.Background(), store.OrgScope(org.ID), store.NewAgent{ProjectID: p.ID, Name: "A", Kind: "custom", Direction: "inbound",
		Channels: []string{"chat"}, Definition: json.RawMessage(`{"agent":{"name":"A"},"references":{}}`)})
	if err != nil {
		b.Fatal(err)
	}
	conv, err := st.CreateConversation(context.Background(), store.Conversation{OrgID: org.ID, ProjectID: p.ID, AgentID: ag.ID,
		Channel: store.ChannelChat, Direction: "inbound", Mode: store.ModeLive, Language: "en"})
	if err != nil {
		b.Fatal(err)
	}
	src := &Source{Store: st, Guard: netguard.MustNew(netguard.Options{AllowPrivate: true})}
	b.Cleanup(src.Close)
	if client != nil {
		clientOnce.Store(src.Guard, client)
	}
	sp := apptools.Spec{Request: apptools.ToolRequest{Method: "POST", URL: url + "/orders/{{order_id}}?c={{customer}}",
		Headers: map[string]string{"X-Trace": "{{order_id}}"}, Body: json.RawMessage(`{"id":"{{order_id}}","who":"{{vars.customer}}","n":"{{n}}"}`)},
		ResultMode: "llm", TimeoutMS: 8000}
	h, err := compileHTTP(sp)
	if err != nil {
		b.Fatal(err)
	}
	cred := vault.Credential{Type: store.SecretHeader, HeaderName: "X-Api-Key"}.WithValue("k-123456")
	e := &entry{kind: "http", name: "lookup", http: h, secret: "x", timeout: 8 * time.Second, testSafe: true}
	e.credOnce.Do(func() { e.cred = &cred })
	r := &Runner{src: src, conv: conv, vars: map[string]any{"customer": "Ada Lovelace"}, byName: map[string]*entry{"lookup": e}}
	return r, src
}

// BenchmarkHTTPToolOverhead is Parley's own part of an HTTP tool call, with no network: the URL,
// header and body templates, the vault header, the guarded client's request handling up to the
// transport, the response checks and the record (queued to the store). The transport answers
// at once from memory.
func BenchmarkHTTPToolOverhead(b *testing.B) {
	client := &http.Client{Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"status":"shipped"}`)), Request: r}, nil
	})}
	r, _ := benchRunner(b, "http://tools.example", client)
	args := json.RawMessage(`{"order_id":"A-1234","n":7}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Call(ctx, "lookup", args); err != nil {
			b.Fatal(err)
		}
	}
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkHTTPToolLocal is a whole call against a local server that answers at once, through
// the guarded client over loopback TCP (kept-alive connections); it reports the p50 and p99 of
// the call time, which bounds Parley's overhead from above (the server's time is nearly nil).
func BenchmarkHTTPToolLocal(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"shipped"}`))
	}))
	defer srv.Close()
	r, _ := benchRunner(b, srv.URL, nil)
	args := json.RawMessage(`{"order_id":"A-1234","n":7}`)
	ctx := context.Background()
	var lat []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := r.Call(ctx, "lookup", args); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkMCPWarmCall is a call of a tool that does nothing, on a warm session to an MCP server
// of the Go SDK on loopback; it reports p50 and p99 of the call and of the server's own time
// (from the request reaching its handler to the answer written).
func BenchmarkMCPWarmCall(b *testing.B) {
	server := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var srvTimes []time.Duration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		h.ServeHTTP(w, r)
		if r.Method == http.MethodPost {
			srvTimes = append(srvTimes, time.Since(t0))
		}
	}))
	defer srv.Close()
	m := &MCP{Guard: netguard.MustNew(netguard.Options{AllowPrivate: true})}
	defer m.Close()
	s := store.MCPServer{ID: "0190a6f0-0000-7000-8000-0000000000b1", UpdatedAt: time.Now()}
	spec := apptools.ServerSpec{URL: srv.URL, TimeoutMS: 8000}
	ctx := context.Background()
	if _, err := m.Call(ctx, s, spec, nil, "noop", nil); err != nil { // warm up: the session opens
		b.Fatal(err)
	}
	srvTimes = srvTimes[:0]
	var lat []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := m.Call(ctx, s, spec, nil, "noop", nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
	if len(srvTimes) > 0 {
		slices.Sort(srvTimes)
		b.ReportMetric(float64(srvTimes[len(srvTimes)*99/100].Microseconds()), "server-p99-µs")
	}
}
