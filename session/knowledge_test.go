package session

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

// shelf is a TurnKnowledge over a few fixed passages (the control plane's retrieval is tested
// in control/app/knowledge and control/api); it records the goroutines it was called on.
type shelf struct {
	mu      sync.Mutex
	queries []string
	stacks  []string
}

func (s *shelf) Retrieve(ctx context.Context, q string) (Retrieval, error) {
	buf := make([]byte, 8<<10)
	n := runtime.Stack(buf, false)
	s.mu.Lock()
	s.queries = append(s.queries, q)
	s.stacks = append(s.stacks, string(buf[:n]))
	s.mu.Unlock()
	return Retrieval{Context: "Knowledge:\n[1] Opening hours: the restaurant opens at 18:00 on Sundays.",
		Chunks: []RetrievedChunk{{ID: "c1", DocumentID: "d1", Source: "hours.pdf, page 2", Score: 1}}}, nil
}

func (s *shelf) Lookup(ctx context.Context, q string) (string, error) { return `{"results":[]}`, nil }

// TestVoiceTurnWithKnowledge: with knowledge mode auto, the caller's final words are looked up
// before the LLM request, off the media goroutine; the request holds the chunk, the transcript
// records what was retrieved, and the turn's metrics time it inside Parley's share.
func TestVoiceTurnWithKnowledge(t *testing.T) {
	k := &shelf{}
	r := newRig(t, rigOptions{
		agent:    Agent{SystemPrompt: "You answer questions about the restaurant.", LLMModel: "gpt-test", KnowledgeAuto: true, Tools: []ToolSpec{{Name: ToolKnowledge}}},
		turns:    []fakes.ScriptTurn{{Text: "We open at six on Sundays."}},
		dgScript: []string{"when do you open on sunday"},
		dgFinal:  30 * time.Millisecond,
		know:     k,
	})
	r.caller.say(speech(t, "When do you open on Sunday"))
	waitFor(t, 10*time.Second, "reply played", func() bool { return len(r.lines(RoleAgent)) == 1 })
	reqs := r.chat.Requests()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Raw), "opens at 18:00 on Sundays") || !strings.Contains(string(reqs[0].Raw), ToolKnowledge) {
		t.Fatalf("the LLM request lacks the retrieved chunk or the lookup tool: %s", reqs[0].Raw)
	}
	k.mu.Lock()
	if len(k.queries) != 1 || k.queries[0] != "when do you open on sunday" {
		t.Fatalf("queries %q", k.queries)
	}
	if st := k.stacks[0]; strings.Contains(st, "PushFrame") || !strings.Contains(st, "respond") {
		t.Fatalf("retrieval ran outside the reply goroutine:\n%s", st)
	}
	k.mu.Unlock()
	lines := r.conv.Transcript()
	var roles []string
	var tool Line
	for _, l := range lines {
		roles = append(roles, string(l.Role))
		if l.Role == RoleTool {
			tool = l
		}
	}
	if strings.Join(roles, ",") != "user,tool,agent" {
		t.Fatalf("roles %v", roles)
	}
	chunks, _ := tool.Meta["chunks"].([]RetrievedChunk)
	if tool.Meta["tool"] != ToolKnowledge || len(chunks) != 1 || chunks[0].ID != "c1" || tool.Meta["took_ms"] == nil {
		t.Fatalf("tool line %+v", tool)
	}
	m := r.conv.Turns()[0]
	if m.KnowledgeStart.IsZero() || m.KnowledgeDone.Before(m.KnowledgeStart) || m.KnowledgeStart.Before(m.EndOfTurn) || m.LLMRequestSent.Before(m.KnowledgeDone) {
		t.Fatalf("knowledge not timed between the end of turn and the request: %+v", m)
	}
}
