package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/tools"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session/fakes"
)

// issue 18: the voice mode and the simulated user of evaluations.
var _ = register(scenario{"EvaluationVoice", testEvaluationVoice}, scenario{"EvaluationSimulation", testEvaluationSimulation})

// ordersAgent is a published agent whose prompt says to look orders up with the tool
// lookup_order (its definition's references give it the tool), and its definition to change.
func ordersAgent(t *testing.T, w *world) (agent string, defn map[string]any) {
	t.Helper()
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/tools", key: kLive, body: map[string]any{"project_id": string(w.p1.ID), "name": "lookup_order",
		"description": "Look up an order by its id.",
		"parameters":  map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []any{"order_id"}},
		"request":     map[string]any{"method": "GET", "url": "https://orders.example.com/orders/{{order_id}}"}}})
	agent = w.publishedAgent(t, w.p1.ID, "Orders", "inbound", channels("chat", "phone"), func(a map[string]any) {
		a["system_prompt"] = "Always look the order up with lookup_order before answering."
	})
	def := w.must(t, http.StatusOK, req{method: "GET", path: "/v1/agents/" + agent + "/definition", key: kLive})
	_ = json.Unmarshal(def.Body, &defn)
	if d, ok := defn["definition"].(map[string]any); ok {
		defn = d
	}
	defn["references"] = map[string]any{"tools": []any{"lookup_order"}}
	w.must(t, http.StatusOK, req{method: "PUT", path: "/v1/agents/" + agent + "/definition", key: kLive, body: map[string]any{"definition": defn}})
	return agent, defn
}

var orderCriteria = map[string]any{"success": "The agent tells the customer that order A-1 has shipped.",
	"expected_tool_calls": []any{map[string]any{"name": "lookup_order", "arguments": map[string]any{"order_id": "A-1"}}}}

// oneResult returns the run's only result.
func oneResult(t *testing.T, r *resp) map[string]any {
	t.Helper()
	rs, _ := r.JSON["results"].([]any)
	if len(rs) != 1 {
		t.Fatalf("results of %s", r)
	}
	return rs[0].(map[string]any)
}

// testEvaluationVoice: a saved conversation with channel voice is rehearsed through the audio
// path. Its user turn is spoken by espeak-ng into the engine, the fakes' Deepgram recognizer
// hears the speech (its script gives the words, as in the voice tests and the bench), the
// replies go out through the fakes' TTS. Version 1 passes; version 2 (a prompt that skips
// the tool) fails with the tool difference, as in text mode.
func testEvaluationVoice(t *testing.T, e engine) {
	testenv.NeedCommand(t, "espeak-ng")
	st := e.open(t)
	src := &tools.Source{Store: st}
	t.Cleanup(src.Close)
	w := newWorld(t, st, worldOpts{conv: &convOpts{tools: src}})
	w.credit(t, 10)
	w.api.Evaluations.Concurrency = 1
	agent, defn := ordersAgent(t, w)
	said := "Where is my order A one?"
	w.tp.Fakes.Deepgram.SetOptions(fakes.DeepgramFakeOptions{Script: []string{said}})
	ev := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents/" + agent + "/evaluations", key: kLive, body: map[string]any{
		"name": "order shipped, by voice", "channel": "voice", "turns": []any{map[string]any{"text": said}},
		"mocks": map[string]any{"lookup_order": []any{map[string]any{"status": "shipped"}}}, "criteria": orderCriteria, "variables": map[string]any{"customer": "Ada"}}})
	if ev.Str("channel") != "voice" {
		t.Fatalf("evaluation %s", ev)
	}
	script := w.tp.Fakes.Chat.Script()
	script.Add(
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "lookup_order", Args: json.RawMessage(`{"order_id":"A-1"}`)}}},
		fakes.ScriptTurn{Text: "Your order A-1 has shipped."},
		verdictTurn(true, 0),
	)
	runEvaluationWorker(t, w)
	conns, ttsReqs := len(w.tp.Fakes.Deepgram.Connections()), len(w.tp.Fakes.ElevenLabs.Requests())
	r1 := waitRun(t, w, w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id"))
	res := oneResult(t, r1)
	if r1.Str("status") != "finished" || res["status"] != "pass" {
		t.Fatalf("version 1 by voice: %s", r1)
	}
	// The transcript is what the engine recorded: the greeting, the words the STT heard, the
	// tool, the reply.
	var roles []string
	var user string
	for _, l := range res["transcript"].([]any) {
		m := l.(map[string]any)
		roles = append(roles, m["role"].(string))
		if m["role"] == "user" {
			user = m["text"].(string)
		}
	}
	if strings.Join(roles, ",") != "agent,user,tool,agent" || user != said {
		t.Fatalf("voice transcript %v", res["transcript"])
	}
	// The turn went through the recognizer as audio, and the replies through the TTS.
	cs := w.tp.Fakes.Deepgram.Connections()
	if len(cs) <= conns {
		t.Fatal("the rehearsal never opened the STT")
	}
	c := cs[len(cs)-1]
	if c.AudioBytes < 16000 || c.Utterances != 1 { // over half a second of speech, heard as one utterance
		t.Fatalf("STT connection %+v", c)
	}
	if n := len(w.tp.Fakes.ElevenLabs.Requests()) - ttsReqs; n < 2 {
		t.Fatalf("%d TTS requests, want the greeting and the reply", n)
	}

	// Version 2 skips the tool: fail, with the tool difference.
	defn["agent"].(map[string]any)["system_prompt"] = "Answer from memory."
	w.must(t, http.StatusOK, req{method: "PUT", path: "/v1/agents/" + agent + "/definition", key: kLive, body: map[string]any{"definition": defn}})
	script.Add(fakes.ScriptTurn{Text: "Your order A-1 has shipped."}, verdictTurn(true, 0))
	r2 := waitRun(t, w, w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id"))
	res = oneResult(t, r2)
	missing, _ := res["differences"].(map[string]any)["tool_calls_missing"].([]any)
	if r2.Str("status") != "finished" || res["status"] != "fail" || len(missing) != 1 || missing[0] != "lookup_order" {
		t.Fatalf("version 2 by voice: %s", r2)
	}

	// Barge-in: the second turn is said while the agent's long first reply is playing. The
	// engine cuts the reply off; the transcript keeps what was played, marked interrupted,
	// and the agent answers the second turn. The third turn is keys, pressed as DTMF.
	w.must(t, http.StatusOK, req{method: "DELETE", path: "/v1/agents/" + agent + "/evaluations/" + ev.Str("id"), key: kLive})
	first, second := "Tell me about my order.", "Stop, is it shipped?"
	w.tp.Fakes.Deepgram.SetOptions(fakes.DeepgramFakeOptions{Script: []string{first, second}})
	w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/agents/" + agent + "/evaluations", key: kLive, body: map[string]any{
		"channel": "voice", "turns": []any{map[string]any{"text": first}, map[string]any{"text": second, "barge_in": true}, map[string]any{"dtmf": "42"}},
		"criteria": map[string]any{"success": "The agent says the order has shipped."}, "variables": map[string]any{"customer": "Ada"}}})
	long := "Let me tell you everything about your order. It was packed on Monday morning. It left the warehouse on Tuesday. " +
		"It reached the depot on Wednesday. It is out for delivery today."
	script.Add(fakes.ScriptTurn{Text: long}, fakes.ScriptTurn{Text: "Yes, it has shipped."}, fakes.ScriptTurn{Text: "You pressed four two."}, verdictTurn(true, 0))
	r3 := waitRun(t, w, w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id"))
	res = oneResult(t, r3)
	var lines []map[string]any
	for _, l := range res["transcript"].([]any) {
		lines = append(lines, l.(map[string]any))
	}
	if r3.Str("status") != "finished" || res["status"] != "pass" || len(lines) != 8 {
		t.Fatalf("barge-in run: %s", r3)
	}
	cut := lines[2]
	if cut["role"] != "agent" || cut["interrupted"] != true || strings.Contains(cut["text"].(string), "out for delivery") ||
		lines[3]["text"] != second || lines[4]["text"] != "Yes, it has shipped." {
		t.Fatalf("barge-in transcript %v", lines)
	}
	// The keys of the third turn were pressed as DTMF, one line each, then answered.
	if lines[5]["text"] != "DTMF 4" || lines[6]["text"] != "DTMF 2" || lines[7]["text"] != "You pressed four two." {
		t.Fatalf("DTMF turn %v", lines[5:])
	}

	// A saved chat conversation cannot be rehearsed by voice: its turns were typed.
	chat := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/chats", key: kLive,
		body: map[string]any{"agent_id": agent, "variables": map[string]any{"customer": "Ada"}}}).Str("id")
	w.fails(t, 422, fault.CodeEvaluationChannel, req{method: "POST", path: "/v1/agents/" + agent + "/evaluations", key: kLive,
		body: map[string]any{"conversation_id": chat, "channel": "voice", "criteria": orderCriteria}})
}

// testEvaluationSimulation: the third form. The fake LLM (its OpenAI wire format, scripted)
// plays the user from a persona and a goal, bounded by max_turns, against the agent; the
// rehearsal is judged like the others.
func testEvaluationSimulation(t *testing.T, e engine) {
	st := e.open(t)
	src := &tools.Source{Store: st}
	t.Cleanup(src.Close)
	w := newWorld(t, st, worldOpts{conv: &convOpts{tools: src}})
	w.credit(t, 10)
	w.api.Evaluations.Concurrency = 1
	agent, _ := ordersAgent(t, w)
	path := "/v1/agents/" + agent + "/evaluations"
	sim := map[string]any{"persona": "Ada, a customer in a hurry.", "goal": "Learn where order A-1 is.", "max_turns": 3}
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: path, key: kLive, body: map[string]any{
		"simulation": sim, "turns": []any{map[string]any{"text": "hi"}}, "criteria": orderCriteria}}).hasError(t, "/simulation", "oneOf")
	w.fails(t, 422, fault.CodeValidationFailed, req{method: "POST", path: path, key: kLive, body: map[string]any{
		"simulation": map[string]any{"persona": "Ada", "goal": "x", "max_turns": 31}, "criteria": orderCriteria}})
	ev := w.must(t, http.StatusCreated, req{method: "POST", path: path, key: kLive, body: map[string]any{
		"name": "simulated Ada", "simulation": sim, "mocks": map[string]any{"lookup_order": []any{map[string]any{"status": "shipped"}}},
		"criteria": orderCriteria, "variables": map[string]any{"customer": "Ada"}}})
	if ev.JSON["simulation"].(map[string]any)["max_turns"] != float64(3) || len(ev.JSON["turns"].([]any)) != 0 {
		t.Fatalf("evaluation %s", ev)
	}
	script := w.tp.Fakes.Chat.Script()
	// The user (played by the LLM) asks, the agent looks the order up and answers, the user
	// is done; then the judge.
	script.Add(
		fakes.ScriptTurn{Text: "Hi, where is my order A-1?"},
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "lookup_order", Args: json.RawMessage(`{"order_id":"A-1"}`)}}},
		fakes.ScriptTurn{Text: "Your order A-1 has shipped."},
		fakes.ScriptTurn{Text: "Great, thanks. [END]"},
		verdictTurn(true, 0),
	)
	runEvaluationWorker(t, w)
	before := len(w.tp.Fakes.Chat.Requests())
	r := waitRun(t, w, w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id"))
	res := oneResult(t, r)
	if r.Str("status") != "finished" || res["status"] != "pass" {
		t.Fatalf("simulated run: %s", r)
	}
	var users []string
	for _, l := range res["transcript"].([]any) {
		if m := l.(map[string]any); m["role"] == "user" {
			users = append(users, m["text"].(string))
		}
	}
	if len(users) != 1 || users[0] != "Hi, where is my order A-1?" {
		t.Fatalf("simulated user's turns %v", users)
	}
	// The simulated user's requests carry the persona and the goal, and see the agent's
	// lines as the other side's.
	reqs := w.tp.Fakes.Chat.Requests()[before:]
	if len(reqs) != 5 || !strings.Contains(string(reqs[0].Raw), "Ada, a customer in a hurry.") || !strings.Contains(string(reqs[3].Raw), "Your order A-1 has shipped.") {
		t.Fatalf("%d LLM requests; first %s", len(reqs), reqs[0].Raw)
	}

	// Bounded: a user that never says it is done stops after max_turns turns.
	script.SetFallback(func(last string) fakes.ScriptTurn {
		if strings.HasPrefix(last, "You judge a rehearsa") {
			return verdictTurn(false, 0)
		}
		return fakes.ScriptTurn{Text: "And what else?"}
	})
	r = waitRun(t, w, w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id"))
	res = oneResult(t, r)
	n := 0
	for _, l := range res["transcript"].([]any) {
		if l.(map[string]any)["role"] == "user" {
			n++
		}
	}
	if r.Str("status") != "finished" || res["status"] != "fail" || n != 3 {
		t.Fatalf("bounded simulation: %d user turns, %s", n, r)
	}

	// A simulated user by voice: its lines are spoken into the engine and heard by the STT.
	testenv.NeedCommand(t, "espeak-ng")
	script.SetFallback(nil)
	w.must(t, http.StatusOK, req{method: "DELETE", path: path + "/" + ev.Str("id"), key: kLive})
	asks := "Where is my order A one?"
	w.tp.Fakes.Deepgram.SetOptions(fakes.DeepgramFakeOptions{Script: []string{asks}})
	w.must(t, http.StatusCreated, req{method: "POST", path: path, key: kLive, body: map[string]any{
		"channel": "voice", "simulation": sim, "mocks": map[string]any{"lookup_order": []any{map[string]any{"status": "shipped"}}},
		"criteria": orderCriteria, "variables": map[string]any{"customer": "Ada"}}})
	script.Add(
		fakes.ScriptTurn{Text: asks},
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{Name: "lookup_order", Args: json.RawMessage(`{"order_id":"A-1"}`)}}},
		fakes.ScriptTurn{Text: "Your order A-1 has shipped."},
		fakes.ScriptTurn{Text: "[END]"},
		verdictTurn(true, 0),
	)
	r = waitRun(t, w, w.must(t, http.StatusAccepted, req{method: "POST", path: "/v1/agents/" + agent + "/evaluation-runs", key: kLive}).Str("id"))
	res = oneResult(t, r)
	var roles []string
	for _, l := range res["transcript"].([]any) {
		roles = append(roles, l.(map[string]any)["role"].(string))
	}
	if r.Str("status") != "finished" || res["status"] != "pass" || strings.Join(roles, ",") != "agent,user,tool,agent" || res["cost_usd"] == "0.000000" {
		t.Fatalf("simulated user by voice: %s", r)
	}
}

// TestEvaluationDocument: the pinned version is a query parameter of runEvaluations marked
// x-extension (the specification gives the operation no body), and the run events are in the
// document's webhooks with their data.
func TestEvaluationDocument(t *testing.T) {
	doc := servedDocument(t)
	op := doc["paths"].(map[string]any)["/v1/agents/{agent_id}/evaluation-runs"].(map[string]any)["post"].(map[string]any)
	if op["x-extension"] == true || op["requestBody"] != nil {
		t.Fatalf("runEvaluations is the specification's operation, with no body: %v", op)
	}
	var version map[string]any
	for _, p := range op["parameters"].([]any) {
		if m := p.(map[string]any); m["name"] == "version" {
			version = m
		}
	}
	if version == nil || version["in"] != "query" || version["required"] != false || version["x-extension"] != true ||
		version["schema"].(map[string]any)["minimum"] != float64(1) {
		t.Fatalf("version parameter %v", version)
	}
	hooks := doc["webhooks"].(map[string]any)
	for _, name := range []string{"evaluation_run.finished", "evaluation_run.failed"} {
		h, ok := hooks[name]
		if !ok {
			t.Fatalf("webhook %s missing", name)
		}
		if b, _ := json.Marshal(h); !strings.Contains(string(b), `"#/components/schemas/EvaluationRunEventData"`) {
			t.Fatalf("webhook %s: %s", name, b)
		}
	}
	props := doc["components"].(map[string]any)["schemas"].(map[string]any)["EvaluationRunEventData"].(map[string]any)["properties"].(map[string]any)
	for _, f := range []string{"run_id", "agent_id", "agent_version", "status", "reason", "totals", "finished_at"} {
		if props[f] == nil {
			t.Errorf("EvaluationRunEventData has no %s: %v", f, props)
		}
	}
}
