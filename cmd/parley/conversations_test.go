package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// call sends a JSON request to a node and decodes the answer.
func (s *server) call(t *testing.T, method, path, key string, body any, header map[string]string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (s *server) must(t *testing.T, want int, method, path, key string, body any, header map[string]string) map[string]any {
	t.Helper()
	code, out := s.call(t, method, path, key, body, header)
	if code != want {
		t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, want)
	}
	return out
}

// TestCallAcrossNodes runs two `parley serve` processes on PostgreSQL and Redis: an api node
// and a media,worker node. A call placed through the api node (with a test key: it rings
// nobody and runs against the simulated callee, in text) runs on the media node; it is steered
// with say and transfer through the api node, whose live transcript long-poll sees every line
// once, in order, as the media node writes them. A scheduled call is dialled by the worker.
func TestCallAcrossNodes(t *testing.T) {
	pg := pgSchemaURL(t)
	redisURL := testenv.RedisURL(t)
	key := strings.Repeat("cd", 32)
	env := []string{"PARLEY_DATABASE_URL=" + pg, "PARLEY_REDIS_URL=" + redisURL, "PARLEY_MASTER_KEY=" + key}
	out, errOut, code := runCLI(t, append(env, "PARLEY_DATA_DIR="+t.TempDir()), "admin", "bootstrap", "--json")
	if code != 0 {
		t.Fatalf("bootstrap: %s", errOut)
	}
	var boot map[string]string
	if err := json.Unmarshal([]byte(out), &boot); err != nil {
		t.Fatalf("bootstrap JSON: %v %q", err, out)
	}
	suffix := boot["project_id"][:8]
	api := startServer(t, append(env, "PARLEY_DATA_DIR="+t.TempDir(), "PARLEY_NODE_ID=api-"+suffix), "--roles", "api")
	media := startServer(t, append(env, "PARLEY_DATA_DIR="+t.TempDir(), "PARLEY_NODE_ID=media-"+suffix), "--roles", "media,worker")
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := api.get(t, "/readyz", "")
		if peers, _ := body["peers"].([]any); len(peers) == 1 && strings.Contains(peers[0].(map[string]any)["roles"].(string), "media") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the api node never heard the media node: %v", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	live, test := boot["live_key"], boot["test_key"]
	def := map[string]any{"format": "service.agent/1", "references": map[string]any{}, "agent": map[string]any{
		"name": "Reminder", "kind": "custom", "direction": "outbound", "channels": []any{"phone", "chat"},
		"system_prompt": "You remind {{customer}} of the appointment.", "first_message": "Hello {{customer}}, this is your reminder."}}
	agent := api.must(t, 201, "POST", "/v1/agents", live, map[string]any{"project_id": boot["project_id"], "definition": def}, nil)
	agentID := agent["id"].(string)
	api.must(t, 201, "POST", "/v1/agents/"+agentID+"/publish", live, nil, nil)
	if _, errOut, code := runCLI(t, append(env, "PARLEY_DATA_DIR="+t.TempDir()), "admin", "numbers", "add", "--project", boot["project_id"],
		"--number", "+14155550001", "--agent", agentID); code != 0 {
		t.Fatalf("numbers add: %s", errOut)
	}

	// Place the call through the api node.
	call := api.must(t, 201, "POST", "/v1/calls", test, map[string]any{"agent_id": agentID, "to_number": "+14155550100",
		"variables": map[string]any{"customer": "Ada"}}, map[string]string{"Idempotency-Key": "two-nodes"})
	id := call["id"].(string)
	conv := func() map[string]any { return api.must(t, 200, "GET", "/v1/conversations/"+id, test, nil, nil) }
	waitUntil(t, "the call in progress", func() bool { return conv()["status"] == "in_progress" })
	say := api.must(t, 202, "POST", "/v1/conversations/"+id+"/say", test, map[string]any{"text": "Your appointment is at ten."}, nil)
	waitUntil(t, "the say done", func() bool {
		c := api.must(t, 200, "GET", "/v1/conversations/"+id+"/commands/"+say["id"].(string), test, nil, nil)
		if c["status"] == "failed" {
			t.Fatalf("say failed: %v", c)
		}
		return c["status"] == "done"
	})
	// The live transcript, read from the api node while the media node writes it; once the
	// callee has spoken and been answered, the call is transferred.
	var lines []string
	after := 0
	transferred := false
	for ended := false; !ended; {
		if !transferred && strings.Contains(strings.Join(lines, "\n"), "agent: You said: Hello?") {
			api.must(t, 202, "POST", "/v1/conversations/"+id+"/transfer", test, map[string]any{"destination": "+14155550123"}, nil)
			transferred = true
		}
		r := api.must(t, 200, "GET", fmt.Sprintf("/v1/conversations/%s/live?after=%d&wait=10", id, after), test, nil, nil)
		for _, l := range r["lines"].([]any) {
			m := l.(map[string]any)
			if seq := int(m["seq"].(float64)); seq != len(lines)+1 {
				t.Fatalf("line seq %d after %d lines", seq, len(lines))
			}
			lines = append(lines, fmt.Sprintf("%s: %s", m["role"], m["text"]))
		}
		after, ended = int(r["next_after"].(float64)), r["ended"] == true
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"agent: Hello Ada, this is your reminder.", "user: Hello?", "agent: You said: Hello?", "agent: Your appointment is at ten."} {
		if !strings.Contains(all, want) {
			t.Fatalf("the live transcript lacks %q:\n%s", want, all)
		}
	}
	if c := conv(); !transferred || c["end_reason"] != "transferred" {
		t.Fatalf("the call ended %v", c["end_reason"])
	}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var owner string
	if err := db.QueryRow("SELECT owner_node FROM conversations WHERE id = $1", id).Scan(&owner); err != nil || owner != "media-"+suffix {
		t.Fatalf("the call ran on %q (%v), want the media node", owner, err)
	}

	// A scheduled call: the worker on the media node dials it.
	sc := api.must(t, 201, "POST", "/v1/scheduled-calls", test, map[string]any{"agent_id": agentID, "to_number": "+14155550101",
		"variables": map[string]any{"customer": "Bo"}}, map[string]string{"Idempotency-Key": "scheduled"})
	waitUntil(t, "the scheduled call placed", func() bool {
		return api.must(t, 200, "GET", "/v1/scheduled-calls/"+sc["id"].(string), test, nil, nil)["status"] == "placed"
	})

	// A chat runs on the api node itself.
	chat := api.must(t, 201, "POST", "/v1/chats", test, map[string]any{"agent_id": agentID, "variables": map[string]any{"customer": "Cy"}}, nil)
	turn := api.must(t, 200, "POST", "/v1/conversations/"+chat["id"].(string)+"/messages", test, map[string]any{"message": "Thanks!"}, nil)
	if turn["agent"].(map[string]any)["text"] != "You said: Thanks!" {
		t.Fatalf("chat turn %v", turn)
	}
	_ = media
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
