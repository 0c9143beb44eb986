package main

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

// TestEvaluationRunSurvivesSIGKILL (issue 18): `parley serve` is killed with SIGKILL while an
// evaluation run is rehearsing; started again on the same data, it finishes the run (the job's
// lease runs out and the worker claims it again), with every saved conversation judged.
func TestEvaluationRunSurvivesSIGKILL(t *testing.T) {
	script := fakes.NewScript()
	script.SetFallback(func(last string) fakes.ScriptTurn {
		if strings.HasPrefix(last, "You judge a rehearsal") {
			return fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "record_verdict",
				Args: []byte(`{"success":{"met":true,"rationale":"It answered."},"must_not":[]}`)}}}
		}
		return fakes.ScriptTurn{Text: "You said: " + last}
	})
	fk := fakes.NewServer(fakes.ServerOptions{Script: script, LLMFirstToken: 40 * time.Millisecond})
	fsrv := httptest.NewServer(fk)
	t.Cleanup(fsrv.Close)
	t.Cleanup(fk.Close)

	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_FAKES_URL=" + fsrv.URL}
	s := startServer(t, env)
	m := keyRe.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("no keys printed:\n%s", s.stdout)
	}
	live := m[1]
	me := s.must(t, 200, "GET", "/v1/me", live, nil, nil)
	org := me["organization"].(map[string]any)["id"].(string)
	project := s.must(t, 200, "GET", "/v1/projects", live, nil, nil)["data"].([]any)[0].(map[string]any)["id"].(string)
	if _, errOut, code := runCLI(t, env, "admin", "credit", "add", "--org", org, "--amount", "10"); code != 0 {
		t.Fatalf("credit: %s", errOut)
	}
	def := map[string]any{"format": "service.agent/1", "agent": map[string]any{
		"name": "Orders", "kind": "faq", "direction": "inbound", "channels": []any{"chat"},
		"system_prompt": "You answer questions about orders.", "first_message": "Hello, orders desk."}}
	agent := s.must(t, 201, "POST", "/v1/agents", live, map[string]any{"project_id": project, "definition": def}, nil)["id"].(string)
	turns := make([]any, 10)
	for i := range turns {
		turns[i] = map[string]any{"text": fmt.Sprintf("Question %d about my order", i+1)}
	}
	const saved = 24
	for range saved {
		s.must(t, 201, "POST", "/v1/agents/"+agent+"/evaluations", live, map[string]any{"turns": turns,
			"criteria": map[string]any{"success": "The agent answers every question."}}, nil)
	}
	run := s.must(t, 202, "POST", "/v1/agents/"+agent+"/evaluation-runs", live, nil, nil)["id"].(string)
	waitUntil(t, "the run running", func() bool {
		return s.must(t, 200, "GET", "/v1/evaluation-runs/"+run, live, nil, nil)["status"] == "running"
	})
	time.Sleep(500 * time.Millisecond) // mid-run: 24 × 11 LLM requests of 40 ms, 4 at once, take about 3 s
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done // Wait has set ProcessState: startServer's cleanup leaves it alone

	s2 := startServer(t, env)
	if got := s2.must(t, 200, "GET", "/v1/evaluation-runs/"+run, live, nil, nil)["status"]; got != "running" {
		t.Fatalf("after SIGKILL the run is %v, want running until it is claimed again", got)
	}
	var r map[string]any
	deadline := time.Now().Add(90 * time.Second) // the dead node's lease (30 s) runs out first
	for {
		r = s2.must(t, 200, "GET", "/v1/evaluation-runs/"+run, live, nil, nil)
		if st := r["status"]; st == "finished" || st == "failed" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	tot, _ := r["totals"].(map[string]any)
	if r["status"] != "finished" || tot["evaluations"] != float64(saved) || tot["passed"] != float64(saved) {
		t.Fatalf("after the restart: status %v totals %v reason %v", r["status"], tot, r["reason"])
	}
}
