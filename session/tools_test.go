package session

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

// issue 17: per-tool timeouts, apology, speak-result mode, per-tool filler and barge-in.

// A tool that hangs is abandoned at its timeout: the LLM is told it failed (the history holds
// the failure) and the caller hears the tool's apology at once, not silence and not a second
// LLM round.
func TestToolTimeoutApology(t *testing.T) {
	var cancelled atomic.Bool
	hang := toolFunc(func(ctx context.Context, name string, args json.RawMessage) (string, error) {
		<-ctx.Done()
		cancelled.Store(true)
		return "", ctx.Err()
	})
	r := newRig(t, rigOptions{
		agent: Agent{SystemPrompt: "x", Tools: []ToolSpec{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`),
			Timeout: 150 * time.Millisecond, Apology: "Sorry, I could not look that up just now."}}},
		turns: []fakes.ScriptTurn{{ToolCalls: []fakes.ScriptToolCall{{Name: "lookup"}}}, {Text: "never asked"}},
		tools: hang, noStart: true,
	})
	if err := r.conv.StartText(context.Background()); err != nil {
		t.Fatal(err)
	}
	turn, err := r.conv.Send(context.Background(), "look it up", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Agent.Text != "Sorry, I could not look that up just now." || !cancelled.Load() {
		t.Fatalf("turn %+v, tool cancelled %v", turn, cancelled.Load())
	}
	if n := len(r.chat.Requests()); n != 1 {
		t.Fatalf("%d LLM requests in the reply, want 1", n)
	}
	tl := r.lines(RoleTool)
	if len(tl) != 1 || tl[0].Meta["status"] != "timeout" {
		t.Fatalf("tool line %+v", tl)
	}
	// The next request tells the LLM the tool failed.
	if _, err := r.conv.Send(context.Background(), "and now?", nil, nil); err != nil {
		t.Fatal(err)
	}
	reqs := r.chat.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Raw), "did not answer in time") {
		t.Fatalf("the LLM was not told: %s", reqs[len(reqs)-1].Raw)
	}
}

// A speak-mode tool's result is spoken as it is; the LLM is not asked again.
func TestToolSpeakResult(t *testing.T) {
	r := newRig(t, rigOptions{
		agent: Agent{SystemPrompt: "x", Tools: []ToolSpec{{Name: "hours", Parameters: json.RawMessage(`{"type":"object"}`), SpeakResult: true}}},
		turns: []fakes.ScriptTurn{{ToolCalls: []fakes.ScriptToolCall{{Name: "hours"}}}},
		tools: toolFunc(func(context.Context, string, json.RawMessage) (string, error) {
			return "We are open from nine to five.", nil
		}),
		noStart: true,
	})
	if err := r.conv.StartText(context.Background()); err != nil {
		t.Fatal(err)
	}
	turn, err := r.conv.Send(context.Background(), "when are you open", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Agent.Text != "We are open from nine to five." || len(r.chat.Requests()) != 1 {
		t.Fatalf("turn %+v after %d requests", turn, len(r.chat.Requests()))
	}
}

// A slow tool's own filler is spoken past the filler delay, then the answer.
func TestToolOwnFiller(t *testing.T) {
	slow := toolFunc(func(ctx context.Context, name string, args json.RawMessage) (string, error) {
		select {
		case <-time.After(700 * time.Millisecond):
		case <-ctx.Done():
		}
		return `{"ok":true}`, nil
	})
	r := newRig(t, rigOptions{
		agent: Agent{SystemPrompt: "x", FillerAfter: 150 * time.Millisecond,
			Tools: []ToolSpec{{Name: "book", Parameters: json.RawMessage(`{"type":"object"}`), Filler: "Let me book that for you."}}},
		turns:    []fakes.ScriptTurn{{ToolCalls: []fakes.ScriptToolCall{{Name: "book"}}}, {Text: "You are booked."}},
		dgScript: []string{"book me in"}, tools: slow,
	})
	r.caller.say(speech(t, "Book me in please"))
	waitFor(t, 10*time.Second, "answer", func() bool {
		for _, l := range r.lines(RoleAgent) {
			if l.Text == "You are booked." {
				return true
			}
		}
		return false
	})
	var texts []string
	for _, q := range r.el.Requests() {
		if s, _ := q.Body["text"].(string); s != "" {
			texts = append(texts, s)
		}
	}
	joined := strings.Join(texts, "|")
	if !strings.Contains(joined, "Let me book that for you.") || strings.Index(joined, "Let me book") > strings.Index(joined, "You are booked") {
		t.Fatalf("the tool's filler was not spoken before the answer: %q", joined)
	}
}

// The caller speaking while a tool runs cancels the call; its late result is dropped and the
// transcript notes it.
func TestToolBargeInCancels(t *testing.T) {
	started := make(chan struct{}, 1)
	var sawCancel atomic.Bool
	block := toolFunc(func(ctx context.Context, name string, args json.RawMessage) (string, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			sawCancel.Store(true)
			return `{"late":"LATE-RESULT"}`, nil // a late result: must be dropped
		case <-time.After(10 * time.Second):
			return `{"late":"LATE-RESULT"}`, nil
		}
	})
	r := newRig(t, rigOptions{
		agent:    Agent{SystemPrompt: "x", Tools: []ToolSpec{{Name: "slow_lookup", Parameters: json.RawMessage(`{"type":"object"}`)}}},
		turns:    []fakes.ScriptTurn{{ToolCalls: []fakes.ScriptToolCall{{Name: "slow_lookup"}}}},
		dgScript: []string{"look something up", "actually never mind"},
		dgFinal:  30 * time.Millisecond,
		tools:    block,
	})
	r.caller.say(speech(t, "Look something up"))
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool was not called")
	}
	r.caller.say(speech(t, "Actually never mind"))
	waitFor(t, 10*time.Second, "cancelled tool line", func() bool {
		for _, l := range r.lines(RoleTool) {
			if strings.Contains(l.Text, "cancelled") && l.Meta["status"] == "cancelled" {
				return true
			}
		}
		return false
	})
	if !sawCancel.Load() {
		t.Fatal("the tool's request was not cancelled")
	}
	defer func() {
		if t.Failed() {
			t.Logf("requests %d: %s", len(r.chat.Requests()), r.chat.Requests()[len(r.chat.Requests())-1].Raw)
		}
	}()
	waitFor(t, 10*time.Second, "answer to the interruption", func() bool {
		for _, l := range r.lines(RoleAgent) {
			if strings.Contains(l.Text, "never mind") {
				return true
			}
		}
		return false
	})
	for _, l := range append(r.lines(RoleTool), r.lines(RoleAgent)...) {
		if strings.Contains(l.Text, "LATE-RESULT") {
			t.Fatalf("the late result reached the transcript: %+v", l)
		}
	}
	for _, q := range r.chat.Requests() {
		if strings.Contains(string(q.Raw), "LATE-RESULT") {
			t.Fatalf("the late result reached the LLM: %s", q.Raw)
		}
	}
}
