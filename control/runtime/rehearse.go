package runtime

// issue 18: rehearsals of saved conversations. A rehearsal runs the agent's definition (the
// current one or a pinned version) in text mode through the same engine that serves chats
// (session.Conversation.StartText / Send), with no conversation stored and no persister: the
// transcript stays in memory. Every HTTP or MCP tool call is answered by the saved mocks; no
// call reaches a real system.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Rehearsal is one saved conversation to rehearse.
type Rehearsal struct {
	OrgID        store.OrgID
	ProjectID    store.ProjectID
	AgentID      store.AgentID
	AgentVersion int        // 0: the current definition
	Mode         store.Mode // picks the providers (test: the test providers)
	Language     string
	Variables    map[string]any
	Turns        []string                     // the user's messages, in order
	Mocks        map[string][]json.RawMessage // results by tool name, used in order; the last repeats
	// Voice rehearses through the audio path (rehearse_voice.go): each turn is spoken with
	// espeak-ng into the engine, heard by the agent's STT, and the replies are synthesized by
	// its TTS, with turn-taking, endpointing and barge-in as in a call.
	Voice bool
	// DTMF are the keys pressed at each turn in a voice rehearsal (parallel to Turns; a turn
	// with keys and no text presses them instead of speaking).
	DTMF []string
	// BargeIn marks the voice turns spoken while the agent is still answering the turn before
	// (parallel to Turns).
	BargeIn []bool
	// Simulation, when set, replaces Turns: an LLM plays the user (simulate_user.go).
	Simulation *Simulation
}

// RehearsedCall is one tool call the agent made in a rehearsal.
type RehearsedCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Result    string          `json:"result"`
}

// RehearsalResult is what a rehearsal produced.
type RehearsalResult struct {
	Lines      []session.Line
	ToolCalls  []RehearsedCall
	Cost       session.Cost
	CostMicros int64 // priced as a chat
	Ended      bool  // the agent ended the conversation before the script did
}

// mockRunner answers the tool calls of a rehearsal from the saved mocks.
type mockRunner struct {
	mu    sync.Mutex
	mocks map[string][]json.RawMessage
	used  map[string]int
	calls []RehearsedCall
}

// Call answers with the next mock of the tool; a tool with no mock gets an error the LLM reads.
func (m *mockRunner) Call(_ context.Context, name string, args json.RawMessage) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	res := `{"error":"no mock result was saved for this tool"}`
	if ms := m.mocks[name]; len(ms) > 0 {
		i := min(m.used[name], len(ms)-1)
		m.used[name]++
		res = string(ms[i])
	}
	a := json.RawMessage(`{}`)
	if json.Valid(args) && len(args) > 0 {
		a = append(json.RawMessage(nil), args...)
	}
	m.calls = append(m.calls, RehearsedCall{Name: name, Arguments: a, Result: res})
	return res, nil
}

// RehearsalTools returns the names of the HTTP and MCP tools the agent's definition (current
// or version) gives its conversations: the tools a saved conversation may mock.
func (rt *Runtime) RehearsalTools(ctx context.Context, org store.OrgID, project store.ProjectID, agent store.AgentID, version int) ([]string, error) {
	def, err := rt.rehearsalDef(ctx, agent, version)
	if err != nil {
		return nil, err
	}
	var names []string
	if rt.o.Tools != nil && len(def.References.Tools) > 0 {
		specs, _, err := rt.o.Tools.Tools(ctx, store.Conversation{OrgID: org, ProjectID: project, Mode: store.ModeTest}, def.References.Tools)
		if err != nil {
			return nil, err
		}
		for _, s := range specs {
			names = append(names, s.Name)
		}
	}
	return names, nil
}

func (rt *Runtime) rehearsalDef(ctx context.Context, agent store.AgentID, version int) (*agentdef.Definition, error) {
	ag, err := rt.store.SystemAgents().GetIncludingDeleted(ctx, agent)
	if err != nil {
		return nil, fmt.Errorf("runtime: the rehearsal's agent: %w", err)
	}
	return LoadDefinition(ctx, rt.store.Queries, ag, version)
}

// Rehearse plays r's user turns to the agent, one message at a time, and returns the new
// transcript, the tool calls and the cost. It stops early when the agent ends the
// conversation. An LLM failure is an error wrapping ErrProvider.
func (rt *Runtime) Rehearse(ctx context.Context, r Rehearsal) (RehearsalResult, error) {
	def, err := rt.rehearsalDef(ctx, r.AgentID, r.AgentVersion)
	if err != nil {
		return RehearsalResult{}, err
	}
	a, err := AgentFor(def, r.Language, r.Variables)
	if err != nil {
		return RehearsalResult{}, err
	}
	provs := rt.o.Providers
	if r.Mode == store.ModeTest {
		provs = rt.o.TestProviders
	}
	if provs == nil {
		return RehearsalResult{}, fmt.Errorf("%w: no providers for %s conversations on this node", ErrProvider, r.Mode)
	}
	llmName := provider(def.Agent.LLM.Provider, rt.o.DefaultLLM)
	client, err := provs.LLM(llmName)
	if err != nil {
		return RehearsalResult{}, fmt.Errorf("%w: %v", ErrProvider, err)
	}
	if a.LLMModel == "" {
		a.LLMModel = rt.o.LLMModels[strings.ToLower(llmName)]
	}
	a.MaxTurns = 0
	a.MaxLLMFailures = 1 // a rehearsal does not retry a failed reply: the evaluation is an error
	runner := &mockRunner{mocks: r.Mocks, used: map[string]int{}}
	o := session.Options{ID: "rehearsal", Agent: a, LLM: client, Tools: runner, Log: rt.log}
	if rt.o.Tools != nil && len(def.References.Tools) > 0 {
		// The declarations only: the runner that would reach the tools is dropped.
		specs, _, err := rt.o.Tools.Tools(ctx, store.Conversation{OrgID: r.OrgID, ProjectID: r.ProjectID, AgentID: r.AgentID, Mode: store.ModeTest}, def.References.Tools)
		if err != nil {
			return RehearsalResult{}, fmt.Errorf("runtime: the rehearsal's tools: %w", err)
		}
		for i := range specs {
			specs[i].Filler = ""
		}
		o.Agent.Tools = append(o.Agent.Tools, specs...)
	}
	var out RehearsalResult
	next := scriptedTurns(r.Turns)
	if r.Simulation != nil {
		next = rt.simulatedUser(r.Simulation, client, a.LLMModel, &out)
	}
	if r.Voice {
		sttName, ttsName := provider(def.Agent.STT.Provider, rt.o.DefaultSTT), provider(def.Agent.TTS.Provider, rt.o.DefaultTTS)
		o.Vendors = session.Vendors{LLM: strings.ToLower(llmName), STT: strings.ToLower(sttName), TTS: strings.ToLower(ttsName)}
		if o.STT, err = provs.STT(sttName); err != nil {
			return RehearsalResult{}, fmt.Errorf("%w: %v", ErrProvider, err)
		}
		if o.TTS, err = provs.TTS(ttsName); err != nil {
			return RehearsalResult{}, fmt.Errorf("%w: %v", ErrProvider, err)
		}
		return rt.rehearseVoice(ctx, r, o, runner, next, &out)
	}
	sess, err := session.New(o)
	if err != nil {
		return RehearsalResult{}, err
	}
	if err := sess.StartText(ctx); err != nil {
		return RehearsalResult{}, err
	}
	defer sess.End(session.EndAPI)
	for i := 0; ; i++ {
		text, more, err := next(ctx, i, sess.Transcript())
		if err != nil {
			return RehearsalResult{}, err
		}
		if !more {
			break
		}
		t, err := sess.Send(ctx, text, nil, nil)
		if err != nil {
			if ctx.Err() != nil {
				return RehearsalResult{}, ctx.Err()
			}
			return RehearsalResult{}, fmt.Errorf("%w: the agent's reply failed: %v", ErrProvider, err)
		}
		if t.Ended {
			out.Ended = true
			break
		}
	}
	rt.rehearsalOutcome(sess, runner, store.ChannelChat, &out)
	return out, nil
}

// nextTurn gives the user's turn i of a rehearsal, seeing the transcript so far; more is
// false when the user has nothing more to say.
type nextTurn func(ctx context.Context, i int, lines []session.Line) (text string, more bool, err error)

// scriptedTurns gives the saved turns in order.
func scriptedTurns(turns []string) nextTurn {
	return func(_ context.Context, i int, _ []session.Line) (string, bool, error) {
		if i >= len(turns) {
			return "", false, nil
		}
		return turns[i], true, nil
	}
}

// rehearsalOutcome fills out with the engine's transcript, its cost (priced as channel, added
// to what out already holds: a simulated user's tokens) and the tool calls.
func (rt *Runtime) rehearsalOutcome(sess *session.Conversation, runner *mockRunner, channel string, out *RehearsalResult) {
	out.Lines = sess.Transcript()
	out.Cost = sess.Cost()
	out.CostMicros += rt.pricing.Micros(channel, out.Cost)
	runner.mu.Lock()
	out.ToolCalls = append(out.ToolCalls, runner.calls...)
	runner.mu.Unlock()
	// The engine's own tools (end_call, transfer, …) run without the runner: their lines say.
	for _, l := range out.Lines {
		if name, _ := l.Meta["tool"].(string); l.Role == session.RoleTool && name != "" && runner.mocks[name] == nil && !runner.called(name) {
			out.ToolCalls = append(out.ToolCalls, RehearsedCall{Name: name, Arguments: json.RawMessage(`{}`), Result: ""})
		}
	}
}

func (m *mockRunner) called(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.calls {
		if c.Name == name {
			return true
		}
	}
	return false
}

// PriceTokens prices LLM tokens used outside a conversation (an evaluation's judge) as a chat's.
func (rt *Runtime) PriceTokens(in, out int) int64 {
	return rt.pricing.Micros(store.ChannelChat, session.Cost{LLMInputTokens: in, LLMOutputTokens: out})
}
