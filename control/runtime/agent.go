package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// ErrVersionNotFound says an agent has no such published version.
var ErrVersionNotFound = errors.New("runtime: no such published version")

// LoadDefinition returns the definition a conversation of the agent runs: the published
// version when version > 0 (ErrVersionNotFound when there is none), else the live one.
func LoadDefinition(ctx context.Context, q *store.Queries, agent store.Agent, version int) (*agentdef.Definition, error) {
	raw := agent.Definition
	if version > 0 {
		v, err := q.SystemAgents().Version(ctx, agent.ID, version)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: agent %s version %d", ErrVersionNotFound, agent.ID, version)
		}
		if err != nil {
			return nil, err
		}
		raw = v.Definition
	}
	return ParseStored(raw)
}

// ParseStored reads a definition as the store keeps it, over the defaults.
func ParseStored(raw json.RawMessage) (*agentdef.Definition, error) {
	d := agentdef.Defaults()
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("runtime: stored definition: %w", err)
	}
	return &d, nil
}

// Languages returns the language codes of a definition: its own first, then its versions.
func Languages(def *agentdef.Definition) []string {
	out := []string{def.Agent.Language}
	for _, l := range def.Agent.Languages {
		out = append(out, l.Code)
	}
	return out
}

// noBargeIn is the barge-in delay of an agent that must not be interrupted: longer than any
// utterance.
const noBargeIn = time.Hour

// AgentFor maps a definition to the engine's agent for one conversation: the language version
// (language "" is the definition's own), its prompts rendered with vars, and the definition's
// voice, models and turn-taking. Rendering errors (a required variable missing, a malformed
// marker) are returned as agentdef reports them.
func AgentFor(def *agentdef.Definition, language string, vars map[string]any) (session.Agent, error) {
	a := def.Agent
	system, first, voice := a.SystemPrompt, a.FirstMessage, a.Voice
	if language == "" {
		language = a.Language
	}
	if language != a.Language {
		found := false
		for _, l := range a.Languages {
			if l.Code == language {
				found = true
				if l.SystemPrompt != "" {
					system = l.SystemPrompt
				}
				if l.FirstMessage != "" {
					first = l.FirstMessage
				}
				if l.Voice != nil {
					voice = *l.Voice
				}
			}
		}
		if !found {
			return session.Agent{}, fmt.Errorf("runtime: the agent has no language %q", language)
		}
	}
	var err error
	if system, err = agentdef.Render(system, vars); err != nil {
		return session.Agent{}, err
	}
	if first, err = agentdef.Render(first, vars); err != nil {
		return session.Agent{}, err
	}
	reprompt, err := agentdef.Render(a.TurnTaking.Silence.RepromptMessage, vars)
	if err != nil {
		return session.Agent{}, err
	}
	out := session.Agent{
		Name:         a.Name,
		SystemPrompt: system,
		FirstMessage: first,
		Language:     language,
		LLMModel:     model(a.LLM.Model),
		STT:          session.STTSettings{Model: model(a.STT.Model), Endpointing: a.TurnTaking.Endpointing(), Keywords: a.STT.Keywords},
		TTS:          session.TTSSettings{Voice: voice.Name, Model: model(a.TTS.Model)},
		Turn: session.TurnSettings{
			EndpointSilence:     a.TurnTaking.Endpointing(),
			BargeInMin:          time.Duration(a.TurnTaking.BargeIn.MinSpeechMS) * time.Millisecond,
			BargeInConfirmWords: a.TurnTaking.BargeIn.MinWords > 0,
			DTMFTerminator:      a.TurnTaking.DTMF.Terminator,
			DTMFTimeout:         time.Duration(a.TurnTaking.DTMF.InterDigitTimeoutMS) * time.Millisecond,
		},
		SilenceTimeout: time.Duration(a.TurnTaking.Silence.TimeoutMS) * time.Millisecond,
		Reprompts:      a.TurnTaking.Silence.Reprompts,
		RepromptText:   reprompt,
		MaxDuration:    time.Duration(a.MaxDurationSeconds) * time.Second,
		Fillers:        a.Fillers.Lines,
		FillerAfter:    time.Duration(a.Fillers.AfterMS) * time.Millisecond,
	}
	if !a.TurnTaking.BargeIn.Enabled {
		out.Turn.BargeInMin = noBargeIn
	}
	if len(a.EndCall.Phrases) > 0 {
		out.EndPhrase = a.EndCall.Phrases[0]
	}
	if err := specialistsFor(def, vars, &out); err != nil { // issue 16: a desk's hand-over
		return session.Agent{}, err
	}
	return out, nil
}

// model maps the definition's "default" model to the provider's default ("").
func model(m string) string {
	if strings.EqualFold(m, "default") {
		return ""
	}
	return m
}

// provider maps the definition's "default" provider to the node's.
func provider(p, def string) string {
	if p == "" || strings.EqualFold(p, "default") {
		return def
	}
	return p
}
