// Package mcptest runs the MCP peers Parley's tests use: the reference server
// @modelcontextprotocol/server-everything in Streamable HTTP mode, run by Node from
// scripts/mcp-peers (npm ci --prefix scripts/mcp-peers). For tests only.
package mcptest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// PeersDir returns scripts/mcp-peers of the repository, or skips (fails with
// PARLEY_REQUIRE_PEERS=1) when its npm packages are not installed.
func PeersDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("mcptest: no go.mod above the test")
		}
		dir = parent
	}
	peers := filepath.Join(dir, "scripts", "mcp-peers")
	if _, err := os.Stat(filepath.Join(peers, "node_modules", "@modelcontextprotocol", "server-everything")); err != nil {
		testenv.Missing(t, "@modelcontextprotocol/server-everything (run: npm ci --prefix scripts/mcp-peers)")
	}
	return peers
}

// Everything starts @modelcontextprotocol/server-everything in Streamable HTTP mode on a free
// loopback port and returns its MCP endpoint (http://127.0.0.1:PORT/mcp). It is stopped when t ends.
func Everything(t testing.TB) string {
	t.Helper()
	peers := PeersDir(t)
	node := testenv.NeedCommand(t, "node")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, filepath.Join(peers, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen: %s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url
}
