package session

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/parley-voice/parley/session/llm"
)

// Hand-over between specialists (issue 16, item 3): a desk agent (definition kind desk) routes
// the conversation to one of its specialists by calling the built-in tool ToolHandOver. From
// then on the conversation speaks with the specialist's system prompt and voice, and its
// knowledge is narrowed to the specialist's bases. The call and its result are a tool line of
// the transcript, like every tool call, with the specialist in the line's meta.

// ToolHandOver is the built-in tool a desk's model calls to pass the conversation to a
// specialist.
const ToolHandOver = "hand_over"

// Specialist is one specialist of a desk agent.
type Specialist struct {
	Name         string
	Description  string // when the desk hands over to it (told to the model)
	SystemPrompt string // may hold {{placeholders}}, filled from the conversation's variables
	Voice        string // the TTS voice; "" keeps the agent's
}

// SpecialistKnowledge is a Knowledge that narrows to a specialist's bases: after
// UseSpecialist(name), lookups (auto and knowledge_lookup) search that specialist's bases.
type SpecialistKnowledge interface {
	Knowledge
	UseSpecialist(ctx context.Context, name string) error
}

// activeSpecialist is the specialist a conversation was handed over to.
type activeSpecialist struct {
	name   string
	system string // rendered
	voice  string
}

// specialistState is a conversation's hand-over state; the reply goroutine writes it (from the
// tool call), the speaker and the next request read it.
type specialistState struct {
	cur atomic.Pointer[activeSpecialist]
}

// HandOverSchema is the declaration of ToolHandOver for a desk with specialists (their names
// as an enum, their descriptions in the tool's description).
func HandOverSchema(specs []Specialist) ToolSpec {
	names := make([]string, len(specs))
	desc := "Hand the conversation over to the specialist who can help the caller best; the specialist answers from then on. Specialists:"
	for i, s := range specs {
		names[i] = s.Name
		desc += "\n- " + s.Name
		if s.Description != "" {
			desc += ": " + s.Description
		}
	}
	params, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"specialist": map[string]any{"type": "string", "enum": names},
			"reason":     map[string]any{"type": "string", "description": "why, in a few words"},
		},
		"required":             []string{"specialist"},
		"additionalProperties": false,
	})
	return ToolSpec{Name: ToolHandOver, Description: desc, Parameters: params}
}

// Specialist returns the name of the specialist the conversation was handed over to ("" when
// none).
func (c *Conversation) Specialist() string {
	if a := c.spec.cur.Load(); a != nil {
		return a.name
	}
	return ""
}

// systemPrompt is the rendered system prompt in force: the specialist's after a hand-over.
func (c *Conversation) systemPrompt() string {
	if a := c.spec.cur.Load(); a != nil {
		return a.system
	}
	return c.system
}

// voice is the TTS voice in force: the specialist's, when it has one, after a hand-over.
func (c *Conversation) voice() string {
	if a := c.spec.cur.Load(); a != nil && a.voice != "" {
		return a.voice
	}
	return c.agent.TTS.Voice
}

// handOver runs ToolHandOver: it switches prompt, voice and knowledge to the named specialist.
func (c *Conversation) handOver(ctx context.Context, name string) (string, error) {
	var sp *Specialist
	for i := range c.agent.Specialists {
		if c.agent.Specialists[i].Name == name {
			sp = &c.agent.Specialists[i]
		}
	}
	if sp == nil {
		if len(c.agent.Specialists) == 0 {
			return jsonError("this agent has no specialists to hand over to"), nil
		}
		return jsonError("there is no specialist called " + name), nil
	}
	system, err := Render(sp.SystemPrompt, c.opts.Variables)
	if err != nil {
		return "", errors.New("the specialist's prompt: " + err.Error())
	}
	if sk, ok := c.know.(SpecialistKnowledge); ok {
		if err := sk.UseSpecialist(ctx, sp.Name); err != nil {
			return "", errors.New("the specialist's knowledge: " + err.Error())
		}
	}
	c.spec.cur.Store(&activeSpecialist{name: sp.Name, system: system, voice: sp.Voice})
	c.log.Info("session: handed over to a specialist", "specialist", sp.Name)
	b, _ := json.Marshal(map[string]any{"ok": true, "specialist": sp.Name, "note": "You are now " + sp.Name + "; answer the caller as this specialist."})
	return string(b), nil
}

// knowledgeAfterTools is the knowledge of the reply's next round: looked up again when the
// round's tools handed over to a specialist (before is who answered until then), so that the
// specialist's first answer has its own knowledge (the line is in the transcript; the turn's
// knowledge stage keeps timing the first lookup).
func (c *Conversation) knowledgeAfterTools(ctx context.Context, before, knowledge string) string {
	if c.Specialist() == before || ctx.Err() != nil {
		return knowledge
	}
	return c.retrieveForTurn(ctx, func(respEvent) {})
}

// restoreSpecialist puts back the hand-over a resumed text conversation made before (a chat's
// engine is rebuilt for each message from its history): the last hand_over call the history
// shows succeeding.
func (c *Conversation) restoreSpecialist(ctx context.Context) error {
	if len(c.agent.Specialists) == 0 {
		return nil
	}
	c.histMu.Lock()
	handOvers := map[string]bool{} // ids of the hand_over calls
	name := ""
	for _, e := range c.history {
		for _, call := range e.msg.ToolCalls {
			if call.Name == ToolHandOver {
				handOvers[call.ID] = true
			}
		}
		if e.msg.Role != llm.RoleTool || !handOvers[e.msg.ToolCallID] {
			continue
		}
		var res struct {
			OK         bool   `json:"ok"`
			Specialist string `json:"specialist"`
		}
		if json.Unmarshal([]byte(e.msg.Content), &res) == nil && res.OK {
			name = res.Specialist
		}
	}
	c.histMu.Unlock()
	if name == "" {
		return nil
	}
	_, err := c.handOver(ctx, name)
	return err
}
