package runtime

// issue 18: simulation, the third form of a saved conversation. An LLM plays the user from a
// persona and a goal, for at most a bounded number of turns, against the agent; the rehearsal
// is then judged like the others.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/llm"
)

// MaxSimulatedTurns bounds the turns of a simulated user, whatever a saved conversation asks.
const MaxSimulatedTurns = 30

// SimulationEnd is what the simulated user says, alone, when its goal is reached or the
// conversation is over.
const SimulationEnd = "[END]"

// simulatedTurnTimeout bounds one answer of the simulated user's LLM.
const simulatedTurnTimeout = 60 * time.Second

// Simulation is a user played by an LLM.
type Simulation struct {
	Persona  string // who the user is
	Goal     string // what the user wants from the agent
	MaxTurns int    // at most this many user turns (1..MaxSimulatedTurns)
}

// simulatedUserPrompt is the simulated user's system prompt.
func simulatedUserPrompt(s *Simulation) string {
	return "You play a user talking to an AI agent, to test the agent. Stay in character.\n" +
		"Who you are: " + s.Persona + "\n" +
		"What you want: " + s.Goal + "\n" +
		"Answer with only what the user says next: one short message, no stage directions. " +
		"When your goal is reached, or the agent cannot help and the conversation is over, answer exactly " + SimulationEnd + "."
}

// simulatedUser returns the turns of a user played by the agent's LLM (client and model), seeing
// the transcript with the roles turned round. Its tokens are added to out's cost.
func (rt *Runtime) simulatedUser(s *Simulation, client llm.Client, model string, out *RehearsalResult) nextTurn {
	limit := min(max(s.MaxTurns, 1), MaxSimulatedTurns)
	return func(ctx context.Context, i int, lines []session.Line) (string, bool, error) {
		if i >= limit {
			return "", false, nil
		}
		req := llm.Request{Model: model, System: simulatedUserPrompt(s), MaxTokens: 300}
		for _, l := range lines {
			switch l.Role {
			case session.RoleAgent: // the agent speaks to the simulated user: its input
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: l.Text})
			case session.RoleUser:
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: l.Text})
			}
		}
		if len(req.Messages) == 0 || req.Messages[len(req.Messages)-1].Role != llm.RoleUser {
			// The agent has no greeting (or spoke last as the user): the user opens.
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: "(The conversation starts: say your first message.)"})
		}
		text, usage, err := completeText(ctx, client, req)
		out.Cost.LLMInputTokens += usage.InputTokens
		out.Cost.LLMOutputTokens += usage.OutputTokens
		out.CostMicros += rt.pricing.Micros("simulation", session.Cost{LLMInputTokens: usage.InputTokens, LLMOutputTokens: usage.OutputTokens})
		if err != nil {
			if ctx.Err() != nil {
				return "", false, ctx.Err()
			}
			return "", false, fmt.Errorf("%w: the simulated user's LLM failed at turn %d: %v", ErrProvider, i+1, err)
		}
		text = strings.TrimSpace(text)
		if text == "" || strings.Contains(text, SimulationEnd) {
			return "", false, nil
		}
		return text, true, nil
	}
}

// completeText sends req and gathers the reply's text and usage (bounded in time).
func completeText(ctx context.Context, client llm.Client, req llm.Request) (string, llm.Usage, error) {
	ctx, cancel := context.WithTimeout(ctx, simulatedTurnTimeout)
	defer cancel()
	st, err := client.Stream(ctx, req)
	if err != nil {
		return "", llm.Usage{}, err
	}
	defer st.Close()
	var b strings.Builder
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return b.String(), llm.Usage{}, nil
		}
		if err != nil {
			return "", llm.Usage{}, err
		}
		switch ev.Kind {
		case llm.TextDelta:
			if b.Len() < 8000 {
				b.WriteString(ev.Text)
			}
		case llm.Done:
			return b.String(), ev.Usage, nil
		}
	}
}
