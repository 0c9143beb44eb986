package stt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/parley-voice/parley/media/internal/retry"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// DeepgramConfig configures the Deepgram live-streaming adapter (wss /v1/listen).
type DeepgramConfig struct {
	// BaseURL of the API; default "wss://api.deepgram.com". http and https are mapped to ws
	// and wss, so an httptest server URL works as is.
	BaseURL string
	// APIKey is sent as "Authorization: Token <key>". Empty sends no header (self-hosted).
	APIKey string
	// Model is the default model ("nova-3" when empty); StreamOptions.Model overrides it.
	Model string
	// Language is the default language; StreamOptions.Language overrides it.
	Language string
	// SmartFormat and Punctuate set the smart_format and punctuate query parameters.
	SmartFormat, Punctuate bool
	// ExtraParams are added to the query string as given (for options this adapter does not
	// model, e.g. "filler_words").
	ExtraParams url.Values

	// DialTimeout bounds one connection attempt, WebSocket handshake included. Default 5 s.
	DialTimeout time.Duration
	// MaxRetries is how many times Open retries a temporary failure (5xx, 429, network) before
	// giving up. Default 2; negative means none. Auth and other 4xx failures are never retried.
	MaxRetries int
	// RetryBackoff is the first retry delay, doubled up to RetryBackoffMax (defaults 100 ms, 2 s).
	RetryBackoff, RetryBackoffMax time.Duration
	// ReconnectWindow is how long a stream keeps trying to reconnect after a mid-call drop
	// before it gives up with an Error event. Default 10 s.
	ReconnectWindow time.Duration
	// KeepAliveInterval: a {"type":"KeepAlive"} is sent when no audio went out for this long.
	// Deepgram closes idle sockets after 10 s and advises 3-5 s. Default 4 s.
	KeepAliveInterval time.Duration
	// CloseTimeout bounds how long Close waits, after CloseStream, for the final results and
	// Metadata. Default 3 s.
	CloseTimeout time.Duration
	// WriteTimeout bounds one WebSocket write. Default 5 s.
	WriteTimeout time.Duration
	// QueueFrames is the capacity of the frame queue between Write and the socket. Default 50
	// (1 s of 20 ms frames), which also bounds the audio kept across a reconnect; each slot is
	// memory held for the call's life (640 bytes at 16 kHz).
	QueueFrames int
	// EventBuffer is the capacity of the Events channel. Default 32 (the reader waits for room).
	EventBuffer int

	// Dialer overrides the WebSocket dialer (proxy, TLS). Its HandshakeTimeout is ignored in
	// favour of DialTimeout.
	Dialer *websocket.Dialer
	// Logger receives connection-level logs (drops, reconnects). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for Event.At. Default time.Now.
	Now func() time.Time
}

// Deepgram is a Recognizer backed by Deepgram's live streaming API.
// See https://developers.deepgram.com/reference/speech-to-text/listen-streaming.
type Deepgram struct {
	cfg    DeepgramConfig
	base   *url.URL
	dialer websocket.Dialer
	log    *slog.Logger
	bo     retry.Backoff
}

// NewDeepgram validates cfg, fills defaults and returns the adapter.
func NewDeepgram(cfg DeepgramConfig) (*Deepgram, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "wss://api.deepgram.com"
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("%w: deepgram base URL: %v", ErrInvalidOptions, err)
	}
	switch u.Scheme {
	case "ws", "wss":
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return nil, fmt.Errorf("%w: deepgram base URL scheme %q", ErrInvalidOptions, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: deepgram base URL %q has no host", ErrInvalidOptions, cfg.BaseURL)
	}
	if cfg.Model == "" {
		cfg.Model = "nova-3"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.DialTimeout, 5*time.Second)
	def(&cfg.RetryBackoff, 100*time.Millisecond)
	def(&cfg.RetryBackoffMax, 2*time.Second)
	def(&cfg.ReconnectWindow, 10*time.Second)
	def(&cfg.KeepAliveInterval, 4*time.Second)
	def(&cfg.CloseTimeout, 3*time.Second)
	def(&cfg.WriteTimeout, 5*time.Second)
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	if cfg.QueueFrames <= 0 {
		cfg.QueueFrames = 50
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 32
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Deepgram{cfg: cfg, base: u, log: cfg.Logger, bo: retry.Backoff{Initial: cfg.RetryBackoff, Max: cfg.RetryBackoffMax}}
	if d.log == nil {
		d.log = slog.Default()
	}
	if cfg.Dialer != nil {
		d.dialer = *cfg.Dialer
	} else {
		d.dialer = *websocket.DefaultDialer
	}
	d.dialer.HandshakeTimeout = 0 // DialTimeout bounds the attempt through the context
	return d, nil
}

// ListenURL returns the WebSocket URL Open dials for o (query parameters included). It is
// exported for diagnostics and conformance tests.
func (d *Deepgram) ListenURL(o StreamOptions) (string, error) {
	o, err := o.normalize()
	if err != nil {
		return "", err
	}
	return d.listenURL(o), nil
}

func (d *Deepgram) listenURL(o StreamOptions) string {
	u := *d.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/listen"
	q := url.Values{}
	q.Set("encoding", o.Encoding)
	q.Set("sample_rate", strconv.Itoa(o.SampleRate))
	q.Set("channels", "1")
	model := o.Model
	if model == "" {
		model = d.cfg.Model
	}
	q.Set("model", model)
	lang := o.Language
	if lang == "" {
		lang = d.cfg.Language
	}
	if lang != "" {
		q.Set("language", lang)
	}
	// Deepgram computes UtteranceEnd from interim results, so asking for one needs the other.
	q.Set("interim_results", strconv.FormatBool(o.Interim || o.UtteranceEnd > 0))
	switch {
	case o.Endpointing > 0:
		q.Set("endpointing", strconv.FormatInt(o.Endpointing.Milliseconds(), 10))
	case o.Endpointing < 0:
		q.Set("endpointing", "false")
	}
	if o.UtteranceEnd > 0 {
		q.Set("utterance_end_ms", strconv.FormatInt(o.UtteranceEnd.Milliseconds(), 10))
	}
	q.Set("vad_events", "true")
	q.Set("smart_format", strconv.FormatBool(d.cfg.SmartFormat))
	q.Set("punctuate", strconv.FormatBool(d.cfg.Punctuate))
	// Nova-3 takes keyterm prompting; older models take keywords.
	kw := "keywords"
	if strings.HasPrefix(model, "nova-3") {
		kw = "keyterm"
	}
	for _, k := range o.Keywords {
		if k = strings.TrimSpace(k); k != "" {
			q.Add(kw, k)
		}
	}
	for k, vs := range d.cfg.ExtraParams {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Open dials Deepgram (retrying temporary failures) and starts the stream's goroutines.
func (d *Deepgram) Open(ctx context.Context, o StreamOptions) (Stream, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	u := d.listenURL(o)
	var conn *websocket.Conn
	for attempt := 0; ; attempt++ {
		conn, err = d.dial(ctx, u)
		if err == nil {
			break
		}
		if !retryable(err) || attempt >= d.cfg.MaxRetries || ctx.Err() != nil {
			return nil, err
		}
		d.log.Warn("deepgram: dial failed, retrying", "attempt", attempt+1, "err", err)
		if !retry.Wait(ctx, nil, d.bo.Delay(attempt+1)) {
			return nil, &ProviderError{Provider: "deepgram", Op: "dial", Err: ctx.Err()}
		}
	}
	s := newDeepgramStream(ctx, d, o, u)
	go s.run(conn)
	return s, nil
}

// dial makes one connection attempt and classifies its failure.
func (d *Deepgram) dial(ctx context.Context, u string) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout)
	defer cancel()
	h := http.Header{}
	if d.cfg.APIKey != "" {
		h.Set("Authorization", "Token "+d.cfg.APIKey)
	}
	conn, resp, err := d.dialer.DialContext(dctx, u, h)
	if err == nil {
		return conn, nil
	}
	pe := &ProviderError{Provider: "deepgram", Op: "dial", Err: err}
	if resp != nil {
		pe.Status = resp.StatusCode
		if resp.Body != nil {
			var body struct {
				ErrCode string `json:"err_code"`
				ErrMsg  string `json:"err_msg"`
			}
			// gorilla keeps up to 1 KiB of a failed handshake's body for us.
			if json.NewDecoder(resp.Body).Decode(&body) == nil {
				pe.Code, pe.Message = body.ErrCode, body.ErrMsg
			}
			resp.Body.Close()
		}
		if pe.Message == "" {
			pe.Message = resp.Header.Get("dg-error")
		}
	} else if dctx.Err() != nil && ctx.Err() == nil {
		pe.Err = fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return nil, pe
}

// dgMessage covers every server message of the live API: Results, UtteranceEnd,
// SpeechStarted, Metadata (and Error, which some deployments send before closing).
type dgMessage struct {
	Type string `json:"type"`
	// Results
	Start        float64         `json:"start"`
	Duration     float64         `json:"duration"`
	IsFinal      bool            `json:"is_final"`
	SpeechFinal  bool            `json:"speech_final"`
	FromFinalize bool            `json:"from_finalize"`
	Channel      json.RawMessage `json:"channel"` // object in Results, array elsewhere
	// UtteranceEnd
	LastWordEnd float64 `json:"last_word_end"`
	// SpeechStarted
	Timestamp float64 `json:"timestamp"`
	// Metadata
	RequestID string `json:"request_id"`
	// Error
	Description string `json:"description"`
	Message     string `json:"message"`
	Variant     string `json:"variant"`
}

type dgChannel struct {
	Alternatives []struct {
		Transcript string  `json:"transcript"`
		Confidence float64 `json:"confidence"`
	} `json:"alternatives"`
}

// errClosingPermanently marks a server close that reconnecting cannot fix.
var errClosingPermanently = errors.New("deepgram closed the stream for good")

// permanentClose reports whether a read error is a close Deepgram means for good: 1008 (policy
// violation: it could not decode the audio, DATA-0000) and 1003 (unsupported data).
func permanentClose(err error) bool {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code == websocket.ClosePolicyViolation || ce.Code == websocket.CloseUnsupportedData
	}
	return false
}
