package session

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

// deskShelf is a SpecialistKnowledge recording which specialist each lookup was narrowed to.
type deskShelf struct {
	mu      sync.Mutex
	current string
	uses    []string
	lookups []string // "specialist: query"
}

func (s *deskShelf) UseSpecialist(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = name
	s.uses = append(s.uses, name)
	return nil
}

func (s *deskShelf) Retrieve(ctx context.Context, q string) (Retrieval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups = append(s.lookups, s.current+": "+q)
	return Retrieval{Context: "Knowledge of " + s.current + "."}, nil
}

func (s *deskShelf) Lookup(ctx context.Context, q string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups = append(s.lookups, s.current+": "+q)
	return `{"results":[]}`, nil
}

func deskAgent() Agent {
	specs := []Specialist{
		{Name: "Billing", Description: "invoices and payments", SystemPrompt: "You are Billing; you help {{customer}} with invoices.", Voice: "voice-billing"},
		{Name: "Tech", Description: "faults", SystemPrompt: "You are Tech."},
	}
	return Agent{SystemPrompt: "You are the desk; hand over to the right specialist.", LLMModel: "gpt-test", KnowledgeAuto: true,
		Specialists: specs, Tools: []ToolSpec{{Name: ToolKnowledge}, HandOverSchema(specs)}}
}

func systemOf(t *testing.T, body map[string]any) string {
	t.Helper()
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatalf("request without messages: %v", body)
	}
	m := msgs[0].(map[string]any)
	if m["role"] != "system" {
		t.Fatalf("first message %v", m)
	}
	s, _ := m["content"].(string)
	return s
}

// TestHandOverToSpecialist: a desk's model calls hand_over; from the next request on the
// conversation has the specialist's prompt (its placeholders filled) and its knowledge, the
// transcript records the hand-over, and a resumed chat keeps it.
func TestHandOverToSpecialist(t *testing.T) {
	k := &deskShelf{}
	r := newRig(t, rigOptions{
		agent: deskAgent(), vars: map[string]any{"customer": "Ada"}, know: k, noStart: true,
		turns: []fakes.ScriptTurn{
			{ToolCalls: []fakes.ScriptToolCall{{Name: ToolHandOver, Args: json.RawMessage(`{"specialist":"Billing","reason":"invoice"}`)}}},
			{Text: "Billing here. Which invoice?"},
			{Text: "Invoice 42 is corrected."},
		},
	})
	ctx := context.Background()
	if err := r.conv.StartText(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.conv.Send(ctx, "My invoice is wrong", nil, nil); err != nil {
		t.Fatal(err)
	}
	if r.conv.Specialist() != "Billing" {
		t.Fatalf("specialist %q after the hand-over", r.conv.Specialist())
	}
	if _, err := r.conv.Send(ctx, "Number 42", nil, nil); err != nil {
		t.Fatal(err)
	}
	reqs := r.chat.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d LLM requests", len(reqs))
	}
	if s := systemOf(t, reqs[0].Body); !strings.HasPrefix(s, "You are the desk") || !strings.Contains(s, "Knowledge of .") {
		t.Fatalf("first request's system prompt %q", s)
	}
	if !strings.Contains(string(reqs[0].Raw), "invoices and payments") || !strings.Contains(string(reqs[0].Raw), `"enum":["Billing","Tech"]`) {
		t.Fatalf("the hand-over tool is not declared with the specialists: %s", reqs[0].Raw)
	}
	for i, req := range reqs[1:] {
		if s := systemOf(t, req.Body); !strings.HasPrefix(s, "You are Billing; you help Ada with invoices.") || !strings.Contains(s, "Knowledge of Billing.") {
			t.Fatalf("request %d after the hand-over: system prompt %q, want the specialist's with its knowledge", i+2, s)
		}
	}
	k.mu.Lock()
	// The specialist's first answer looks the caller's words up again, in its own bases.
	if strings.Join(k.lookups, "|") != ": My invoice is wrong|Billing: My invoice is wrong|Billing: Number 42" || strings.Join(k.uses, ",") != "Billing" {
		t.Fatalf("lookups %q, narrowed to %q", k.lookups, k.uses)
	}
	k.mu.Unlock()
	var handed bool
	for _, l := range r.lines(RoleTool) {
		if l.Meta["tool"] == ToolHandOver && l.Meta["status"] == "ok" && strings.Contains(l.Text, `"specialist":"Billing"`) {
			handed = true
		}
	}
	if !handed {
		t.Fatalf("no hand-over line in the transcript: %+v", r.lines(RoleTool))
	}

	// A chat's engine is rebuilt for each message from its state: the hand-over holds.
	st := r.conv.TextState()
	k2 := &deskShelf{}
	again, err := New(Options{ID: "conv-test-2", Agent: deskAgent(), Variables: map[string]any{"customer": "Ada"}, LLM: r.llm, Knowledge: k2, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.ResumeText(ctx, st); err != nil {
		t.Fatal(err)
	}
	if again.Specialist() != "Billing" || strings.Join(k2.uses, ",") != "Billing" {
		t.Fatalf("resumed: specialist %q, knowledge narrowed to %q", again.Specialist(), k2.uses)
	}
}

// TestHandOverUnknownSpecialist: a name the desk does not have is the model's slip: it is
// told so, and the conversation stays with the desk.
func TestHandOverUnknownSpecialist(t *testing.T) {
	r := newRig(t, rigOptions{
		agent: deskAgent(), vars: map[string]any{"customer": "Ada"}, know: &deskShelf{}, noStart: true,
		turns: []fakes.ScriptTurn{
			{ToolCalls: []fakes.ScriptToolCall{{Name: ToolHandOver, Args: json.RawMessage(`{"specialist":"Sales"}`)}}},
			{Text: "Let me help you myself."},
		},
	})
	ctx := context.Background()
	if err := r.conv.StartText(ctx); err != nil {
		t.Fatal(err)
	}
	turn, err := r.conv.Send(ctx, "I want to buy", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Agent.Text != "Let me help you myself." || r.conv.Specialist() != "" {
		t.Fatalf("turn %+v, specialist %q", turn, r.conv.Specialist())
	}
	if reqs := r.chat.Requests(); len(reqs) != 2 || !strings.Contains(string(reqs[1].Raw), "there is no specialist called Sales") ||
		!strings.HasPrefix(systemOf(t, reqs[1].Body), "You are the desk") {
		t.Fatalf("requests %d: %s", len(reqs), reqs[len(reqs)-1].Raw)
	}
}

// TestHandOverVoice: on a call, the specialist answers in its own voice.
func TestHandOverVoice(t *testing.T) {
	r := newRig(t, rigOptions{
		agent: deskAgent(), vars: map[string]any{"customer": "Ada"}, know: &deskShelf{},
		turns: []fakes.ScriptTurn{
			{ToolCalls: []fakes.ScriptToolCall{{Name: ToolHandOver, Args: json.RawMessage(`{"specialist":"Billing"}`)}}},
			{Text: "Billing here."},
		},
		dgScript: []string{"my invoice is wrong"},
		dgFinal:  30 * time.Millisecond,
	})
	r.caller.say(speech(t, "My invoice is wrong"))
	waitFor(t, 10*time.Second, "the specialist's reply", func() bool { return len(r.lines(RoleAgent)) == 1 })
	var voices []string
	for _, q := range r.el.Requests() {
		voices = append(voices, q.VoiceID)
	}
	if len(voices) == 0 || voices[len(voices)-1] != "voice-billing" {
		t.Fatalf("TTS voices %q, want the specialist's last", voices)
	}
}
