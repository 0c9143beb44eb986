package runtime

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/session"
)

func TestAgentFor(t *testing.T) {
	def, err := ParseStored(json.RawMessage(`{"agent": {"name": "Ava", "language": "en", "system_prompt": "Help {{customer}} with {{topic|anything}}.",
		"first_message": "Hi {{customer}}!", "voice": {"name": "rachel"},
		"languages": [{"code": "fr", "system_prompt": "Aidez {{customer}}.", "first_message": "Bonjour {{customer}} !", "voice": {"name": "amelie"}}],
		"llm": {"provider": "anthropic", "model": "claude-x"}, "stt": {"model": "nova-3", "keywords": ["Parley"]},
		"turn_taking": {"endpointing_ms": 450, "barge_in": {"enabled": false, "min_speech_ms": 300},
			"silence": {"timeout_ms": 8000, "reprompts": 1, "reprompt_message": "Still there, {{customer}}?"}},
		"max_duration_seconds": 600, "end_call": {"phrases": ["goodbye"]}, "fillers": {"after_ms": 900, "lines": ["One moment."]}},
		"references": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{"customer": "Ada"}
	cases := []struct {
		name     string
		language string
		check    func(t *testing.T, a agentCheck)
	}{
		{"own language", "", func(t *testing.T, a agentCheck) {
			a.eq(t, "system", a.SystemPrompt, "Help Ada with anything.")
			a.eq(t, "first", a.FirstMessage, "Hi Ada!")
			a.eq(t, "voice", a.TTS.Voice, "rachel")
			a.eq(t, "language", a.Language, "en")
		}},
		{"a language version", "fr", func(t *testing.T, a agentCheck) {
			a.eq(t, "system", a.SystemPrompt, "Aidez Ada.")
			a.eq(t, "first", a.FirstMessage, "Bonjour Ada !")
			a.eq(t, "voice", a.TTS.Voice, "amelie")
			a.eq(t, "language", a.Language, "fr")
		}},
	}
	for _, c := range cases {
		a, err := AgentFor(def, c.language, vars)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.check(t, agentCheck{a})
		if a.LLMModel != "claude-x" || a.STT.Model != "nova-3" || a.TTS.Model != "" || a.STT.Keywords[0] != "Parley" {
			t.Errorf("%s: models %+v", c.name, a)
		}
		if a.Turn.EndpointSilence != 450*time.Millisecond || a.Turn.BargeInMin != noBargeIn || a.SilenceTimeout != 8*time.Second ||
			a.Reprompts != 1 || a.RepromptText != "Still there, Ada?" || a.MaxDuration != 10*time.Minute || a.EndPhrase != "goodbye" ||
			a.FillerAfter != 900*time.Millisecond || a.Fillers[0] != "One moment." {
			t.Errorf("%s: settings %+v", c.name, a)
		}
	}
	if _, err := AgentFor(def, "de", vars); err == nil {
		t.Error("a language the agent lacks was taken")
	}
	var missing *agentdef.MissingVariableError
	if _, err := AgentFor(def, "", nil); !errors.As(err, &missing) || missing.Name != "customer" {
		t.Errorf("without variables: %v", err)
	}
	if provider("default", "openai") != "openai" || provider("anthropic", "openai") != "anthropic" || model("default") != "" {
		t.Error("defaults are not mapped")
	}
}

type agentCheck struct{ session.Agent }

func (a agentCheck) eq(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}
