package stt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/parley-voice/parley/media/internal/retry"
	"io"
	"log/slog"
	"math"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// OpenAISTTConfig configures the OpenAI-compatible transcription adapter
// (POST {BaseURL}/v1/audio/transcriptions, multipart/form-data). The same protocol is served by
// OpenAI, whisper.cpp's server (--inference-path /v1/audio/transcriptions) and faster-whisper
// servers.
type OpenAISTTConfig struct {
	// BaseURL of the API, without the /v1 path; default "https://api.openai.com".
	BaseURL string
	// Path of the endpoint; default "/v1/audio/transcriptions".
	Path string
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends no header (local servers).
	APIKey string
	// Model is the default model ("whisper-1" when empty); StreamOptions.Model overrides it.
	Model string
	// Language is the default language; StreamOptions.Language overrides it. Only the primary
	// subtag is sent ("en-US" → "en"), as the API expects ISO 639-1.
	Language string
	// ResponseFormat is "json" (default), "verbose_json" (gives a confidence) or "text".
	ResponseFormat string
	// Temperature is sent when not zero.
	Temperature float64

	// Endpointing is the unvoiced time after speech that ends an utterance when
	// StreamOptions.Endpointing is zero. Default 500 ms.
	Endpointing time.Duration
	// PreRoll is audio kept from before the first voiced frame and sent with the utterance, so
	// that the VAD's late start does not clip the first phoneme. Default 300 ms.
	PreRoll time.Duration
	// MinSpeech is the voiced audio an utterance needs; shorter bursts are discarded as noise.
	// Default 60 ms.
	MinSpeech time.Duration
	// MaxUtterance bounds one upload; longer speech is cut and sent in pieces. Default 30 s.
	MaxUtterance time.Duration
	// TrailingSilence is how much of the endpointing silence is kept at the end of an upload.
	// Default 200 ms.
	TrailingSilence time.Duration

	// RequestTimeout bounds one HTTP attempt (upload and answer). Default 15 s.
	RequestTimeout time.Duration
	// MaxRetries for temporary failures (5xx, 429, network) before the answer. Default 2;
	// negative means none. 401/403 and other 4xx are never retried.
	MaxRetries int
	// RetryBackoff is the first retry delay, doubled up to RetryBackoffMax (100 ms, 2 s).
	RetryBackoff, RetryBackoffMax time.Duration
	// QueueUtterances is how many cut utterances may wait for upload. Default 4; beyond that
	// the newest is dropped and counted.
	QueueUtterances int
	// CloseTimeout bounds how long Close waits for pending uploads. Default 10 s.
	CloseTimeout time.Duration
	// EventBuffer is the capacity of the Events channel. Default 128.
	EventBuffer int

	// HTTPClient overrides the client; default a client with no overall timeout (attempts are
	// bounded by RequestTimeout).
	HTTPClient *http.Client
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Now is the clock for Event.At. Default time.Now.
	Now func() time.Time
}

// OpenAISTT is a Recognizer that cuts utterances with the engine's VAD decisions and uploads
// each one to an OpenAI-compatible transcription endpoint.
type OpenAISTT struct {
	cfg OpenAISTTConfig
	url string
	log *slog.Logger
	bo  retry.Backoff
}

// NewOpenAISTT validates cfg, fills defaults and returns the adapter.
func NewOpenAISTT(cfg OpenAISTTConfig) (*OpenAISTT, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.openai.com"
	}
	if cfg.Path == "" {
		cfg.Path = "/v1/audio/transcriptions"
	}
	u, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/") + cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: openai-stt URL: %v", ErrInvalidOptions, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%w: openai-stt URL %q must be http(s) with a host", ErrInvalidOptions, u)
	}
	if cfg.Model == "" {
		cfg.Model = "whisper-1"
	}
	switch cfg.ResponseFormat {
	case "":
		cfg.ResponseFormat = "json"
	case "json", "verbose_json", "text":
	default:
		return nil, fmt.Errorf("%w: openai-stt response format %q", ErrInvalidOptions, cfg.ResponseFormat)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Endpointing, 500*time.Millisecond)
	def(&cfg.PreRoll, 300*time.Millisecond)
	def(&cfg.MinSpeech, 60*time.Millisecond)
	def(&cfg.MaxUtterance, 30*time.Second)
	def(&cfg.TrailingSilence, 200*time.Millisecond)
	def(&cfg.RequestTimeout, 15*time.Second)
	def(&cfg.RetryBackoff, 100*time.Millisecond)
	def(&cfg.RetryBackoffMax, 2*time.Second)
	def(&cfg.CloseTimeout, 10*time.Second)
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	if cfg.QueueUtterances <= 0 {
		cfg.QueueUtterances = 4
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 128
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &OpenAISTT{cfg: cfg, url: u.String(), log: cfg.Logger, bo: retry.Backoff{Initial: cfg.RetryBackoff, Max: cfg.RetryBackoffMax}}
	if a.log == nil {
		a.log = slog.Default()
	}
	return a, nil
}

// Open starts a per-utterance stream. It makes no request until the first utterance ends.
func (a *OpenAISTT) Open(ctx context.Context, o StreamOptions) (Stream, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	s := newOpenAISTTStream(ctx, a, o)
	go s.run()
	return s, nil
}

// transcription is the answer in json and verbose_json formats.
type transcription struct {
	Text     string `json:"text"`
	Segments []struct {
		AvgLogprob float64 `json:"avg_logprob"`
	} `json:"segments"`
}

// transcribe uploads one utterance, retrying temporary failures, and returns its text and
// confidence (0 when the format gives none).
func (a *OpenAISTT) transcribe(ctx context.Context, stop <-chan struct{}, body []byte, contentType string, requests func()) (string, float64, error) {
	for attempt := 0; ; attempt++ {
		requests()
		text, conf, err := a.transcribeOnce(ctx, body, contentType)
		if err == nil {
			return text, conf, nil
		}
		if !retryable(err) || attempt >= a.cfg.MaxRetries || ctx.Err() != nil {
			return "", 0, err
		}
		a.log.Warn("openai-stt: transcription failed, retrying", "attempt", attempt+1, "err", err)
		if !retry.Wait(ctx, stop, a.bo.Delay(attempt+1)) {
			return "", 0, err
		}
	}
}

func (a *OpenAISTT) transcribeOnce(ctx context.Context, body []byte, contentType string) (string, float64, error) {
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return "", 0, &ProviderError{Provider: "openai-stt", Op: "transcribe", Err: err}
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	if a.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+a.cfg.APIKey)
	}
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		pe := &ProviderError{Provider: "openai-stt", Op: "transcribe", Err: err}
		if rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			pe.Err = fmt.Errorf("%w: %v", ErrTimeout, err)
		}
		return "", 0, pe
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", 0, &ProviderError{Provider: "openai-stt", Op: "transcribe", Status: resp.StatusCode, Err: err}
	}
	if resp.StatusCode/100 != 2 {
		pe := &ProviderError{Provider: "openai-stt", Op: "transcribe", Status: resp.StatusCode}
		pe.Code, pe.Message = parseOpenAIError(raw)
		return "", 0, pe
	}
	if a.cfg.ResponseFormat == "text" {
		return strings.TrimSpace(string(raw)), 0, nil
	}
	var t transcription
	if err := json.Unmarshal(raw, &t); err != nil {
		return "", 0, &ProviderError{Provider: "openai-stt", Op: "transcribe", Status: resp.StatusCode, Message: "unparsable answer", Err: err}
	}
	conf := 0.0
	if n := len(t.Segments); n > 0 {
		sum := 0.0
		for _, sg := range t.Segments {
			sum += sg.AvgLogprob
		}
		conf = math.Exp(sum / float64(n))
	}
	return strings.TrimSpace(t.Text), conf, nil
}

// parseOpenAIError reads {"error":{"message":…,"code":…}} (OpenAI) or {"error":"…"}
// (whisper.cpp and friends).
func parseOpenAIError(raw []byte) (code, msg string) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil || len(env.Error) == 0 {
		return "", strings.TrimSpace(truncate(string(raw), 300))
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

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// multipartBody builds the request body for one utterance into buf.
func (a *OpenAISTT) multipartBody(buf *bytes.Buffer, wav []byte, o StreamOptions) (string, error) {
	buf.Reset()
	mw := multipart.NewWriter(buf)
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", `form-data; name="file"; filename="utterance.wav"`)
	h.Set("Content-Type", "audio/wav")
	fw, err := mw.CreatePart(h)
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(wav); err != nil {
		return "", err
	}
	model := o.Model
	if model == "" {
		model = a.cfg.Model
	}
	fields := [][2]string{{"model", model}, {"response_format", a.cfg.ResponseFormat}}
	lang := o.Language
	if lang == "" {
		lang = a.cfg.Language
	}
	if lang != "" {
		if i := strings.IndexAny(lang, "-_"); i > 0 {
			lang = lang[:i]
		}
		fields = append(fields, [2]string{"language", strings.ToLower(lang)})
	}
	if len(o.Keywords) > 0 {
		fields = append(fields, [2]string{"prompt", strings.Join(o.Keywords, ", ")})
	}
	if a.cfg.Temperature != 0 {
		fields = append(fields, [2]string{"temperature", fmt.Sprintf("%g", a.cfg.Temperature)})
	}
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return "", err
		}
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	return mw.FormDataContentType(), nil
}
