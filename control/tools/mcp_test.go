package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/tools/mcptest"
	"github.com/parley-voice/parley/internal/netguard"
)

// TestMCPEverything: Parley's MCP client discovers the tools of the reference server
// (@modelcontextprotocol/server-everything, run by Node in Streamable HTTP mode) with the
// negotiated protocol version, and calls echo and get-sum on a warm session.
func TestMCPEverything(t *testing.T) {
	url := mcptest.Everything(t)
	m := &MCP{Guard: netguard.MustNew(netguard.Options{AllowPrivate: true})}
	defer m.Close()
	ctx := context.Background()
	d := m.Discover(ctx, url, 10*time.Second, nil)
	if d.LastError != "" {
		t.Fatalf("discover: %s", d.LastError)
	}
	var ts []apptools.DiscoveredTool
	if err := json.Unmarshal(d.Tools, &ts); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, x := range ts {
		names[x.Name] = true
	}
	t.Logf("protocol %s, %d tools: %v", d.ProtocolVersion, len(ts), names)
	if !names["echo"] || d.ProtocolVersion == "" {
		t.Fatalf("tools %v, version %q", names, d.ProtocolVersion)
	}
	srv := store.MCPServer{ID: "0190a6f0-0000-7000-8000-0000000000e1", UpdatedAt: time.Now()}
	spec := apptools.ServerSpec{URL: url, TimeoutMS: 10000}
	out, err := m.Call(ctx, srv, spec, nil, "echo", json.RawMessage(`{"message":"hello parley"}`))
	if err != nil || !strings.Contains(out, "hello parley") {
		t.Fatalf("echo: %q %v", out, err)
	}
	for _, tool := range []string{"get-sum", "add"} {
		if names[tool] {
			out, err := m.Call(ctx, srv, spec, nil, tool, json.RawMessage(`{"a":2,"b":40}`))
			if err != nil || !strings.Contains(out, "42") {
				t.Fatalf("%s: %q %v", tool, out, err)
			}
		}
	}
	// An unknown tool is the server's error, not a broken session.
	if _, err := m.Call(ctx, srv, spec, nil, "no-such-tool", nil); err == nil {
		t.Fatal("an unknown tool answered")
	}
	if out, err := m.Call(ctx, srv, spec, nil, "echo", json.RawMessage(`{"message":"again"}`)); err != nil || !strings.Contains(out, "again") {
		t.Fatalf("echo after an error: %q %v", out, err)
	}
}
