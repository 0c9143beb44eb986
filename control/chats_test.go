package control

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/config"
)

// TestChatIdleEndsAfterNodeRestart is issue 13 item 2 through the composition root: a chat
// opened on a node is left in progress when the node drains and stops; the next node on the
// same data directory answers its next message, and its worker's idle job (in the store, not a
// timer of the first node) ends it once the idle limit passes.
func TestChatIdleEndsAfterNodeRestart(t *testing.T) {
	dataDir := t.TempDir()
	cfgWith := func(idle string) *config.Config {
		cfg, _, err := config.Parse("test", config.ScopeServe, []string{"--http-addr", "127.0.0.1:0", "--sip-addr", "127.0.0.1:0", "--webrtc-udp-port", "0",
			"--data-dir", dataDir, "--drain-timeout", "5s", "--chat-idle-timeout", idle}, func(string) string { return "" }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	run := func(cfg *config.Config, out io.Writer) (*Node, func()) {
		n, err := NewNode(context.Background(), cfg, quietLog(), out)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		runErr := make(chan error, 1)
		go func() { runErr <- n.Run(ctx) }()
		return n, func() {
			cancel()
			select {
			case err := <-runErr:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("Run did not return")
			}
		}
	}
	call := func(n *Node, method, path, key string, body any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://"+n.Addr().String()+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if body == nil {
			req.Body, req.ContentLength = nil, 0
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	must := func(n *Node, want int, method, path, key string, body any) map[string]any {
		t.Helper()
		code, out := call(n, method, path, key, body)
		if code != want {
			t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, want)
		}
		return out
	}

	var out bytes.Buffer
	n1, stop1 := run(cfgWith("2s"), &out)
	keys := regexp.MustCompile(`(sk_live_\S+)[\s\S]*?(sk_test_\S+)`).FindStringSubmatch(out.String())
	if keys == nil {
		t.Fatalf("no keys printed: %q", out.String())
	}
	live, test := keys[1], keys[2]
	proj := must(n1, 200, "GET", "/v1/projects", live, nil)["data"].([]any)[0].(map[string]any)["id"]
	agent := must(n1, 201, "POST", "/v1/agents", live, map[string]any{"project_id": proj, "definition": map[string]any{
		"format": "service.agent/1", "references": map[string]any{}, "agent": map[string]any{"name": "Desk", "kind": "custom", "direction": "inbound",
			"channels": []any{"chat"}, "system_prompt": "You help.", "first_message": "Hello."}}})
	must(n1, 201, "POST", "/v1/agents/"+agent["id"].(string)+"/publish", live, nil)
	chat := must(n1, 201, "POST", "/v1/chats", test, map[string]any{"agent_id": agent["id"]})
	id := chat["id"].(string)
	turn := must(n1, 200, "POST", "/v1/conversations/"+id+"/messages", test, map[string]any{"message": "Hi"})
	last, err := time.Parse(time.RFC3339Nano, turn["agent"].(map[string]any)["ended_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	stop1()

	// The next node on the same data directory: its worker ends the chat when its idle limit
	// (2 s after the last message) has passed. Had the first node's stop ended it, its reason
	// would say so.
	n2, stop2 := run(cfgWith("2s"), io.Discard)
	defer stop2()
	var c map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		c = must(n2, 200, "GET", "/v1/conversations/"+id, test, nil)
		if c["status"] == "ended" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle chat never ended: %v", c)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	ended, _ := time.Parse(time.RFC3339Nano, c["ended_at"].(string))
	if c["end_reason"] != "silence_timeout" || ended.Sub(last) < 2*time.Second {
		t.Fatalf("the chat ended %v at %v, its last message at %v; want silence_timeout 2 s after", c["end_reason"], ended, last)
	}
	if code, p := call(n2, "POST", "/v1/conversations/"+id+"/messages", test, map[string]any{"message": "Hello?"}); code != 409 || p["code"] != "conversation_ended" {
		t.Fatalf("a message after the idle end: %d %v", code, p)
	}
}
