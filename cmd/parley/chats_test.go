package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session/fakes"
)

// TestChatSurvivesSIGTERM is issue 13 item 2 on the real binary: SIGTERM to `parley serve`
// with a chat open leaves the chat in progress, and after the restart its next message is
// answered with the whole conversation (the LLM, a local fake speaking OpenAI's protocol, is
// asked with every earlier turn).
func TestChatSurvivesSIGTERM(t *testing.T) {
	fk := fakes.NewServer(fakes.ServerOptions{})
	llm := httptest.NewServer(fk)
	defer llm.Close()
	defer fk.Close()
	env := []string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_FAKES_URL=" + llm.URL}
	s := startServer(t, env)
	m := keyRe.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("first start printed no keys:\n%s", s.stdout)
	}
	live := m[1]
	projects := s.must(t, 200, "GET", "/v1/projects", live, nil, nil)
	projectID := projects["data"].([]any)[0].(map[string]any)["id"].(string)
	def := map[string]any{"format": "service.agent/1", "references": map[string]any{}, "agent": map[string]any{
		"name": "Concierge", "kind": "custom", "direction": "inbound", "channels": []any{"chat"},
		"system_prompt": "You help {{customer}}.", "first_message": "Hello {{customer}}, how can I help?"}}
	agent := s.must(t, 201, "POST", "/v1/agents", live, map[string]any{"project_id": projectID, "definition": def}, nil)
	agentID := agent["id"].(string)
	s.must(t, 201, "POST", "/v1/agents/"+agentID+"/publish", live, nil, nil)
	chat := s.must(t, 201, "POST", "/v1/chats", live, map[string]any{"agent_id": agentID, "variables": map[string]any{"customer": "Ada"}}, nil)
	id := chat["id"].(string)
	send := func(s *server, text string) map[string]any {
		t.Helper()
		turn := s.must(t, 200, "POST", "/v1/conversations/"+id+"/messages", live, map[string]any{"message": text}, nil)
		if got := turn["agent"].(map[string]any)["text"]; got != "You said: "+text {
			t.Fatalf("reply %v", got)
		}
		return turn
	}
	send(s, "My name is Ada.")
	send(s, "I would like tea.")

	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}

	s2 := startServer(t, env)
	if c := s2.must(t, 200, "GET", "/v1/conversations/"+id, live, nil, nil); c["status"] != "in_progress" || c["end_reason"] != nil {
		t.Fatalf("after SIGTERM and a restart the chat is %v (%v)", c["status"], c["end_reason"])
	}
	turn := send(s2, "What would I like?")
	if seq := turn["user"].(map[string]any)["seq"]; seq != float64(6) {
		t.Fatalf("the message after the restart has seq %v, want 6", seq)
	}
	reqs := fk.Chat.Requests()
	var got []string
	for _, m := range reqs[len(reqs)-1].Body["messages"].([]any) {
		mm := m.(map[string]any)
		got = append(got, fmt.Sprintf("%s: %v", mm["role"], mm["content"]))
	}
	want := []string{"system: You help Ada.", "assistant: Hello Ada, how can I help?", "user: My name is Ada.", "assistant: You said: My name is Ada.",
		"user: I would like tea.", "assistant: You said: I would like tea.", "user: What would I like?"}
	if !slices.Equal(got, want) {
		t.Fatalf("after the restart the LLM was asked\n%q\nwant\n%q", got, want)
	}
	tr := s2.must(t, 200, "GET", "/v1/conversations/"+id+"/transcript", live, nil, nil)
	var lines []string
	for _, l := range tr["lines"].([]any) {
		lm := l.(map[string]any)
		lines = append(lines, fmt.Sprintf("%s: %s", lm["role"], lm["text"]))
	}
	if len(lines) != 7 || !strings.HasPrefix(lines[0], "agent: Hello Ada") || lines[6] != "agent: You said: What would I like?" {
		t.Fatalf("transcript %q", lines)
	}
	if !strings.Contains(s.stderr.String(), "draining") {
		t.Fatalf("no drain logged:\n%s", s.stderr)
	}
}

// TestChatNodeKilled runs two api nodes on PostgreSQL and Redis. A chat is started and talked
// to on node A, A is killed (SIGKILL: nothing is given up or stored on the way out), and node
// B answers the next message with the chat's whole history.
func TestChatNodeKilled(t *testing.T) {
	pg := pgSchemaURL(t)
	redisURL := testenv.RedisURL(t)
	fk := fakes.NewServer(fakes.ServerOptions{})
	llm := httptest.NewServer(fk)
	defer llm.Close()
	defer fk.Close()
	env := []string{"PARLEY_DATABASE_URL=" + pg, "PARLEY_REDIS_URL=" + redisURL, "PARLEY_MASTER_KEY=" + strings.Repeat("ef", 32), "PARLEY_FAKES_URL=" + llm.URL}
	out, errOut, code := runCLI(t, append(env, "PARLEY_DATA_DIR="+t.TempDir()), "admin", "bootstrap", "--json")
	if code != 0 {
		t.Fatalf("bootstrap: %s", errOut)
	}
	var boot map[string]string
	if err := json.Unmarshal([]byte(out), &boot); err != nil {
		t.Fatalf("bootstrap JSON: %v %q", err, out)
	}
	if _, errOut, code := runCLI(t, append(env, "PARLEY_DATA_DIR="+t.TempDir()), "admin", "credit", "add", "--org", boot["organization_id"], "--amount", "5"); code != 0 {
		t.Fatalf("credit add: %s", errOut)
	}
	suffix := boot["project_id"][:8]
	a := startServer(t, append(env, "PARLEY_DATA_DIR="+t.TempDir(), "PARLEY_NODE_ID=chat-a-"+suffix), "--roles", "api,worker")
	b := startServer(t, append(env, "PARLEY_DATA_DIR="+t.TempDir(), "PARLEY_NODE_ID=chat-b-"+suffix), "--roles", "api,worker")
	live := boot["live_key"]
	def := map[string]any{"format": "service.agent/1", "references": map[string]any{}, "agent": map[string]any{
		"name": "Concierge", "kind": "custom", "direction": "inbound", "channels": []any{"chat"},
		"system_prompt": "You help {{customer}}.", "first_message": "Hello {{customer}}."}}
	agent := a.must(t, 201, "POST", "/v1/agents", live, map[string]any{"project_id": boot["project_id"], "definition": def}, nil)
	a.must(t, 201, "POST", "/v1/agents/"+agent["id"].(string)+"/publish", live, nil, nil)
	chat := a.must(t, 201, "POST", "/v1/chats", live, map[string]any{"agent_id": agent["id"], "variables": map[string]any{"customer": "Bo"}}, nil)
	id := chat["id"].(string)
	turn := a.must(t, 200, "POST", "/v1/conversations/"+id+"/messages", live, map[string]any{"message": "Remember the number 42."}, nil)
	if turn["agent"].(map[string]any)["text"] != "You said: Remember the number 42." {
		t.Fatalf("turn on A: %v", turn)
	}
	a.cmd.Process.Kill()
	<-a.done
	turn = b.must(t, 200, "POST", "/v1/conversations/"+id+"/messages", live, map[string]any{"message": "Which number?"}, nil)
	if turn["agent"].(map[string]any)["text"] != "You said: Which number?" || turn["user"].(map[string]any)["seq"] != float64(4) {
		t.Fatalf("turn on B: %v", turn)
	}
	if c := b.must(t, 200, "GET", "/v1/conversations/"+id, live, nil, nil); c["status"] != "in_progress" {
		t.Fatalf("the chat after its node was killed: %v", c)
	}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var owner string
	if err := db.QueryRow("SELECT owner_node FROM conversations WHERE id = $1", id).Scan(&owner); err != nil || owner != "chat-b-"+suffix {
		t.Fatalf("the last message ran on %q (%v), want node B", owner, err)
	}
	reqs := fk.Chat.Requests()
	var got []string
	for _, m := range reqs[len(reqs)-1].Body["messages"].([]any) {
		mm := m.(map[string]any)
		got = append(got, fmt.Sprintf("%s: %v", mm["role"], mm["content"]))
	}
	want := []string{"system: You help Bo.", "assistant: Hello Bo.", "user: Remember the number 42.", "assistant: You said: Remember the number 42.", "user: Which number?"}
	if !slices.Equal(got, want) {
		t.Fatalf("node B asked the LLM\n%q\nwant\n%q", got, want)
	}
}
