// Package providers builds the speech-to-text, LLM and text-to-speech adapters a node uses,
// from the node's configuration, and hands them out by provider name.
//
// Adapters are built once, on first use, and shared by every conversation of the node (they are
// safe for concurrent use). With FakesURL set, every provider points at one `parley fakes`
// server, which is how the keyless demo and the benchmark run. This package must never hold a
// conversation's state.
package providers

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/media/stt"
	"github.com/parley-voice/parley/media/tts"
	"github.com/parley-voice/parley/session/llm"
)

// Config holds the base URLs and keys of the vendors. Empty base URLs mean the vendor's public
// endpoint.
type Config struct {
	OpenAIBaseURL, OpenAIKey         string // chat completions (and the default for the two below)
	AnthropicBaseURL, AnthropicKey   string
	DeepgramBaseURL, DeepgramKey     string
	ElevenLabsBaseURL, ElevenLabsKey string
	TranscribeBaseURL, TranscribeKey string // OpenAI-compatible /v1/audio/transcriptions (whisper.cpp, faster-whisper)
	SpeechBaseURL, SpeechKey         string // OpenAI-compatible /v1/audio/speech
	// FakesURL points every provider at one `parley fakes` server (keys are then "fake").
	FakesURL string
	// LLMFirstTokenTimeout bounds the wait for an LLM's first token (0: 10 s).
	LLMFirstTokenTimeout time.Duration
	// TTSFirstByteTimeout bounds the wait for a TTS's first audio byte (0: the adapter's 5 s).
	TTSFirstByteTimeout time.Duration
	// STTConnectTimeout bounds connecting to a streaming STT (0: the adapter's 5 s).
	STTConnectTimeout time.Duration
	Log               *slog.Logger
}

// Provider names.
const (
	OpenAI     = "openai"
	Anthropic  = "anthropic"
	Deepgram   = "deepgram"
	ElevenLabs = "elevenlabs"
	Espeak     = "espeak"
)

// ErrUnknown says a provider name is not one this node knows.
var ErrUnknown = errors.New("providers: unknown provider")

// Registry hands out adapters by provider name.
type Registry struct {
	cfg  Config
	mu   sync.Mutex
	llms map[string]llm.Client
	stts map[string]stt.Recognizer
	ttss map[string]tts.Synthesizer
}

// New returns a registry for cfg.
func New(cfg Config) *Registry {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.LLMFirstTokenTimeout == 0 {
		cfg.LLMFirstTokenTimeout = 10 * time.Second
	}
	if f := strings.TrimRight(cfg.FakesURL, "/"); f != "" {
		cfg.OpenAIBaseURL, cfg.OpenAIKey = f, "fake"
		cfg.AnthropicBaseURL, cfg.AnthropicKey = f, "fake"
		cfg.DeepgramBaseURL, cfg.DeepgramKey = f, "fake"
		cfg.ElevenLabsBaseURL, cfg.ElevenLabsKey = f, "fake"
		cfg.TranscribeBaseURL, cfg.TranscribeKey = f, "fake"
		cfg.SpeechBaseURL, cfg.SpeechKey = f, "fake"
	}
	if cfg.TranscribeBaseURL == "" {
		cfg.TranscribeBaseURL, cfg.TranscribeKey = cfg.OpenAIBaseURL, firstNonEmpty(cfg.TranscribeKey, cfg.OpenAIKey)
	}
	if cfg.SpeechBaseURL == "" {
		cfg.SpeechBaseURL, cfg.SpeechKey = cfg.OpenAIBaseURL, firstNonEmpty(cfg.SpeechKey, cfg.OpenAIKey)
	}
	return &Registry{cfg: cfg, llms: map[string]llm.Client{}, stts: map[string]stt.Recognizer{}, ttss: map[string]tts.Synthesizer{}}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Fake reports whether every provider points at a fakes server.
func (r *Registry) Fake() bool { return r.cfg.FakesURL != "" }

// LLM returns the client of a provider ("openai" — any OpenAI-compatible server — or
// "anthropic"), with retries before the first byte.
func (r *Registry) LLM(provider string) (llm.Client, error) {
	provider = normalize(provider, OpenAI)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.llms[provider]; ok {
		return c, nil
	}
	var c llm.Client
	var err error
	switch provider {
	case OpenAI:
		c, err = llm.NewOpenAI(llm.Config{BaseURL: r.cfg.OpenAIBaseURL, APIKey: r.cfg.OpenAIKey, FirstTokenTimeout: r.cfg.LLMFirstTokenTimeout})
	case Anthropic:
		c, err = llm.NewAnthropic(llm.Config{BaseURL: r.cfg.AnthropicBaseURL, APIKey: r.cfg.AnthropicKey, FirstTokenTimeout: r.cfg.LLMFirstTokenTimeout})
	default:
		return nil, fmt.Errorf("%w: LLM %q (known: openai, anthropic)", ErrUnknown, provider)
	}
	if err != nil {
		return nil, err
	}
	c = llm.WithRetry(c, llm.RetryPolicy{Attempts: 3, BaseDelay: 150 * time.Millisecond, MaxDelay: 1500 * time.Millisecond, Jitter: 0.3,
		OnRetry: func(attempt int, err error, wait time.Duration) {
			r.cfg.Log.Warn("LLM request failed before its first byte; retrying", "provider", provider, "attempt", attempt, "wait", wait, "err", err)
		}})
	r.llms[provider] = c
	return c, nil
}

// STT returns the recognizer of a provider ("deepgram", or "openai" for any OpenAI-compatible
// transcription server).
func (r *Registry) STT(provider string) (stt.Recognizer, error) {
	provider = normalize(provider, Deepgram)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.stts[provider]; ok {
		return c, nil
	}
	var c stt.Recognizer
	var err error
	switch provider {
	case Deepgram:
		c, err = stt.NewDeepgram(stt.DeepgramConfig{BaseURL: r.cfg.DeepgramBaseURL, APIKey: r.cfg.DeepgramKey, SmartFormat: true, Punctuate: true, DialTimeout: r.cfg.STTConnectTimeout, Logger: r.cfg.Log})
	case OpenAI, "whisper":
		c, err = stt.NewOpenAISTT(stt.OpenAISTTConfig{BaseURL: r.cfg.TranscribeBaseURL, APIKey: r.cfg.TranscribeKey, Logger: r.cfg.Log})
	default:
		return nil, fmt.Errorf("%w: STT %q (known: deepgram, openai)", ErrUnknown, provider)
	}
	if err != nil {
		return nil, err
	}
	r.stts[provider] = c
	return c, nil
}

// TTS returns the synthesizer of a provider ("elevenlabs", "openai" for any OpenAI-compatible
// speech server, or "espeak" for the local espeak-ng).
func (r *Registry) TTS(provider string) (tts.Synthesizer, error) {
	provider = normalize(provider, ElevenLabs)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.ttss[provider]; ok {
		return c, nil
	}
	var c tts.Synthesizer
	var err error
	switch provider {
	case ElevenLabs:
		c, err = tts.NewElevenLabs(tts.ElevenLabsConfig{BaseURL: r.cfg.ElevenLabsBaseURL, APIKey: r.cfg.ElevenLabsKey, Voice: "21m00Tcm4TlvDq8ikWAM", FirstByteTimeout: r.cfg.TTSFirstByteTimeout, Logger: r.cfg.Log})
	case OpenAI:
		c, err = tts.NewOpenAITTS(tts.OpenAITTSConfig{BaseURL: r.cfg.SpeechBaseURL, APIKey: r.cfg.SpeechKey, Voice: "alloy", FirstByteTimeout: r.cfg.TTSFirstByteTimeout, Logger: r.cfg.Log})
	case Espeak:
		c, err = tts.NewEspeak(tts.EspeakConfig{})
	default:
		return nil, fmt.Errorf("%w: TTS %q (known: elevenlabs, openai, espeak)", ErrUnknown, provider)
	}
	if err != nil {
		return nil, err
	}
	r.ttss[provider] = c
	return c, nil
}

func normalize(p, def string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	if p == "" {
		return def
	}
	return p
}

// FromConfig maps the node's vendor settings to a registry configuration.
func FromConfig(c *config.Config, log *slog.Logger) Config {
	return Config{
		OpenAIBaseURL: c.OpenAIBaseURL, OpenAIKey: c.OpenAIKey,
		AnthropicBaseURL: c.AnthropicBaseURL, AnthropicKey: c.AnthropicKey,
		DeepgramBaseURL: c.DeepgramBaseURL, DeepgramKey: c.DeepgramKey,
		ElevenLabsBaseURL: c.ElevenLabsBaseURL, ElevenLabsKey: c.ElevenLabsKey,
		TranscribeBaseURL: c.TranscribeBaseURL, TranscribeKey: c.TranscribeKey,
		SpeechBaseURL: c.SpeechBaseURL, SpeechKey: c.SpeechKey,
		FakesURL: c.FakesURL, Log: log,
		LLMFirstTokenTimeout: c.LLMFirstTokenTimeout, TTSFirstByteTimeout: c.TTSFirstByteTimeout, STTConnectTimeout: c.STTConnectTimeout,
	}
}
