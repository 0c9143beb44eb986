package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/evaluations"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/tools"
	"github.com/parley-voice/parley/session/fakes"
)

// issue 18: saved conversations rehearsed against the agent, judged, queued runs.
var _ = register(scenario{"Evaluations", testEvaluations})

// runEvaluationWorker runs the evaluation jobs of w's store until the returned stop is called
// (or t ends).
func runEvaluationWorker(t *testing.T, w *world) (stop func()) {
	wk := jobs.NewWorker(jobs.Options{Store: w.st, Owner: "evaluations-test", PollInterval: 20 * time.Millisecond})
	wk.Register(store.EvaluationRunKind, func(ctx context.Context, j *jobs.Job) error {
		return w.api.Evaluations.Execute(ctx, j, j.Payload, j.Attempt, j.MaxAttempts)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { wk.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

func waitRun(t *testing.T, w *world, id string) *resp {
	t.Helper()
	var r *resp
	waitFor(t, 30*time.Second, "the evaluation run", func() bool {
		r = w.must(t, http.StatusOK, req{method: "GET", path: "/v1/evaluation-runs/" + id, key: kLive})
		s := r.Str("status")
		return s == "finished" || s == "failed"
	})
	return r
}

// verdictTurn is the judge's answer: the success condition met or not, and one must_not item
// that did not happen (mustNot items: 0 or 1).
func verdictTurn(met bool, mustNot ...int) fakes.ScriptTurn {
	items := []any{map[string]any{"happened": false, "rationale": "No refund was promised."}}
	if len(mustNot) > 0 && mustNot[0] == 0 {
		items = []any{}
	}
	b, _ := json.Marshal(map[string]any{"success": map[string]any{"met": met, "rationale": "The agent said the order shipped."}, "must_not": items})
	return fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "record_verdict", Args: b}}}
}

func testEvaluations(t *testing.T, e engine) {
	st := e.open(t)
	src := &tools.Source{Store: st}
	t.Cleanup(src.Close)
	w := newWorld(t, st, worldOpts{conv: &convOpts{tools: src}})
	w.credit(t, 10)
	w.api.Evaluations.Concurrency = 1 // the fake LLM's script is one queue
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/tools", key: kLive, body: map[string]any{"project_id": string(w.p1.ID), "name": "lookup_order",
		"description": "Look up an order by its id.",
		"parameters":  map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []any{"order_id"}},
		"request":     map[string]any{"method": "GET", "url": "https://orders.example.com/orders/{{order_id}}"}}})
	agent := w.publishedAgent(t, w.p1.ID, "Orders", "inbound", channels("chat"), func(a map[string]any) {
		a["system_prompt"] = "Always look the order up with lookup_order before answering."
	})
	def := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/agents/" + agent + "/definition", key: kLive})
	var defn map[string]any
	_ = json.Unmarshal(def.Body, &defn)
	if d, ok := defn["definition"].(map[string]any); ok {
		defn = d
	}
	defn["references"] = map[string]any{"tools": []any{"lookup_order"}}
	w.must(t, http.StatusOK, req{method: "PUT", path: "/v1/agents/" + agent + "/definition", key: kLive, body: map[string]any{"definition": defn}})
	toolVersion := int(w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents/" + agent + "/publish", key: kLive}).JSON["version"].(float64))
	other := w.publishedAgent(t, w.p1.ID, "Other", "inbound", channels("chat"))

	criteria := map[string]any{"success": "The agent tells the customer that order A-1 has shipped.",
		"expected_tool_calls": []any{map[string]any{"name": "lookup_order", "arguments": map[string]any{"order_id": "A-1"}}},
		"must_not":            []any{"The agent promises a refund."}}
	path := "/v1/agents/" + agent + "/evaluations"
	ev := w.must(t, http.StatusCreated, req{method: "POST", path: path, key: kLive, body: map[string]any{"name": "order shipped",
		"turns": []any{map[string]any{"text": "Where is my order A-1?"}}, "mocks": map[string]any{"lookup_order": []any{map[string]any{"status": "shipped"}}},
		"criteria": criteria, "variables": map[string]any{"customer": "Ada"}}})
	if ev.Str("channel") != "chat" || ev.Str("object") != "evaluation" {
		t.Fatalf("evaluation %s", ev)
	}

	// Bad input: mocks of unknown tools, another agent's conversation, a chat saved for voice.
	w.fails(t, 422, fault.CodeUnknownMockTool, req{method: "POST", path: path, key: kLive, body: map[string]any{
		"turns": []any{map[string]any{"text": "hi"}}, "mocks": map[string]any{"ghost_tool": []any{1}}, "criteria": criteria}}).hasError(t, "/mocks/ghost_tool", fault.CodeUnknownMockTool)
	w.fails(t, 422, fault.CodeEvaluationEmpty, req{method: "POST", path: path, key: kLive, body: map[string]any{"criteria": criteria}})
	chat := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/chats", key: kLive,
		body: map[string]any{"agent_id": other, "variables": map[string]any{"customer": "Ada"}}}).Str("id")
	w.must(t, http.StatusOK, req{method: "POST", path: "/v1/conversations/" + chat + "/messages", key: kLive, body: map[string]any{"message": "Hello"}})
	waitFor(t, 10*time.Second, "the chat's lines stored", func() bool { // the persister writes them behind the engine
		ls, _ := st.AllLines(context.Background(), store.ConversationID(chat))
		return len(ls) >= 3
	})
	w.fails(t, 404, fault.CodeConversationNotFound, req{method: "POST", path: path, key: kLive, body: map[string]any{"conversation_id": chat, "criteria": criteria}})
	w.fails(t, 422, fault.CodeEvaluationChannel, req{method: "POST", path: "/v1/agents/" + other + "/evaluations", key: kLive,
		body: map[string]any{"conversation_id": chat, "channel": "voice", "criteria": criteria}})
	saved := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents/" + other + "/evaluations", key: kLive,
		body: map[string]any{"conversation_id": chat, "criteria": criteria}})
	if saved.JSON["turns"].([]any)[0].(map[string]any)["text"] != "Hello" {
		t.Fatalf("saved from a conversation: %s", saved)
	}
	w.must(t, http.StatusOK, req{method: "DELETE", path: "/v1/agents/" + other + "/evaluations/" + saved.Str("id"), key: kLive})
	w.fails(t, 404, fault.CodeEvaluationNotFound, req{method: "DELETE", path: "/v1/agents/" + other + "/evaluations/" + saved.Str("id"), key: kLive})
	if l := w.must(t, http.StatusOK, req{method: "GET", path: path, key: kLive}); len(l.JSON["data"].([]any)) != 1 {
		t.Fatalf("list %s", l)
	}

	// An organization whose credit is used up: 402.
	poor := newWorld(t, st, worldOpts{})
	pa := poor.publishedAgent(t, poor.p1.ID, "Poor", "inbound", channels("chat"))
	poor.fails(t, 402, fault.CodeCreditExhausted, req{method: "POST", path: "/v1/agents/" + pa + "/evaluation-runs", key: kLive})

	// Version 1 calls the tool: pass. A second run while one is queued: 409.
	script := w.tp.Fakes.Chat.Script()
	script.Add(
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "lookup_order", Args: json.RawMessage(`{"order_id":"A-1"}`)}}},
		fakes.ScriptTurn{Text: "Your order A-1 has shipped."},
		verdictTurn(true),
	)
	run := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive})
	if run.Str("status") != "queued" {
		t.Fatalf("run %s", run)
	}
	w.fails(t, 409, fault.CodeEvaluationRunActive, req{method: "POST", path: "/v1/agents/" + other + "/evaluation-runs", key: kLive})
	stopWorker := runEvaluationWorker(t, w)
	r1 := waitRun(t, w, run.Str("id"))
	res := r1.JSON["results"].([]any)[0].(map[string]any)
	tot := r1.JSON["totals"].(map[string]any)
	if r1.Str("status") != "finished" || res["status"] != "pass" || tot["passed"] != float64(1) || tot["evaluations"] != float64(1) {
		t.Fatalf("version 1: %s", r1)
	}

	// Version 2 skips the tool: fail, with the tool difference.
	defn["agent"].(map[string]any)["system_prompt"] = "Answer from memory."
	w.must(t, http.StatusOK, req{method: "PUT", path: "/v1/agents/" + agent + "/definition", key: kLive, body: map[string]any{"definition": defn}})
	script.Add(fakes.ScriptTurn{Text: "Your order A-1 has shipped."}, verdictTurn(true))
	run2 := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive})
	r2 := waitRun(t, w, run2.Str("id"))
	res = r2.JSON["results"].([]any)[0].(map[string]any)
	missing := res["differences"].(map[string]any)["tool_calls_missing"].([]any)
	if r2.Str("status") != "finished" || res["status"] != "fail" || len(missing) != 1 || missing[0] != "lookup_order" || r2.JSON["totals"].(map[string]any)["failed"] != float64(1) {
		t.Fatalf("version 2: %s", r2)
	}
	var toolCrit map[string]any
	for _, c := range res["criteria"].([]any) {
		if c.(map[string]any)["kind"] == "tool_call" {
			toolCrit = c.(map[string]any)
		}
	}
	if toolCrit == nil || toolCrit["passed"] != false {
		t.Fatalf("criteria %v", res["criteria"])
	}

	// Pinned to the published version that calls the tool (an extension of the operation):
	// it passes while the current definition (version 2's prompt) fails. A version never
	// published: 404.
	w.fails(t, 404, fault.CodeVersionNotFound, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs?version=99", key: kLive})
	w.fails(t, 422, fault.CodeInvalidParameter, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs?version=0", key: kLive})
	script.Add(
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "lookup_order", Args: json.RawMessage(`{"order_id":"A-1"}`)}}},
		fakes.ScriptTurn{Text: "Your order A-1 has shipped."},
		verdictTurn(true),
	)
	pinned := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs?version=" + fmt.Sprint(toolVersion), key: kLive})
	if pinned.JSON["agent_version"] != float64(toolVersion) {
		t.Fatalf("pinned run %s", pinned)
	}
	rp := waitRun(t, w, pinned.Str("id"))
	res = rp.JSON["results"].([]any)[0].(map[string]any)
	if rp.Str("status") != "finished" || res["status"] != "pass" || rp.JSON["agent_version"] != float64(toolVersion) {
		t.Fatalf("pinned to version %d: %s", toolVersion, rp)
	}
	if r2.JSON["agent_version"] != nil {
		t.Fatalf("an unpinned run names no version: %s", r2)
	}

	// Each run sent its end once, as evaluation_run.finished, with its totals.
	for _, r := range []*resp{r1, r2, rp} {
		evs := runEvents(t, w, r.Str("id"))
		if len(evs) != 1 || evs[0].Type != "evaluation_run.finished" {
			t.Fatalf("events of run %s: %+v", r.Str("id"), evs)
		}
		var d map[string]any
		_ = json.Unmarshal(evs[0].Data, &d)
		if d["status"] != "finished" || d["reason"] != nil || d["totals"].(map[string]any)["evaluations"] != float64(1) || string(evs[0].AgentID) != agent {
			t.Fatalf("event data %s", evs[0].Data)
		}
		if r == rp && d["agent_version"] != float64(toolVersion) {
			t.Fatalf("pinned event data %s", evs[0].Data)
		}
	}

	// A judge whose answer does not fit the schema twice: error, with the reason.
	bad := fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "record_verdict", Args: json.RawMessage(`{"success": "yes"}`)}}}
	script.Add(fakes.ScriptTurn{Text: "Shipped."}, bad, bad)
	run3 := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive})
	r3 := waitRun(t, w, run3.Str("id"))
	res = r3.JSON["results"].([]any)[0].(map[string]any)
	if res["status"] != "error" || res["reason"] == nil || r3.JSON["totals"].(map[string]any)["errors"] != float64(1) {
		t.Fatalf("judge error: %s", r3)
	}
	// A run whose job died (its attempts used up): the reaper fails it, with one
	// evaluation_run.failed event.
	stopWorker() // before the run, so that no worker claims its job
	run4 := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id")
	killRunJob(t, w, run4)
	if n, err := w.api.Evaluations.ReapOrphaned(t.Context()); err != nil || n != 0 {
		t.Fatalf("reaped %d (%v) at once: a run under a minute old is left alone", n, err)
	}
	w.api.Evaluations.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if n, err := w.api.Evaluations.ReapOrphaned(t.Context()); err != nil || n != 1 {
		t.Fatalf("reaped %d (%v), want 1", n, err)
	}
	if n, _ := w.api.Evaluations.ReapOrphaned(t.Context()); n != 0 {
		t.Fatalf("reaped again: %d", n)
	}
	w.api.Evaluations.Now = nil
	r4 := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/evaluation-runs/" + run4, key: kLive})
	evs := runEvents(t, w, run4)
	if r4.Str("status") != "failed" || r4.JSON["reason"] == nil || len(evs) != 1 || evs[0].Type != "evaluation_run.failed" {
		t.Fatalf("reaped run %s, events %+v", r4, evs)
	}
	var fd map[string]any
	_ = json.Unmarshal(evs[0].Data, &fd)
	if why, _ := fd["reason"].(string); fd["status"] != "failed" || !strings.Contains(why, "interrupted") || fd["run_id"] != run4 {
		t.Fatalf("failed event data %s", evs[0].Data)
	}

	// Charged as testing.
	txs := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/billing/transactions?kind=testing", key: kLive})
	if len(txs.JSON["data"].([]any)) == 0 {
		t.Fatalf("no testing charge: %s", txs)
	}
}

// runEvents returns the events of evaluation run id.
func runEvents(t *testing.T, w *world, id string) []store.Event {
	t.Helper()
	es, err := w.st.ListEvents(t.Context(), w.org.ID, store.ModeLive, "", 200)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Event
	for _, e := range es {
		var d struct {
			RunID string `json:"run_id"`
		}
		if strings.HasPrefix(e.Type, "evaluation_run.") && json.Unmarshal(e.Data, &d) == nil && d.RunID == id {
			out = append(out, e)
		}
	}
	return out
}

// killRunJob makes the job of run id dead, as if its last attempt had crashed.
func killRunJob(t *testing.T, w *world, id string) {
	t.Helper()
	ctx := t.Context()
	js, err := w.st.ClaimJobs(ctx, store.ClaimJobs{Owner: "killer", Kinds: []string{store.EvaluationRunKind}, Now: time.Now(), Lease: time.Minute, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.DedupeKey != id {
			t.Fatalf("claimed another run's job %+v", j)
		}
		if _, err := w.st.FailJob(ctx, j.Lease(), "killed by the test", time.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(js) != 1 {
		t.Fatalf("claimed %d jobs", len(js))
	}
}

var _ = register(scenario{"EvaluationRunInterrupted", testEvaluationRunInterrupted})

// stallingEngine is the runtime whose rehearsals never end until their context does: a node
// stopped in the middle of a run.
type stallingEngine struct {
	evaluations.Engine
	started chan struct{}
	once    sync.Once
}

func (s *stallingEngine) Rehearse(ctx context.Context, r runtime.Rehearsal) (runtime.RehearsalResult, error) {
	s.once.Do(func() { close(s.started) })
	<-ctx.Done()
	return runtime.RehearsalResult{}, ctx.Err()
}

// testEvaluationRunInterrupted: the worker running a run is stopped mid-run (its composition
// closed); the run is left running, not finished or failed, and another worker finishes it.
func testEvaluationRunInterrupted(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	agent := w.publishedAgent(t, w.p1.ID, "Orders", "inbound", channels("chat"))
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents/" + agent + "/evaluations", key: kLive, body: map[string]any{
		"turns": []any{map[string]any{"text": "Hello"}}, "criteria": map[string]any{"success": "The agent greets."}, "variables": map[string]any{"customer": "Ada"}}})
	real := w.api.Evaluations.Engine
	stall := &stallingEngine{Engine: real, started: make(chan struct{})}
	w.api.Evaluations.Engine = stall
	run := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id")
	stop := runEvaluationWorker(t, w)
	select {
	case <-stall.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the run never started")
	}
	stop()
	if r := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/evaluation-runs/" + run, key: kLive}); r.Str("status") != "running" {
		t.Fatalf("after the stop: %s", r)
	}
	w.fails(t, 409, fault.CodeEvaluationRunActive, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive})
	w.api.Evaluations.Engine = real
	w.tp.Fakes.Chat.Script().Add(fakes.ScriptTurn{Text: "Hello Ada."}, verdictTurn(true, 0))
	runEvaluationWorker(t, w)
	r := waitRun(t, w, run)
	res := r.JSON["results"].([]any)
	if r.Str("status") != "finished" || len(res) != 1 || res[0].(map[string]any)["status"] != "pass" {
		t.Fatalf("after the restart: %s", r)
	}
	if sr, err := st.EvaluationRuns().ByID(context.Background(), store.EvaluationRunID(run)); err != nil || sr.Attempts != 2 {
		t.Fatalf("attempts %d (%v), want 2: started once, then again after the stop", sr.Attempts, err)
	}
}

var _ = register(scenario{"EvaluationRunFifty", testEvaluationRunFifty})

// countingEngine records the most rehearsals in flight at once.
type countingEngine struct {
	evaluations.Engine
	mu        sync.Mutex
	now, most int
}

func (c *countingEngine) Rehearse(ctx context.Context, r runtime.Rehearsal) (runtime.RehearsalResult, error) {
	c.mu.Lock()
	c.now++
	c.most = max(c.most, c.now)
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	return c.Engine.Rehearse(ctx, r)
}

// testEvaluationRunFifty: the performance target's run, 50 saved conversations of 10 turns
// against the fakes with no latency, in text mode, at the default concurrency (4 at once). It
// logs the time the run took (totals.duration_ms, and queued to finished); the figure is in
// the README. It asserts the results and the concurrency bound, not the time.
func testEvaluationRunFifty(t *testing.T, e engine) {
	st := e.open(t)
	w := newWorld(t, st, worldOpts{conv: &convOpts{}})
	w.credit(t, 100)
	agent := w.publishedAgent(t, w.p1.ID, "Bench", "inbound", channels("chat"))
	verdict := verdictTurn(true, 0)
	w.tp.Fakes.Chat.Script().SetFallback(func(last string) fakes.ScriptTurn {
		if len(last) > 20 && last[:20] == "You judge a rehearsa" {
			return verdict
		}
		return fakes.ScriptTurn{Text: "You said: " + last}
	})
	turns := make([]any, 10)
	for i := range turns {
		turns[i] = map[string]any{"text": "Message number " + string(rune('a'+i))}
	}
	for i := 0; i < 50; i++ {
		w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents/" + agent + "/evaluations", key: kLive, body: map[string]any{
			"turns": turns, "criteria": map[string]any{"success": "The agent answers every message."}, "variables": map[string]any{"customer": "Ada"}}})
	}
	count := &countingEngine{Engine: w.api.Evaluations.Engine}
	w.api.Evaluations.Engine = count
	runEvaluationWorker(t, w)
	start := time.Now()
	run := w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id")
	r := waitRun(t, w, run)
	wall := time.Since(start)
	tot := r.JSON["totals"].(map[string]any)
	if r.Str("status") != "finished" || tot["evaluations"] != float64(50) || tot["passed"] != float64(50) {
		t.Fatalf("run %v", tot)
	}
	if len(r.JSON["results"].([]any)[0].(map[string]any)["transcript"].([]any)) != 21 {
		t.Fatalf("transcript %v", r.JSON["results"].([]any)[0])
	}
	if count.most > 4 || count.most < 1 {
		t.Fatalf("%d rehearsals at once, want at most 4", count.most)
	}
	t.Logf("%s: 50 saved conversations × 10 turns: run %v ms (queued to finished %v), at most %d at once", e.name, tot["duration_ms"], wall.Round(time.Millisecond), count.most)
}
