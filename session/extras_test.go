package session

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

// The maximum duration ends the call and hangs up.
func TestMaxDuration(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", MaxDuration: 400 * time.Millisecond}})
	select {
	case <-r.conv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("max duration did not end the call")
	}
	if r.conv.EndReason() != EndMaxDuration || len(r.port.hangups) != 1 {
		t.Fatalf("end %q hangups %v", r.conv.EndReason(), r.port.hangups)
	}
}

// The end-of-call phrase ends the call once it has been spoken, not before.
func TestEndPhrase(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", EndPhrase: "goodbye"},
		turns: []fakes.ScriptTurn{{Text: "Thanks for calling, goodbye."}}, dgScript: []string{"that is all"}})
	r.caller.say(speech(t, "That is all"))
	select {
	case <-r.conv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("end phrase did not end the call")
	}
	if r.conv.EndReason() != EndAgentEnded {
		t.Fatalf("end %q", r.conv.EndReason())
	}
	ag := r.lines(RoleAgent)
	if len(ag) != 1 || ag[0].Text != "Thanks for calling, goodbye." || ag[0].Interrupted {
		t.Fatalf("the goodbye was not spoken whole before the end: %+v", ag)
	}
}

// While a slow tool runs the agent says a filler line; the answer follows the tool's result.
func TestFillerDuringSlowTool(t *testing.T) {
	slow := toolFunc(func(ctx context.Context, name string, args json.RawMessage) (string, error) {
		select {
		case <-time.After(900 * time.Millisecond):
		case <-ctx.Done():
		}
		return `{"balance":"42 euros"}`, nil
	})
	r := newRig(t, rigOptions{
		agent: Agent{SystemPrompt: "x", Fillers: []string{"One moment while I check."}, FillerAfter: 200 * time.Millisecond,
			Tools: []ToolSpec{{Name: "balance", Parameters: json.RawMessage(`{"type":"object"}`)}}},
		turns:    []fakes.ScriptTurn{{ToolCalls: []fakes.ScriptToolCall{{Name: "balance"}}}, {Text: "Your balance is 42 euros."}},
		dgScript: []string{"what is my balance"}, tools: slow,
	})
	r.caller.say(speech(t, "What is my balance?"))
	waitFor(t, 10*time.Second, "answer", func() bool {
		for _, l := range r.lines(RoleAgent) {
			if l.Text == "Your balance is 42 euros." {
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
	if !strings.Contains(joined, "One moment while I check.") || strings.Index(joined, "One moment") > strings.Index(joined, "42 euros") {
		t.Fatalf("filler not spoken before the answer: %q", joined)
	}
	for _, l := range r.lines(RoleAgent) {
		if strings.Contains(l.Text, "One moment") {
			t.Fatalf("a filler is not a transcript line: %+v", l)
		}
	}
}

// DTMF: digits from the caller reach the conversation; the agent presses keys through the port.
func TestDTMFBothWays(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", Tools: []ToolSpec{{Name: ToolSendDTMF}}},
		turns:    []fakes.ScriptTurn{{Text: "Pressing one.", ToolCalls: []fakes.ScriptToolCall{{Name: ToolSendDTMF, Args: json.RawMessage(`{"digits":"1#"}`)}}}, {Text: "Done."}},
		dgScript: []string{"press one for me"}})
	r.conv.PushDTMF('5')
	waitFor(t, 5*time.Second, "dtmf line", func() bool {
		for _, l := range r.lines(RoleUser) {
			if l.Meta["dtmf"] == "5" {
				return true
			}
		}
		return false
	})
	r.caller.say(speech(t, "Press one for me"))
	waitFor(t, 10*time.Second, "agent pressed keys", func() bool {
		r.port.mu.Lock()
		defer r.port.mu.Unlock()
		return len(r.port.dtmf) == 1 && r.port.dtmf[0] == "1#"
	})
}

// TestDTMFEndsTurn: issue 22 item 5: keypad digits alone get a reply: the terminator ends the
// turn at once, the inter-digit timeout ends it otherwise.
func TestDTMFEndsTurn(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", Turn: TurnSettings{DTMFTerminator: "#", DTMFTimeout: 400 * time.Millisecond}},
		turns: []fakes.ScriptTurn{{Text: "You chose one."}, {Text: "You chose two."}}})
	agentSaid := func(text string) func() bool {
		return func() bool {
			for _, l := range r.lines(RoleAgent) {
				if strings.Contains(l.Text, text) {
					return true
				}
			}
			return false
		}
	}
	r.conv.PushDTMF('1')
	r.conv.PushDTMF('#')
	start := time.Now()
	waitFor(t, 5*time.Second, "the reply to 1#", agentSaid("You chose one."))
	t.Logf("reply to 1# after %v", time.Since(start))
	r.conv.PushDTMF('2')
	start = time.Now()
	waitFor(t, 5*time.Second, "the reply to 2 after the inter-digit timeout", agentSaid("You chose two."))
	if el := time.Since(start); el < 400*time.Millisecond {
		t.Errorf("the turn of 2 ended after %v, before the inter-digit timeout", el)
	}
}
