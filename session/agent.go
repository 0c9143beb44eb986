package session

import (
	"encoding/json"
	"time"
)

// Agent is the engine's view of an agent definition: everything that drives a conversation.
// The control plane builds it from the stored definition (package agentdef), filling defaults.
type Agent struct {
	Name         string
	SystemPrompt string // may hold {{placeholders}}, filled from the conversation's variables
	FirstMessage string // spoken first when set; empty: the agent waits for the caller
	Language     string

	LLMModel string
	STT      STTSettings
	TTS      TTSSettings

	Turn TurnSettings

	SilenceTimeout time.Duration // no caller speech for this long: reprompt (0 disables)
	Reprompts      int           // reprompts before ending with EndSilenceTimeout
	RepromptText   string        // what the agent says to reprompt
	MaxDuration    time.Duration // 0: no limit
	EndPhrase      string        // when the agent says this, the call ends after it is spoken
	ApologyText    string        // spoken when the LLM fails mid-call
	MaxLLMFailures int           // consecutive LLM failures before EndProviderError
	MaxTTSFailures int           // consecutive failed TTS chunks (each retried once) before EndProviderError

	MaxTurns int // text: the chat's length in caller messages (0: no limit)

	Fillers     []string      // short lines spoken while a slow tool runs
	FillerAfter time.Duration // how long a tool may run before a filler is spoken

	Tools []ToolSpec // tools the LLM may call (built-in ones are added by name)

	// KnowledgeAuto looks every caller turn up in the knowledge (Options.Knowledge, when it is a
	// TurnKnowledge) before the model answers; otherwise the model calls knowledge_lookup.
	KnowledgeAuto bool

	// Specialists are a desk agent's: the model hands the conversation over to one with the
	// built-in tool ToolHandOver (see handover.go).
	Specialists []Specialist
}

// STTSettings choose the recognizer's options.
type STTSettings struct {
	Model        string
	Endpointing  time.Duration // provider endpointing silence (Deepgram endpointing)
	UtteranceEnd time.Duration // provider word-gap end of utterance (Deepgram utterance_end_ms)
	Keywords     []string
}

// TTSSettings choose the voice.
type TTSSettings struct {
	Voice string
	Model string
}

// TurnSettings tune turn-taking and barge-in.
type TurnSettings struct {
	// EndpointSilence is the VAD silence after a final transcript that ends the caller's turn when
	// the provider sends no end-of-speech signal.
	EndpointSilence time.Duration
	// MaxWait bounds how long after the caller stops speaking the engine waits for the
	// recognizer before answering with what it has.
	MaxWait time.Duration
	// MinWords: a turn with fewer words does not end (until MaxWait).
	MinWords int
	// BargeInMin is how long the caller must speak over the agent to interrupt it.
	BargeInMin time.Duration
	// BargeInConfirmWords requires an interim transcript with a non-backchannel word as well.
	BargeInConfirmWords bool
	// Backchannels are words that never interrupt ("mm-hm", "yeah").
	Backchannels []string
	// SpeechStart is how long VAD must hear speech before the caller counts as speaking.
	SpeechStart time.Duration
	// SpeechStop is how long VAD must hear silence before the caller counts as silent.
	SpeechStop time.Duration
	// DTMFTerminator is the key that ends a turn of keypad digits at once ("#"; "" for none);
	// DTMFTimeout ends it after that long without a new digit (default 2 s). Digits pressed
	// while the agent talks interrupt it.
	DTMFTerminator string
	DTMFTimeout    time.Duration
}

// ToolSpec declares a tool the LLM may call.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	// Timeout bounds one call (0: only the runner's own bound). A call that runs out fails: the
	// LLM is told, and the caller hears Apology.
	Timeout time.Duration
	// Filler is spoken when a call of this tool runs past Agent.FillerAfter ("": the agent's
	// Fillers).
	Filler string
	// SpeakResult speaks the call's result as it is instead of giving it back to the LLM for
	// another round.
	SpeakResult bool
	// Apology is spoken when every call of a round fails ("": Agent.ApologyText).
	Apology string
}

// WithDefaults returns a copy of a with every unset tuning value filled.
func (a Agent) WithDefaults() Agent {
	if a.Turn.EndpointSilence == 0 {
		a.Turn.EndpointSilence = 500 * time.Millisecond
	}
	if a.Turn.MaxWait == 0 {
		a.Turn.MaxWait = 2 * time.Second
	}
	if a.Turn.BargeInMin == 0 {
		a.Turn.BargeInMin = 200 * time.Millisecond
	}
	if a.Turn.SpeechStart == 0 {
		a.Turn.SpeechStart = 60 * time.Millisecond
	}
	if a.Turn.SpeechStop == 0 {
		a.Turn.SpeechStop = 200 * time.Millisecond
	}
	if a.Turn.DTMFTimeout == 0 {
		a.Turn.DTMFTimeout = 2 * time.Second
	}
	if a.Turn.Backchannels == nil {
		a.Turn.Backchannels = []string{"mm", "mhm", "mm-hm", "uh-huh", "yeah", "yes", "yep", "ok", "okay", "right", "sure", "aha", "hmm", "uh", "um"}
	}
	if a.Reprompts == 0 && a.SilenceTimeout > 0 {
		a.Reprompts = 2
	}
	if a.RepromptText == "" {
		a.RepromptText = "Are you still there?"
	}
	if a.ApologyText == "" {
		a.ApologyText = "Sorry, I'm having trouble right now. Could you say that again?"
	}
	if a.MaxLLMFailures == 0 {
		a.MaxLLMFailures = 3
	}
	if a.MaxTTSFailures == 0 {
		a.MaxTTSFailures = 2
	}
	if a.FillerAfter == 0 {
		a.FillerAfter = 800 * time.Millisecond
	}
	return a
}
