package tts

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/parley-voice/parley/media/internal/retry"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// OpenAITTSConfig configures the OpenAI-compatible speech adapter (POST {BaseURL}/v1/audio/speech
// with response_format "pcm": raw 16-bit little-endian mono PCM, 24 kHz at OpenAI).
type OpenAITTSConfig struct {
	// BaseURL of the API, without the /v1 path; default "https://api.openai.com".
	BaseURL string
	// Path of the endpoint; default "/v1/audio/speech".
	Path string
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends no header.
	APIKey string
	// Model ("gpt-4o-mini-tts") and Voice ("alloy") are the defaults; Request overrides them.
	Model, Voice string
	// Speed (0.25-4) is sent when not 0.
	Speed float64
	// Instructions (tone, accent…) are sent when not empty.
	Instructions string
	// PCMRate is the rate of the server's "pcm" output. Default 24000 (OpenAI's); compatible
	// servers that differ can say so here.
	PCMRate int

	// FirstByteTimeout, StallTimeout, MaxRetries, RetryBackoff(Max), ReadBuffer, HTTPClient
	// and Logger are as in ElevenLabsConfig (defaults 5 s, 5 s, 2, 100 ms/1 s, 4096 bytes).
	FirstByteTimeout, StallTimeout time.Duration
	MaxRetries                     int
	RetryBackoff, RetryBackoffMax  time.Duration
	ReadBuffer                     int
	HTTPClient                     *http.Client
	Logger                         *slog.Logger
}

// OpenAITTS is a Synthesizer backed by an OpenAI-compatible /v1/audio/speech endpoint. The
// 24 kHz PCM is resampled to the request's rate by this package's streaming FIR resampler.
type OpenAITTS struct {
	cfg OpenAITTSConfig
	url string
	log *slog.Logger
}

// NewOpenAITTS validates cfg, fills defaults and returns the adapter.
func NewOpenAITTS(cfg OpenAITTSConfig) (*OpenAITTS, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.openai.com"
	}
	if cfg.Path == "" {
		cfg.Path = "/v1/audio/speech"
	}
	full := strings.TrimSuffix(cfg.BaseURL, "/") + cfg.Path
	u, err := url.Parse(full)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: openai-tts URL %q", ErrInvalidOptions, full)
	}
	if cfg.Model == "" {
		cfg.Model = "gpt-4o-mini-tts"
	}
	if cfg.Voice == "" {
		cfg.Voice = "alloy"
	}
	if cfg.PCMRate == 0 {
		cfg.PCMRate = 24000
	}
	if cfg.PCMRate < 8000 || cfg.PCMRate > 48000 {
		return nil, fmt.Errorf("%w: openai-tts PCM rate %d", ErrInvalidOptions, cfg.PCMRate)
	}
	if cfg.Speed != 0 && (cfg.Speed < 0.25 || cfg.Speed > 4) {
		return nil, fmt.Errorf("%w: openai-tts speed %v (0.25-4)", ErrInvalidOptions, cfg.Speed)
	}
	httpDefaults(&cfg.FirstByteTimeout, &cfg.StallTimeout, &cfg.MaxRetries, &cfg.RetryBackoff, &cfg.RetryBackoffMax, &cfg.ReadBuffer, &cfg.HTTPClient)
	o := &OpenAITTS{cfg: cfg, url: u.String(), log: cfg.Logger}
	if o.log == nil {
		o.log = slog.Default()
	}
	return o, nil
}

type openAISpeechBody struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          string  `json:"voice"`
	ResponseFormat string  `json:"response_format"`
	Speed          float64 `json:"speed,omitempty"`
	Instructions   string  `json:"instructions,omitempty"`
}

// Synthesize starts streaming r.Text.
func (o *OpenAITTS) Synthesize(ctx context.Context, r Request) (Stream, error) {
	r, err := r.normalize()
	if err != nil {
		return nil, err
	}
	b := openAISpeechBody{Model: r.Model, Input: r.Text, Voice: r.Voice, ResponseFormat: "pcm", Speed: o.cfg.Speed, Instructions: o.cfg.Instructions}
	if b.Model == "" {
		b.Model = o.cfg.Model
	}
	if b.Voice == "" {
		b.Voice = o.cfg.Voice
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if o.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+o.cfg.APIKey)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "audio/pcm")
	spec := &httpSpec{
		provider: "openai-tts", client: o.cfg.HTTPClient, url: o.url, header: h, body: body,
		maxRetries: o.cfg.MaxRetries, bo: retry.Backoff{Initial: o.cfg.RetryBackoff, Max: o.cfg.RetryBackoffMax},
		firstByte: o.cfg.FirstByteTimeout, log: o.log, parseErr: parseOpenAIError,
	}
	resp, cancel, w, err := spec.open(ctx)
	if err != nil {
		return nil, err
	}
	src := &readerSource{r: resp.Body, buf: make([]byte, o.cfg.ReadBuffer), hz: o.cfg.PCMRate}
	return newHTTPStream("openai-tts", resp, cancel, w, src, formatLinear16, r.SampleRate, o.cfg.StallTimeout), nil
}

// parseOpenAIError reads {"error":{"message":…,"type":…,"code":…}} or {"error":"…"}.
func parseOpenAIError(raw []byte) (code, msg string) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil || len(env.Error) == 0 {
		return "", truncate(strings.TrimSpace(string(raw)), 300)
	}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	if json.Unmarshal(env.Error, &obj) == nil {
		code = obj.Type
		if c, ok := obj.Code.(string); ok && c != "" {
			code = c
		}
		return code, obj.Message
	}
	var s string
	if json.Unmarshal(env.Error, &s) == nil {
		return "", s
	}
	return "", truncate(string(env.Error), 300)
}
