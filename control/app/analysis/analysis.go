// Package analysis is the post-call analysis of conversations (issue 14): once a conversation
// ends, the agent's LLM fills the agent's analysis_schema (when analysis is enabled) and its
// collected_schema (when it collects fields) from the transcript, each through a forced tool
// call. Each answer is checked against its schema and asked for once more when it does not
// fit; what fits is stored on the conversation (analysis, collected), conversation.analyzed is
// sent, and form.abandoned when a form-filling conversation left a required field unfilled. The
// tokens are charged to the credit.
//
// It runs as a job (runtime.AnalyzeJobKind) queued with the conversation's end, or again by
// POST /v1/conversations/{id}/analysis. It must never import net/http.
package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/conversations"
	"github.com/parley-voice/parley/control/app/events"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session/llm"
)

// Engine is what the analysis needs of the runtime (*runtime.Runtime).
type Engine interface {
	AnalysisLLM(c store.Conversation, def *agentdef.Definition) (llm.Client, string, error)
	ChargeLLM(ctx context.Context, tx *store.Tx, c store.Conversation, what string, in, out int) error
}

// Completer completes the analysis job in the transaction that stores its result (*jobs.Job).
type Completer interface {
	CompleteIn(ctx context.Context, tx *store.Tx) error
}

// Service runs and requests analyses.
type Service struct {
	Store  *store.Store
	Engine Engine
	Now    func() time.Time
	Log    *slog.Logger
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

type payload struct {
	ConversationID store.ConversationID `json:"conversation_id"`
}

// Request queues the analysis of the actor's ended conversation again and answers the
// conversation as it is (409 conversation_not_ended while it is in progress).
func (s *Service) Request(ctx context.Context, act app.Actor, id string) (conversations.Conversation, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (conversations.Conversation, error) {
		c, err := tx.Conversations().Get(ctx, act.Scope, store.ConversationID(id))
		if err != nil {
			return conversations.Conversation{}, app.NotFound(err, fault.CodeConversationNotFound, "conversation", id)
		}
		if !c.Ended() {
			return conversations.Conversation{}, fault.E(fault.CodeConversationNotEnded, "The conversation is %s; it is analyzed once it has ended.", strings.ReplaceAll(c.Status, "_", " "))
		}
		if err := app.WritableProject(ctx, tx.Queries, act, c.ProjectID); err != nil {
			return conversations.Conversation{}, err
		}
		b, _ := json.Marshal(payload{c.ID})
		if _, _, err := tx.EnqueueJob(ctx, store.NewJob{Kind: runtime.AnalyzeJobKind, Payload: b, MaxAttempts: 5}); err != nil {
			return conversations.Conversation{}, err
		}
		if err := au.Record("conversation.analysis_requested", "conversation", string(c.ID), c.ProjectID, nil); err != nil {
			return conversations.Conversation{}, err
		}
		return conversations.View(c), nil
	})
}

// ErrNoFit says the LLM's answer did not fit the schema, twice.
var ErrNoFit = errors.New("analysis: the answer does not fit the schema")

// Run is the job handler's work: the analysis of the conversation the payload names.
func (s *Service) Run(ctx context.Context, j Completer, raw json.RawMessage) error {
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil || p.ConversationID == "" {
		return fmt.Errorf("analysis: payload %s: %w", raw, store.ErrInvalid)
	}
	c, err := s.Store.GetConversation(ctx, p.ConversationID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	if c.Deleted() || !c.Ended() {
		return nil
	}
	ag, err := s.Store.GetAgent(ctx, c.AgentID)
	if err != nil {
		return err
	}
	def, err := runtime.LoadDefinition(ctx, s.Store.Queries, ag, c.AgentVersion)
	if err != nil {
		return err
	}
	lines, err := s.Store.AllLines(ctx, c.ID)
	if err != nil {
		return err
	}
	client, model, err := s.Engine.AnalysisLLM(c, def)
	if err != nil {
		return err
	}
	transcript := transcriptText(lines)
	var used usage
	var analysis, collected json.RawMessage
	if def.Agent.Analysis.Enabled {
		schema := withRequired(def.AnalysisSchema(), def.Agent.Analysis.Fields, def.Agent.Analysis.Summary, def.Agent.Analysis.SuccessCriteria != "")
		prompt := "Analyze the finished conversation below and call record_analysis with what it shows."
		if sc := def.Agent.Analysis.SuccessCriteria; sc != "" {
			prompt += " successful is whether it met these success criteria: " + sc
		}
		if analysis, err = s.fill(ctx, client, model, "record_analysis", prompt, transcript, schema, &used); err != nil {
			return s.charged(ctx, c, used, err)
		}
	}
	var missing []string
	if len(def.Agent.Collected) > 0 {
		schema := def.CollectedSchema()
		prompt := "From the finished conversation below, call record_collected with the values the caller gave for these fields; leave out a field the caller did not give."
		if collected, err = s.fill(ctx, client, model, "record_collected", prompt, transcript, schema, &used); err != nil {
			return s.charged(ctx, c, used, err)
		}
		var got map[string]any
		_ = json.Unmarshal(collected, &got)
		for _, f := range def.Agent.Collected {
			if _, ok := got[f.Name]; f.Required && !ok {
				missing = append(missing, f.Name)
			}
		}
	}
	return s.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.SetConversationAnalysis(ctx, c.ID, analysis, collected, s.now()); err != nil {
			return err
		}
		if err := s.Engine.ChargeLLM(ctx, tx, c, "Post-call analysis", used.in, used.out); err != nil {
			return err
		}
		done, err := tx.GetConversation(ctx, c.ID)
		if err != nil {
			return err
		}
		if _, err := events.Emit(ctx, tx, events.Of(events.ConversationAnalyzed, done), events.ConversationOf(done)); err != nil {
			return err
		}
		if def.Agent.Kind == agentdef.KindFormFilling && len(missing) > 0 {
			var er *string
			if done.EndReason != "" {
				r := done.EndReason
				er = &r
			}
			if _, err := events.Emit(ctx, tx, events.Of(events.FormAbandoned, done), events.FormAbandonedData{Object: "form_abandoned",
				ConversationID: string(done.ID), AgentID: string(done.AgentID), EndReason: er, Collected: collected, Missing: missing}); err != nil {
				return err
			}
		}
		return j.CompleteIn(ctx, tx)
	})
}

// charged charges what failed work used, then returns err.
func (s *Service) charged(ctx context.Context, c store.Conversation, used usage, err error) error {
	if used.in+used.out > 0 {
		if cerr := s.Store.Tx(ctx, func(tx *store.Tx) error {
			return s.Engine.ChargeLLM(ctx, tx, c, "Post-call analysis (failed)", used.in, used.out)
		}); cerr != nil {
			s.log().WarnContext(ctx, "analysis: cannot charge the tokens of a failed analysis", "conversation", c.ID, "err", cerr)
		}
	}
	return err
}

type usage struct{ in, out int }

// fill asks the model to call tool with arguments fitting schema, and asks once more when the
// answer does not fit. It returns the fitting arguments.
func (s *Service) fill(ctx context.Context, client llm.Client, model, tool, prompt, transcript string, schema map[string]any, used *usage) (json.RawMessage, error) {
	v, err := jsoncheck.Compile(map[string]any{"https://parley.dev/analysis.json": schema}, "https://parley.dev/analysis.json")
	if err != nil {
		return nil, fmt.Errorf("analysis: schema: %w", err)
	}
	params, _ := json.Marshal(toolSchema(schema))
	req := llm.Request{Model: model, System: "You work out facts from finished conversations. Answer only by calling the tool " + tool + ".",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: prompt + "\n\nTranscript:\n" + transcript}},
		Tools:    []llm.Tool{{Name: tool, Description: "Records what the conversation shows.", Parameters: params}}, ToolChoice: tool, MaxTokens: 1024}
	var last []jsoncheck.Problem
	for attempt := 1; attempt <= 2; attempt++ {
		call, text, err := ask(ctx, client, req, used)
		if err != nil {
			return nil, err
		}
		args := call.Arguments
		if call.Name == "" {
			args = json.RawMessage(strings.TrimSpace(text)) // a model that answered in text
		}
		val, derr := jsoncheck.Decode(args)
		if derr == nil {
			if last = v.Validate(val); len(last) == 0 {
				return args, nil
			}
		} else {
			last = []jsoncheck.Problem{{Code: jsoncheck.CodeMalformed, Detail: derr.Error()}}
		}
		s.log().InfoContext(ctx, "analysis: the answer does not fit the schema", "tool", tool, "attempt", attempt, "problems", len(last))
		id := call.ID
		if id == "" {
			id = "call_1"
		}
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: tool, Arguments: orObject(args)}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: "That does not fit the schema: " + problemsText(last) + " Call " + tool + " again with arguments that fit."})
	}
	return nil, fmt.Errorf("%w: %s", ErrNoFit, problemsText(last))
}

// ask sends one request and reads the reply: the first tool call, or the text.
func ask(ctx context.Context, client llm.Client, req llm.Request, used *usage) (llm.ToolCall, string, error) {
	st, err := client.Stream(ctx, req)
	if err != nil {
		return llm.ToolCall{}, "", err
	}
	defer st.Close()
	var call llm.ToolCall
	var text strings.Builder
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return call, text.String(), nil
		}
		if err != nil {
			return llm.ToolCall{}, "", err
		}
		switch ev.Kind {
		case llm.TextDelta:
			text.WriteString(ev.Text)
		case llm.ToolCallEvent:
			if call.Name == "" {
				call = ev.ToolCall
			}
		case llm.Done:
			used.in += ev.Usage.InputTokens
			used.out += ev.Usage.OutputTokens
		}
	}
}

func orObject(b json.RawMessage) json.RawMessage {
	if json.Valid(b) && len(b) > 0 && b[0] == '{' {
		return b
	}
	return json.RawMessage(`{}`)
}

func problemsText(ps []jsoncheck.Problem) string {
	var parts []string
	for i, p := range ps {
		if i == 5 {
			break
		}
		parts = append(parts, p.Detail)
	}
	return strings.Join(parts, " ")
}

// withRequired makes the analysis schema ask for every field marked required, and for summary
// and successful when the agent has them.
func withRequired(schema map[string]any, fs []agentdef.Field, summary, successful bool) map[string]any {
	var req []any
	if summary {
		req = append(req, "summary")
	}
	if successful {
		req = append(req, "successful")
	}
	for _, f := range fs {
		if f.Required {
			req = append(req, f.Name)
		}
	}
	if len(req) > 0 {
		schema["required"] = req
	}
	return schema
}

// toolSchema is the schema as tool parameters: without $schema and the service's own keywords.
func toolSchema(schema map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range schema {
		if k == "$schema" {
			continue
		}
		if k == "properties" {
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				pm := map[string]any{}
				for pk, pv := range p.(map[string]any) {
					if !strings.HasPrefix(pk, "x-") {
						pm[pk] = pv
					}
				}
				props[name] = pm
			}
			v = props
		}
		out[k] = v
	}
	return out
}

// transcriptText is the transcript as the model reads it: one "role: text" line each.
func transcriptText(ls []store.ConversationLine) string {
	var b strings.Builder
	for _, l := range ls {
		if l.Role == "tool" || l.Role == "system" {
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", l.Role, l.Text)
	}
	return b.String()
}
