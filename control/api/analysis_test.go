package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/session/fakes"
)

// issue 14: the post-call analysis through the fake LLM (OpenAI's wire format), run by a job
// worker as a node runs it.
var _ = register(scenario{"PostCallAnalysis", testPostCallAnalysis})

// runAnalysisWorker runs the analysis jobs of w's store until t ends.
func runAnalysisWorker(t *testing.T, w *world) {
	wk := jobs.NewWorker(jobs.Options{Store: w.st, Owner: "analysis-test", PollInterval: 20 * time.Millisecond})
	wk.Register(runtime.AnalyzeJobKind, func(ctx context.Context, j *jobs.Job) error { return w.api.Analysis.Run(ctx, j, j.Payload) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { wk.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func testPostCallAnalysis(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	runAnalysisWorker(t, w)
	agent := w.publishedAgent(t, w.p1.ID, "Sales", "outbound", channels("chat"), func(a map[string]any) {
		a["analysis"] = map[string]any{"enabled": true, "summary": true, "success_criteria": "The customer bought.",
			"fields": []any{map[string]any{"name": "outcome", "type": "choice", "options": []any{"sale", "no_sale"}, "required": true, "description": "How it ended"}}}
	})
	detail := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/agents/" + agent, key: kLive})
	if detail.JSON["analysis_enabled"] != true {
		t.Fatalf("agent %s", detail)
	}
	chat := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/chats", key: kLive,
		body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}}}).Str("id")
	w.must(t, http.StatusOK, req{method: "POST", path: "/v1/conversations/" + chat + "/messages", key: kLive, body: map[string]any{"message": "I'll take two."}})
	asked := len(w.tp.Fakes.Chat.Requests())
	// The first answer does not fit (outcome is not one of the choices, summary is missing);
	// the second does.
	w.tp.Fakes.Chat.Script().Add(
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "record_analysis", Args: json.RawMessage(`{"outcome": "maybe"}`)}}},
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "record_analysis", Args: json.RawMessage(`{"summary": "Ada bought two.", "successful": true, "outcome": "sale"}`)}}},
	)
	w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + chat + "/end", key: kLive})
	var conv *resp
	waitFor(t, 20*time.Second, "the analysis", func() bool {
		conv = w.conv(t, kLive, chat)
		return conv.JSON["analysis"] != nil
	})
	an := conv.JSON["analysis"].(map[string]any)
	if an["outcome"] != "sale" || an["summary"] != "Ada bought two." || an["successful"] != true || conv.JSON["analyzed_at"] == nil || conv.JSON["collected"] != nil {
		t.Fatalf("analysis %v", conv.JSON)
	}
	reqs := w.tp.Fakes.Chat.Requests()[asked:]
	if len(reqs) != 2 {
		t.Fatalf("the LLM was asked %d times for the analysis, want 2 (one retry)", len(reqs))
	}
	retry := string(reqs[1].Raw)
	if !strings.Contains(retry, "does not fit the schema") || !strings.Contains(retry, `"record_analysis"`) {
		t.Fatalf("the retry does not say what did not fit: %s", retry)
	}
	ev := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events?type=conversation.analyzed&conversation_id=" + chat, key: kLive})
	data := ev.JSON["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["data"].(map[string]any)["analysis"].(map[string]any)["outcome"] != "sale" {
		t.Fatalf("conversation.analyzed %s", ev)
	}
	// The tokens are charged: an llm_tokens transaction naming the conversation.
	txs := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/billing/transactions?kind=llm_tokens", key: kLive})
	charged := false
	for _, x := range txs.JSON["data"].([]any) {
		m := x.(map[string]any)
		if m["conversation_id"] == chat && strings.Contains(m["description"].(string), "analysis") {
			charged = true
		}
	}
	if !charged {
		t.Fatalf("no llm_tokens charge for the analysis: %s", txs)
	}
	// Asked again: it runs again (one fitting answer this time).
	w.tp.Fakes.Chat.Script().Add(fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "record_analysis", Args: json.RawMessage(`{"summary": "Again.", "successful": false, "outcome": "no_sale"}`)}}})
	w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + chat + "/analysis", key: kLive})
	waitFor(t, 20*time.Second, "the analysis run again", func() bool {
		a, _ := w.conv(t, kLive, chat).JSON["analysis"].(map[string]any)
		return a["outcome"] == "no_sale"
	})
}

var _ = register(scenario{"FormAbandoned", testFormAbandoned})

// testFormAbandoned: a form-filling conversation that ends with a required field unfilled
// sends form.abandoned with what was collected; collected is stored on the conversation.
func testFormAbandoned(t *testing.T, e engine) {
	w := newWorld(t, e.open(t), worldOpts{conv: &convOpts{}})
	w.credit(t, 10)
	runAnalysisWorker(t, w)
	agent := w.publishedAgent(t, w.p1.ID, "Intake", "outbound", channels("chat"), func(a map[string]any) {
		a["kind"] = "form_filling"
		a["collected"] = []any{
			map[string]any{"name": "full_name", "type": "string", "required": true},
			map[string]any{"name": "email", "type": "email", "required": true},
		}
	})
	chat := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/chats", key: kLive,
		body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}}}).Str("id")
	w.tp.Fakes.Chat.Script().Add(
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "record_collected", Args: json.RawMessage(`{"full_name": "Ada Lovelace", "email": "not an email"}`)}}},
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "record_collected", Args: json.RawMessage(`{"full_name": "Ada Lovelace"}`)}}},
	)
	w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/conversations/" + chat + "/end", key: kLive})
	var ev *resp
	waitFor(t, 20*time.Second, "form.abandoned", func() bool {
		ev = w.must(t, http.StatusOK, req{method: "GET", path: "/v1/events?type=form.abandoned&conversation_id=" + chat, key: kLive})
		return len(ev.JSON["data"].([]any)) == 1
	})
	d := ev.JSON["data"].([]any)[0].(map[string]any)["data"].(map[string]any)
	if d["collected"].(map[string]any)["full_name"] != "Ada Lovelace" || len(d["missing"].([]any)) != 1 || d["missing"].([]any)[0] != "email" {
		t.Fatalf("form.abandoned %v", d)
	}
	conv := w.conv(t, kLive, chat)
	if c, _ := conv.JSON["collected"].(map[string]any); c["full_name"] != "Ada Lovelace" || conv.JSON["analysis"] != nil {
		t.Fatalf("conversation %s", conv)
	}
}
