package tts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/parley-voice/parley/media/internal/retry"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ElevenLabsConfig configures the ElevenLabs streaming adapter
// (POST {BaseURL}/v1/text-to-speech/{voice_id}/stream[/with-timestamps]).
type ElevenLabsConfig struct {
	// BaseURL of the API; default "https://api.elevenlabs.io".
	BaseURL string
	// APIKey is sent in the xi-api-key header.
	APIKey string
	// Voice is the default voice ID; Request.Voice overrides it. One of them is required.
	Voice string
	// Model is the default model_id ("eleven_flash_v2_5" when empty).
	Model string
	// OutputFormat is "pcm_16000" (default), another "pcm_<rate>" (8000, 22050, 24000, 44100,
	// 48000) or "ulaw_8000". Audio is resampled to the request's rate when it differs.
	OutputFormat string
	// WithTimestamps uses /stream/with-timestamps (JSON lines with base64 audio and character
	// alignment) so that Alignment returns word marks. It costs a little latency: a JSON line
	// must be complete before its audio can be decoded.
	WithTimestamps bool
	// VoiceSettings, when set, is sent as voice_settings.
	VoiceSettings *ElevenLabsVoiceSettings
	// OptimizeStreamingLatency (1-4) is sent as optimize_streaming_latency when not 0.
	OptimizeStreamingLatency int

	// FirstByteTimeout bounds the wait for the first audio byte (answer included). Default 5 s.
	FirstByteTimeout time.Duration
	// StallTimeout bounds the gap between reads once audio flows. Default 5 s.
	StallTimeout time.Duration
	// MaxRetries for 5xx, 429 and network failures before the answer. Default 2; negative
	// means none. 401/403, other 4xx and timeouts are never retried.
	MaxRetries int
	// RetryBackoff is the first retry delay, doubled up to RetryBackoffMax (100 ms, 1 s).
	RetryBackoff, RetryBackoffMax time.Duration
	// ReadBuffer is the size of one network read in bytes. Default 4096.
	ReadBuffer int
	// HTTPClient overrides the client (no overall timeout: streams are bounded by the above).
	HTTPClient *http.Client
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// ElevenLabsVoiceSettings is the voice_settings object; all fields are sent.
type ElevenLabsVoiceSettings struct {
	Stability       float64 `json:"stability"`
	SimilarityBoost float64 `json:"similarity_boost"`
	Style           float64 `json:"style"`
	UseSpeakerBoost bool    `json:"use_speaker_boost"`
	Speed           float64 `json:"speed,omitempty"`
}

// ElevenLabs is a Synthesizer backed by ElevenLabs' HTTP streaming API.
type ElevenLabs struct {
	cfg    ElevenLabsConfig
	base   string
	format sampleFormat
	rate   int
	log    *slog.Logger
}

// NewElevenLabs validates cfg, fills defaults and returns the adapter.
func NewElevenLabs(cfg ElevenLabsConfig) (*ElevenLabs, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.elevenlabs.io"
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: elevenlabs base URL %q", ErrInvalidOptions, cfg.BaseURL)
	}
	if cfg.Model == "" {
		cfg.Model = "eleven_flash_v2_5"
	}
	if cfg.OutputFormat == "" {
		cfg.OutputFormat = "pcm_16000"
	}
	e := &ElevenLabs{cfg: cfg, base: strings.TrimSuffix(cfg.BaseURL, "/"), log: cfg.Logger}
	switch {
	case cfg.OutputFormat == "ulaw_8000":
		e.format, e.rate = formatMulaw, 8000
	case strings.HasPrefix(cfg.OutputFormat, "pcm_"):
		e.rate, err = strconv.Atoi(strings.TrimPrefix(cfg.OutputFormat, "pcm_"))
		if err != nil || e.rate < 8000 || e.rate > 48000 {
			return nil, fmt.Errorf("%w: elevenlabs output format %q", ErrInvalidOptions, cfg.OutputFormat)
		}
	default:
		return nil, fmt.Errorf("%w: elevenlabs output format %q (want pcm_<rate> or ulaw_8000)", ErrInvalidOptions, cfg.OutputFormat)
	}
	httpDefaults(&cfg.FirstByteTimeout, &cfg.StallTimeout, &cfg.MaxRetries, &cfg.RetryBackoff, &cfg.RetryBackoffMax, &cfg.ReadBuffer, &cfg.HTTPClient)
	e.cfg = cfg
	if e.log == nil {
		e.log = slog.Default()
	}
	return e, nil
}

// httpDefaults fills the timing and transport defaults shared by the HTTP adapters.
func httpDefaults(firstByte, stall *time.Duration, retries *int, bo, boMax *time.Duration, readBuf *int, client **http.Client) {
	if *firstByte <= 0 {
		*firstByte = 5 * time.Second
	}
	if *stall <= 0 {
		*stall = 5 * time.Second
	}
	if *retries == 0 {
		*retries = 2
	}
	if *bo <= 0 {
		*bo = 100 * time.Millisecond
	}
	if *boMax <= 0 {
		*boMax = time.Second
	}
	if *readBuf <= 0 {
		*readBuf = 4096
	}
	if *client == nil {
		*client = &http.Client{}
	}
}

// elevenBody is the request JSON.
type elevenBody struct {
	Text          string                   `json:"text"`
	ModelID       string                   `json:"model_id"`
	LanguageCode  string                   `json:"language_code,omitempty"`
	VoiceSettings *ElevenLabsVoiceSettings `json:"voice_settings,omitempty"`
}

// Synthesize starts streaming r.Text.
func (e *ElevenLabs) Synthesize(ctx context.Context, r Request) (Stream, error) {
	r, err := r.normalize()
	if err != nil {
		return nil, err
	}
	voice := r.Voice
	if voice == "" {
		voice = e.cfg.Voice
	}
	if voice == "" {
		return nil, fmt.Errorf("%w: elevenlabs needs a voice ID", ErrInvalidRequest)
	}
	model := r.Model
	if model == "" {
		model = e.cfg.Model
	}
	body, err := json.Marshal(elevenBody{Text: r.Text, ModelID: model, LanguageCode: primaryLanguage(r.Language), VoiceSettings: e.cfg.VoiceSettings})
	if err != nil {
		return nil, err
	}
	path := "/v1/text-to-speech/" + url.PathEscape(voice) + "/stream"
	accept := "audio/*"
	if e.cfg.WithTimestamps {
		path += "/with-timestamps"
		accept = "application/json"
	}
	q := url.Values{"output_format": {e.cfg.OutputFormat}}
	if e.cfg.OptimizeStreamingLatency > 0 {
		q.Set("optimize_streaming_latency", strconv.Itoa(e.cfg.OptimizeStreamingLatency))
	}
	h := http.Header{}
	h.Set("xi-api-key", e.cfg.APIKey)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", accept)
	spec := &httpSpec{
		provider: "elevenlabs", client: e.cfg.HTTPClient, url: e.base + path + "?" + q.Encode(), header: h, body: body,
		maxRetries: e.cfg.MaxRetries, bo: retry.Backoff{Initial: e.cfg.RetryBackoff, Max: e.cfg.RetryBackoffMax},
		firstByte: e.cfg.FirstByteTimeout, log: e.log, parseErr: parseElevenError,
	}
	resp, cancel, w, err := spec.open(ctx)
	if err != nil {
		return nil, err
	}
	var src chunkSource = &readerSource{r: resp.Body, buf: make([]byte, e.cfg.ReadBuffer), hz: e.rate}
	var al *aligner
	if e.cfg.WithTimestamps {
		al = newAligner(r.Text)
		bps := e.rate * 2
		if e.format == formatMulaw {
			bps = e.rate
		}
		src = &elevenLinesSource{br: bufio.NewReaderSize(resp.Body, max(e.cfg.ReadBuffer, 16<<10)), hz: e.rate, bytesPerSec: bps, al: al}
	}
	s := newHTTPStream("elevenlabs", resp, cancel, w, src, e.format, r.SampleRate, e.cfg.StallTimeout)
	s.marks = al
	return s, nil
}

// parseElevenError reads {"detail":{"status":…,"message":…}}, the 422 list form
// {"detail":[{"loc":…,"msg":…}]} or {"detail":"…"}.
func parseElevenError(raw []byte) (code, msg string) {
	var env struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &env) != nil || len(env.Detail) == 0 {
		return "", truncate(strings.TrimSpace(string(raw)), 300)
	}
	var obj struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if json.Unmarshal(env.Detail, &obj) == nil && (obj.Status != "" || obj.Message != "") {
		return obj.Status, obj.Message
	}
	var list []struct {
		Loc  []any  `json:"loc"`
		Msg  string `json:"msg"`
		Type string `json:"type"`
	}
	if json.Unmarshal(env.Detail, &list) == nil && len(list) > 0 {
		return list[0].Type, fmt.Sprintf("%v: %s", list[0].Loc, list[0].Msg)
	}
	var s string
	if json.Unmarshal(env.Detail, &s) == nil {
		return "", s
	}
	return "", truncate(string(env.Detail), 300)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// elevenLinesSource reads /stream/with-timestamps: one JSON object per line, each with
// audio_base64 and an alignment {characters, character_start_times_seconds,
// character_end_times_seconds}.
type elevenLinesSource struct {
	br          *bufio.Reader
	line        []byte
	audio       []byte
	hz          int
	bytesPerSec int
	decoded     int64 // audio bytes before the current chunk
	al          *aligner
}

type elevenChunk struct {
	AudioBase64 string           `json:"audio_base64"`
	Alignment   *elevenAlignment `json:"alignment"`
}

type elevenAlignment struct {
	Characters []string  `json:"characters"`
	Starts     []float64 `json:"character_start_times_seconds"`
	Ends       []float64 `json:"character_end_times_seconds"`
}

func (s *elevenLinesSource) rate() int { return s.hz }

func (s *elevenLinesSource) next() ([]byte, error) {
	for {
		line, err := s.readLine()
		if line = bytes.TrimSpace(line); len(line) > 0 {
			audio, perr := s.parse(line)
			if perr != nil {
				if errors.Is(err, io.EOF) {
					perr = fmt.Errorf("truncated stream: %w", perr)
				}
				return nil, perr
			}
			if len(audio) > 0 || err != nil {
				return audio, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
	}
}

// readLine returns the next line (without allocating unless it outgrows the reader's buffer).
func (s *elevenLinesSource) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		b, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.line = append(s.line, b...)
			continue
		}
		if len(s.line) > 0 {
			s.line = append(s.line, b...)
			return s.line, err
		}
		return b, err
	}
}

func (s *elevenLinesSource) parse(line []byte) ([]byte, error) {
	var c elevenChunk
	if err := json.Unmarshal(line, &c); err != nil {
		return nil, fmt.Errorf("bad with-timestamps chunk: %w", err)
	}
	n := base64.StdEncoding.DecodedLen(len(c.AudioBase64))
	if cap(s.audio) < n {
		s.audio = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(s.audio[:n], []byte(c.AudioBase64))
	if err != nil {
		return nil, fmt.Errorf("bad audio_base64: %w", err)
	}
	if c.Alignment != nil && s.al != nil {
		start := time.Duration(s.decoded * int64(time.Second) / int64(s.bytesPerSec))
		s.al.add(c.Alignment.Characters, c.Alignment.Starts, c.Alignment.Ends, start)
	}
	s.decoded += int64(n)
	return s.audio[:n], nil
}
