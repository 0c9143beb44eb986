// Package evaluations is issue 18: saved conversations of an agent (evaluations) and the runs
// that rehearse them against the agent as it is now and judge each one. An evaluation is saved
// from a real conversation (its user turns and the tool results it received, which become the
// mocks) or written by hand (user turns and tool mocks by name); either carries criteria: a
// success condition in words, expected tool calls (checked deterministically) and things that
// must not happen. A run is a job (store.EvaluationRunKind): it rehearses every saved
// conversation in text mode through the engine that serves chats, with tool calls answered by
// the mocks, asks the agent's LLM to judge each against a fixed rubric (structured output
// checked against a schema, asked once more, then error), and stores per evaluation pass, fail
// or error with the differences from the saved transcript. Its cost is charged as testing.
//
// It must never import net/http.
package evaluations

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
)

// Channels of a saved conversation.
const (
	ChannelChat  = "chat"
	ChannelVoice = "voice"
)

// Outcomes of one evaluation in a run.
const (
	Pass  = "pass"
	Fail  = "fail"
	Error = "error"
)

// MaxPerRun bounds the saved conversations one run rehearses.
const MaxPerRun = 500

// Turn is one user turn of a script.
type Turn struct {
	Text string `json:"text,omitempty" doc:"What the user says." jsonschema:"maxLength=4000"`
	DTMF string `json:"dtmf,omitempty" doc:"Keys the user presses (in text mode: told to the agent as a message)." jsonschema:"pattern=^[0-9*#A-D]+$"`
	// BargeIn: in a voice rehearsal, the turn is spoken while the agent is still answering the
	// turn before (the engine's barge-in cuts it off, as a caller would).
	BargeIn bool `json:"barge_in,omitempty" doc:"Voice rehearsals: say this turn while the agent is still answering the one before, cutting it off (barge-in). Ignored in text mode and on the first turn."`
}

// ExpectedToolCall is a tool call the agent must make.
type ExpectedToolCall struct {
	Name      string                     `json:"name" doc:"The tool's name." jsonschema:"minLength=1,maxLength=128"`
	Arguments map[string]json.RawMessage `json:"arguments,omitempty" doc:"Arguments that must have exactly these values."`
	Patterns  map[string]string          `json:"argument_patterns,omitempty" doc:"Arguments (strings) that must match these regular expressions (RE2)."`
}

// Criteria say what success is.
type Criteria struct {
	Success           string             `json:"success" doc:"The success condition, in words, judged by the LLM." jsonschema:"minLength=1,maxLength=2000"`
	ExpectedToolCalls []ExpectedToolCall `json:"expected_tool_calls,omitempty" doc:"Tool calls the agent must make, checked deterministically, not by the LLM." jsonschema:"maxItems=20"`
	MustNot           []string           `json:"must_not,omitempty" doc:"Things that must not happen, each judged by the LLM." jsonschema:"maxItems=20"`
}

// Simulation is the third form of a saved conversation: an LLM plays the user from a persona
// and a goal, for at most max_turns turns.
type Simulation struct {
	Persona  string `json:"persona" doc:"Who the simulated user is (the LLM plays them)." jsonschema:"minLength=1,maxLength=2000"`
	Goal     string `json:"goal" doc:"What the simulated user wants from the agent; it stops once it is reached." jsonschema:"minLength=1,maxLength=2000"`
	MaxTurns int    `json:"max_turns,omitempty" doc:"At most this many user turns (default 10)." jsonschema:"minimum=1,maximum=30"`
}

// DefaultSimulatedTurns is a simulation's max_turns when left out.
const DefaultSimulatedTurns = 10

// EvaluationCreate is the body of POST /v1/agents/{agent_id}/evaluations.
type EvaluationCreate struct {
	Name           string                       `json:"name,omitempty" jsonschema:"maxLength=200"`
	ConversationID *string                      `json:"conversation_id,omitempty" doc:"Save this conversation of the agent: its user turns and DTMF become the script, the tool results it received the mocks." jsonschema:"format=uuid,nullable"`
	Turns          []Turn                       `json:"turns,omitempty" doc:"The user turns (written by hand; with conversation_id, left out)." jsonschema:"maxItems=100"`
	Mocks          map[string][]json.RawMessage `json:"mocks,omitempty" doc:"Tool results by tool name, given in order (the last one repeats). Added to those of the conversation."`
	Criteria       Criteria                     `json:"criteria"`
	Variables      json.RawMessage              `json:"variables,omitempty" doc:"Values of the agent's prompt variables (an object)." jsonschema:"type=object"`
	Language       string                       `json:"language,omitempty" doc:"The language version to rehearse; the agent's own when left out." jsonschema:"maxLength=35"`
	Channel        string                       `json:"channel,omitempty" doc:"chat (default) or voice: a voice run speaks the turns." jsonschema:"enum=chat,enum=voice"`
	Simulation     *Simulation                  `json:"simulation,omitempty" doc:"Instead of turns: an LLM plays the user from a persona and a goal, for at most max_turns turns." jsonschema:"nullable"`
}

// SchemaDoc describes the body.
func (EvaluationCreate) SchemaDoc() string {
	return "A saved conversation: from a real conversation (conversation_id) or written by hand (turns and mocks), with the criteria of success."
}

// SavedLine is one line of the saved transcript.
type SavedLine struct {
	Role string `json:"role" jsonschema:"enum=user,enum=agent,enum=tool"`
	Text string `json:"text"`
	// Interrupted: an agent line the user cut off (voice); Text is what was played.
	Interrupted bool `json:"interrupted,omitempty" doc:"An agent line the user cut off (a voice rehearsal): text is what was played before."`
}

// SavedCall is a tool call of the saved conversation.
type SavedCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments" jsonschema:"type=object"`
}

// spec is the stored document.
type spec struct {
	Turns      []Turn                       `json:"turns"`
	Mocks      map[string][]json.RawMessage `json:"mocks"`
	Criteria   Criteria                     `json:"criteria"`
	Variables  json.RawMessage              `json:"variables"`
	Language   string                       `json:"language"`
	Channel    string                       `json:"channel"`
	Transcript []SavedLine                  `json:"transcript"`
	ToolCalls  []SavedCall                  `json:"tool_calls"`
	Simulation *Simulation                  `json:"simulation,omitempty"`
}

// Evaluation is a saved conversation of an agent.
type Evaluation struct {
	Object         string                       `json:"object" jsonschema:"enum=evaluation"`
	ID             string                       `json:"id" jsonschema:"format=uuid"`
	ProjectID      string                       `json:"project_id" jsonschema:"format=uuid"`
	AgentID        string                       `json:"agent_id" jsonschema:"format=uuid"`
	Name           string                       `json:"name"`
	ConversationID *string                      `json:"conversation_id" jsonschema:"format=uuid,nullable"`
	Turns          []Turn                       `json:"turns"`
	Mocks          map[string][]json.RawMessage `json:"mocks"`
	Criteria       Criteria                     `json:"criteria"`
	Variables      json.RawMessage              `json:"variables" jsonschema:"type=object"`
	Language       string                       `json:"language"`
	Channel        string                       `json:"channel" jsonschema:"enum=chat,enum=voice"`
	Transcript     []SavedLine                  `json:"transcript" doc:"The saved conversation's transcript (empty when written by hand)."`
	Simulation     *Simulation                  `json:"simulation" doc:"The simulated user, for the third form (null otherwise)." jsonschema:"nullable"`
	CreatedAt      app.Time                     `json:"created_at"`
}

// SchemaDoc describes the object.
func (Evaluation) SchemaDoc() string {
	return "A saved conversation of an agent, rehearsed by evaluation runs."
}

func view(e store.Evaluation) Evaluation {
	var sp spec
	_ = json.Unmarshal(e.Spec, &sp)
	out := Evaluation{Object: "evaluation", ID: string(e.ID), ProjectID: string(e.ProjectID), AgentID: string(e.AgentID), Name: e.Name,
		Turns: orEmpty(sp.Turns), Mocks: sp.Mocks, Criteria: sp.Criteria, Variables: sp.Variables, Language: sp.Language, Channel: sp.Channel,
		Transcript: orEmpty(sp.Transcript), Simulation: sp.Simulation, CreatedAt: app.T(e.CreatedAt)}
	if out.Mocks == nil {
		out.Mocks = map[string][]json.RawMessage{}
	}
	if len(out.Variables) == 0 {
		out.Variables = json.RawMessage(`{}`)
	}
	if e.ConversationID != "" {
		c := string(e.ConversationID)
		out.ConversationID = &c
	}
	return out
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Engine is what evaluations need of the runtime (*runtime.Runtime).
type Engine interface {
	RehearsalTools(ctx context.Context, org store.OrgID, project store.ProjectID, agent store.AgentID, version int) ([]string, error)
	Rehearse(ctx context.Context, r runtime.Rehearsal) (runtime.RehearsalResult, error)
	AnalysisLLM(c store.Conversation, def *agentdef.Definition) (llm.Client, string, error)
}

// Service saves evaluations and runs them.
type Service struct {
	Store  *store.Store
	Engine Engine
	// Concurrency bounds the rehearsals of a run in flight at once (default 4), so that live
	// calls keep their latency while a run goes on.
	Concurrency int
	Now         func() time.Time
	Log         *slog.Logger
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

func agentOf(ctx context.Context, q *store.Queries, act app.Actor, raw string) (store.Agent, error) {
	id, _ := store.ParseID[store.AgentID](raw)
	a, err := q.Agents().Get(ctx, act.Scope, id)
	return a, app.NotFound(err, fault.CodeAgentNotFound, "agent", raw)
}

// List returns a page of the agent's saved conversations, oldest first.
func (s *Service) List(ctx context.Context, act app.Actor, agentID string, pg store.Page) ([]Evaluation, error) {
	a, err := agentOf(ctx, s.Store.Queries, act, agentID)
	if err != nil {
		return nil, err
	}
	es, err := s.Store.Evaluations().List(ctx, act.Scope, a.ID, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Evaluation, len(es))
	for i, e := range es {
		out[i] = view(e)
	}
	return out, nil
}

// Create saves a conversation of the agent.
func (s *Service) Create(ctx context.Context, act app.Actor, agentID string, in EvaluationCreate) (Evaluation, error) {
	sp := spec{Turns: in.Turns, Mocks: in.Mocks, Criteria: in.Criteria, Variables: in.Variables, Language: in.Language, Channel: in.Channel, Simulation: in.Simulation}
	if sim := sp.Simulation; sim != nil {
		if len(sp.Turns) > 0 || (in.ConversationID != nil && *in.ConversationID != "") {
			return Evaluation{}, fault.Invalid(fault.CodeValidationFailed, []fault.FieldError{{Pointer: "/simulation", Code: "oneOf",
				Detail: "A simulated user says its own turns: give simulation, or turns or conversation_id, not both."}})
		}
		if strings.TrimSpace(sim.Persona) == "" || strings.TrimSpace(sim.Goal) == "" {
			return Evaluation{}, fault.Invalid(fault.CodeValidationFailed, []fault.FieldError{{Pointer: "/simulation", Code: "required", Detail: "A simulation has a persona and a goal."}})
		}
		if sim.MaxTurns == 0 {
			sim.MaxTurns = DefaultSimulatedTurns
		}
	}
	if sp.Channel == "" {
		sp.Channel = ChannelChat
	}
	if sp.Mocks == nil {
		sp.Mocks = map[string][]json.RawMessage{}
	}
	if len(sp.Variables) == 0 || string(sp.Variables) == "null" {
		sp.Variables = json.RawMessage(`{}`)
	}
	for i, t := range sp.Turns {
		if t.Text == "" && t.DTMF == "" {
			return Evaluation{}, fault.Invalid(fault.CodeValidationFailed, []fault.FieldError{{Pointer: fmt.Sprintf("/turns/%d", i), Code: "required", Detail: "A turn has text or dtmf."}})
		}
	}
	for i, x := range sp.Criteria.ExpectedToolCalls {
		for k, p := range x.Patterns {
			if _, err := regexp.Compile(p); err != nil {
				return Evaluation{}, fault.Invalid(fault.CodeValidationFailed, []fault.FieldError{{Pointer: fmt.Sprintf("/criteria/expected_tool_calls/%d/argument_patterns/%s", i, k), Code: "pattern", Detail: "Not a regular expression: " + err.Error()}})
			}
		}
	}
	var convID store.ConversationID
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Evaluation, error) {
		a, err := agentOf(ctx, tx.Queries, act, agentID)
		if err != nil {
			return Evaluation{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, a.ProjectID); err != nil {
			return Evaluation{}, err
		}
		if in.ConversationID != nil && *in.ConversationID != "" {
			c, err := tx.Conversations().Get(ctx, act.Scope, store.ConversationID(*in.ConversationID))
			if err == nil && c.AgentID != a.ID {
				err = store.ErrNotFound // another agent's conversation is not this agent's to save
			}
			if err != nil {
				return Evaluation{}, app.NotFound(err, fault.CodeConversationNotFound, "conversation", *in.ConversationID)
			}
			if sp.Channel == ChannelVoice && c.Channel != store.ChannelPhone && c.Channel != "voice" {
				return Evaluation{}, fault.E(fault.CodeEvaluationChannel, "The conversation %s was a %s: its turns were typed, so it cannot be saved for a voice run; save it with channel chat.", c.ID, c.Channel)
			}
			if err := fromConversation(ctx, tx.Queries, c, &sp); err != nil {
				return Evaluation{}, err
			}
			convID = c.ID
		}
		if len(sp.Turns) == 0 && sp.Simulation == nil {
			return Evaluation{}, fault.E(fault.CodeEvaluationEmpty, "The saved conversation has no user turn: give conversation_id, turns or simulation.")
		}
		if err := s.checkMocks(ctx, a, sp.Mocks); err != nil {
			return Evaluation{}, err
		}
		doc, err := json.Marshal(sp)
		if err != nil {
			return Evaluation{}, err
		}
		e, err := tx.Evaluations().Create(ctx, store.Evaluation{OrgID: a.OrgID, ProjectID: a.ProjectID, AgentID: a.ID, Name: in.Name, ConversationID: convID, Spec: doc})
		if err != nil {
			return Evaluation{}, err
		}
		if err := au.Record("evaluation.created", "evaluation", string(e.ID), e.ProjectID, map[string]any{"agent_id": a.ID, "turns": len(sp.Turns)}); err != nil {
			return Evaluation{}, err
		}
		return view(e), nil
	})
}

// checkMocks refuses mocks of tools the agent's conversations do not have (422 unknown_mock_tool).
func (s *Service) checkMocks(ctx context.Context, a store.Agent, mocks map[string][]json.RawMessage) error {
	if len(mocks) == 0 {
		return nil
	}
	var known []string
	if s.Engine != nil {
		var err error
		if known, err = s.Engine.RehearsalTools(ctx, a.OrgID, a.ProjectID, a.ID, 0); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(mocks))
	for n := range mocks {
		names = append(names, n)
	}
	sort.Strings(names)
	var fes []fault.FieldError
	for _, n := range names {
		if !slices.Contains(known, n) {
			fes = append(fes, fault.FieldError{Pointer: "/mocks/" + strings.ReplaceAll(strings.ReplaceAll(n, "~", "~0"), "/", "~1"), Code: fault.CodeUnknownMockTool,
				Detail: fmt.Sprintf("The agent's conversations have no tool %q (its definition's references.tools give them the tools they call).", n)})
		}
		if len(mocks[n]) == 0 {
			fes = append(fes, fault.FieldError{Pointer: "/mocks/" + n, Code: "minItems", Detail: "A mock gives at least one result."})
		}
	}
	if len(fes) > 0 {
		return fault.Invalid(fault.CodeUnknownMockTool, fes)
	}
	return nil
}

// fromConversation fills the script from a stored conversation: its user turns, the keys
// pressed, the tool results it received (as mocks, in order) and the transcript.
func fromConversation(ctx context.Context, q *store.Queries, c store.Conversation, sp *spec) error {
	lines, err := q.AllLines(ctx, c.ID)
	if err != nil {
		return err
	}
	var turns []Turn
	mocks := map[string][]json.RawMessage{}
	for _, l := range lines {
		var meta map[string]any
		_ = json.Unmarshal(l.Meta, &meta)
		switch l.Role {
		case "user":
			if d, _ := meta["dtmf"].(string); d != "" {
				if n := len(turns); n > 0 && turns[n-1].Text == "" { // keys pressed in a row are one turn
					turns[n-1].DTMF += d
				} else {
					turns = append(turns, Turn{DTMF: d})
				}
				continue
			}
			turns = append(turns, Turn{Text: l.Text})
			sp.Transcript = append(sp.Transcript, SavedLine{Role: "user", Text: l.Text})
		case "agent":
			sp.Transcript = append(sp.Transcript, SavedLine{Role: "agent", Text: l.Text})
		case "tool":
			name, _ := meta["tool"].(string)
			if name == "" {
				continue
			}
			args, res := splitToolLine(name, l.Text)
			sp.ToolCalls = append(sp.ToolCalls, SavedCall{Name: name, Arguments: args})
			sp.Transcript = append(sp.Transcript, SavedLine{Role: "tool", Text: l.Text})
			if st, _ := meta["status"].(string); st == "ok" || st == "mock" {
				mocks[name] = append(mocks[name], res)
			}
		}
	}
	sp.Turns = append(turns, sp.Turns...)
	for n, ms := range sp.Mocks { // mocks given by hand come after (and so override the repeat of) the saved ones
		mocks[n] = append(mocks[n], ms...)
	}
	for n, ms := range mocks {
		if !isEngineTool(n) {
			sp.Mocks[n] = ms
		} else {
			delete(sp.Mocks, n)
		}
	}
	return nil
}

func isEngineTool(name string) bool {
	switch name {
	case session.ToolEndCall, session.ToolTransfer, session.ToolSendDTMF, session.ToolKnowledge:
		return true
	}
	return false
}

// splitToolLine reads a tool line of the engine, "name(arguments) → result".
func splitToolLine(name, text string) (json.RawMessage, json.RawMessage) {
	rest := strings.TrimPrefix(text, name+"(")
	i := strings.Index(rest, ") → ")
	if i < 0 {
		return json.RawMessage(`{}`), jsonString(text)
	}
	args, res := json.RawMessage(rest[:i]), strings.TrimSpace(rest[i+len(") → "):])
	if !json.Valid(args) {
		args = json.RawMessage(`{}`)
	}
	if json.Valid([]byte(res)) {
		return args, json.RawMessage(res)
	}
	return args, jsonString(res)
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// Delete removes a saved conversation of the agent.
func (s *Service) Delete(ctx context.Context, act app.Actor, agentID, id string) (EvaluationDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (EvaluationDeleted, error) {
		a, err := agentOf(ctx, tx.Queries, act, agentID)
		if err != nil {
			return EvaluationDeleted{}, err
		}
		if err := app.WritableProject(ctx, tx.Queries, act, a.ProjectID); err != nil {
			return EvaluationDeleted{}, err
		}
		e, err := tx.Evaluations().Delete(ctx, act.Scope, a.ID, store.EvaluationID(id))
		if err != nil {
			return EvaluationDeleted{}, app.NotFound(err, fault.CodeEvaluationNotFound, "saved conversation", id)
		}
		if err := au.Record("evaluation.deleted", "evaluation", string(e.ID), e.ProjectID, nil); err != nil {
			return EvaluationDeleted{}, err
		}
		return EvaluationDeleted{Object: "evaluation", ID: string(e.ID), Deleted: true}, nil
	})
}

// EvaluationDeleted is the answer of deleteEvaluation.
type EvaluationDeleted struct {
	Object  string `json:"object" jsonschema:"enum=evaluation"`
	ID      string `json:"id" jsonschema:"format=uuid"`
	Deleted bool   `json:"deleted" doc:"Always true."`
}

// SchemaExtras: deleted is the constant true.
func (EvaluationDeleted) SchemaExtras() map[string]any {
	return map[string]any{"properties": map[string]any{
		"object": map[string]any{"const": "evaluation"}, "id": map[string]any{"type": "string", "format": "uuid"}, "deleted": map[string]any{"const": true},
	}}
}
