package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/tools/mcptest"
	"github.com/parley-voice/parley/internal/netguard"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestMain lets this test binary act as the MCP client the conformance suite drives
// (TestMCPConformance): with PARLEY_MCP_CONFORMANCE_CLIENT=1 it discovers the tools of the URL
// given last and calls each one, as a conversation would, then exits.
func TestMain(m *testing.M) {
	if os.Getenv("PARLEY_MCP_CONFORMANCE_CLIENT") == "1" {
		os.Exit(conformanceClient(os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

func conformanceClient(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &MCP{Guard: netguard.MustNew(netguard.Options{AllowPrivate: true})}
	defer c.Close()
	d := c.Discover(ctx, url, 10*time.Second, nil)
	if d.LastError != "" {
		fmt.Fprintln(os.Stderr, "discover:", d.LastError)
		return 1
	}
	var ts []apptools.DiscoveredTool
	json.Unmarshal(d.Tools, &ts)
	srv := store.MCPServer{ID: "0190a6f0-0000-7000-8000-0000000000c1", UpdatedAt: time.Now()}
	spec := apptools.ServerSpec{URL: url, TimeoutMS: 10000}
	for _, t := range ts {
		out, err := c.Call(ctx, srv, spec, nil, t.Name, sampleArgs(t.InputSchema))
		fmt.Fprintf(os.Stderr, "call %s: %q %v\n", t.Name, clip(out, 200), err)
	}
	return 0
}

// sampleArgs makes arguments that fit a simple object schema: numbers, strings and booleans.
func sampleArgs(schema json.RawMessage) json.RawMessage {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	json.Unmarshal(schema, &s)
	args := map[string]any{}
	i := 2
	for k, p := range s.Properties {
		switch p.Type {
		case "number", "integer":
			args[k] = i
			i++
		case "boolean":
			args[k] = true
		default:
			args[k] = "parley"
		}
	}
	b, _ := json.Marshal(args)
	return b
}

// TestMCPConformance runs @modelcontextprotocol/conformance's client scenarios that apply to
// Parley's client (it initializes, lists and calls tools over Streamable HTTP; it does no OAuth,
// elicitation or sampling): initialize, tools_call and sse-retry.
func TestMCPConformance(t *testing.T) {
	peers := mcptest.PeersDir(t)
	node := testenv.NeedCommand(t, "node")
	cli := filepath.Join(peers, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(cli); err != nil {
		testenv.Missing(t, "@modelcontextprotocol/conformance (npm ci --prefix scripts/mcp-peers)")
	}
	for _, sc := range []string{"initialize", "tools_call", "sse-retry"} {
		t.Run(sc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, cli, "client", "--command", os.Args[0], "--scenario", sc, "--timeout", "30000", "-o", t.TempDir())
			cmd.Env = append(os.Environ(), "PARLEY_MCP_CONFORMANCE_CLIENT=1")
			out, err := cmd.CombinedOutput()
			text := string(out)
			t.Logf("%s", lastLines(text, 12))
			if err != nil || strings.Contains(text, "FAILURE") {
				t.Fatalf("scenario %s: %v", sc, err)
			}
		})
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
