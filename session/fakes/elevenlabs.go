package fakes

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ElevenLabsFakeOptions configure an ElevenLabsFake.
type ElevenLabsFakeOptions struct {
	// APIKey is the key accepted in the xi-api-key header. Empty accepts any non-empty key.
	APIKey string
	// FirstByte is the time from the request to the first audio byte (headers go with it).
	FirstByte time.Duration
	// Speed is how many times faster than real time audio is sent after the first byte.
	// 0 means 4; negative sends everything at once.
	Speed float64
	// PerChar is the audio length per character of text. Default 60 ms.
	PerChar time.Duration
	// ToneHz and Amplitude (0..1) shape the tone. Defaults 440 Hz and 0.3.
	ToneHz, Amplitude float64
	// Chunk is the audio per write. Default 40 ms.
	Chunk time.Duration
	// Espeak renders real speech with espeak-ng (falls back to the tone when missing).
	Espeak bool
	// Voices lists the accepted voice IDs; empty accepts any.
	Voices []string
	// FailStatus, when not 0, answers every request with that status and the vendor's error
	// JSON (after validation).
	FailStatus int
	// StallBeforeFirstByte holds the request without answering until the client gives up.
	StallBeforeFirstByte bool
	// StallAfterBytes, when > 0, stops sending after that many audio bytes (decoded audio for
	// with-timestamps) and holds the connection open.
	StallAfterBytes int
}

func (o ElevenLabsFakeOptions) withDefaults() ElevenLabsFakeOptions {
	if o.Speed == 0 {
		o.Speed = 4
	}
	if o.PerChar <= 0 {
		o.PerChar = 60 * time.Millisecond
	}
	if o.ToneHz <= 0 {
		o.ToneHz = 440
	}
	if o.Amplitude <= 0 {
		o.Amplitude = 0.3
	}
	if o.Chunk <= 0 {
		o.Chunk = 40 * time.Millisecond
	}
	return o
}

// ElevenLabsFakeRequest is what the fake recorded about one request.
type ElevenLabsFakeRequest struct {
	// Path is the escaped request path.
	Method, Path string
	// VoiceID is the {voice_id} path segment, unescaped.
	VoiceID string
	// WithTimestamps is set for /stream/with-timestamps.
	WithTimestamps bool
	Query          url.Values
	Header         http.Header
	// Body is the decoded JSON body (nil if it was not JSON); RawBody the bytes.
	Body    map[string]any
	RawBody []byte
	// Status is the HTTP status answered; Espeak whether espeak-ng made the audio.
	Status int
	Espeak bool
	At     time.Time
}

// ElevenLabsFake is an http.Handler for ElevenLabs text-to-speech streaming:
// POST /v1/text-to-speech/{voice_id}/stream (raw audio) and
// POST /v1/text-to-speech/{voice_id}/stream/with-timestamps (newline-delimited JSON chunks with
// audio_base64 and a character alignment), output_format pcm_{8000,16000,22050,24000,44100,48000}
// or ulaw_8000. The audio is a tone whose length follows the text (or espeak-ng speech).
type ElevenLabsFake struct {
	mu     sync.Mutex
	opts   ElevenLabsFakeOptions
	reqs   []ElevenLabsFakeRequest
	closed bool
	done   chan struct{}
}

// NewElevenLabsFake returns a fake with o (defaults filled in).
func NewElevenLabsFake(o ElevenLabsFakeOptions) *ElevenLabsFake {
	return &ElevenLabsFake{opts: o.withDefaults(), done: make(chan struct{})}
}

// Options returns the current options.
func (f *ElevenLabsFake) Options() ElevenLabsFakeOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opts
}

// SetOptions replaces the options for later requests.
func (f *ElevenLabsFake) SetOptions(o ElevenLabsFakeOptions) {
	f.mu.Lock()
	f.opts = o.withDefaults()
	f.mu.Unlock()
}

// Requests returns a copy of the recorded requests, oldest first.
func (f *ElevenLabsFake) Requests() []ElevenLabsFakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ElevenLabsFakeRequest(nil), f.reqs...)
}

// Close releases stalled requests. It is idempotent.
func (f *ElevenLabsFake) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	f.mu.Unlock()
	return nil
}

// elevenError writes ElevenLabs' error shape {"detail":{"status":…,"message":…}}.
func elevenError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"detail": map[string]string{"status": code, "message": msg}})
}

// elevenValidation writes a 422 in the FastAPI validation shape ElevenLabs uses.
func elevenValidation(w http.ResponseWriter, loc []any, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	json.NewEncoder(w).Encode(map[string]any{"detail": []map[string]any{{"type": typ, "loc": loc, "msg": msg}}})
}

// elevenFormat parses output_format into encoding and rate.
func elevenFormat(s string) (mulaw bool, rate int, err error) {
	switch {
	case s == "ulaw_8000":
		return true, 8000, nil
	case strings.HasPrefix(s, "pcm_"):
		r, err := strconv.Atoi(strings.TrimPrefix(s, "pcm_"))
		switch r {
		case 8000, 16000, 22050, 24000, 44100, 48000:
			return false, r, err
		}
	}
	return false, 0, fmt.Errorf("output_format %q is not produced by this fake (pcm_8000…pcm_48000, ulaw_8000)", s)
}

// ServeHTTP handles the streaming text-to-speech routes.
func (f *ElevenLabsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	o := f.opts
	f.mu.Unlock()
	rec := ElevenLabsFakeRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Header: r.Header.Clone(), At: time.Now()}
	status := http.StatusOK
	defer func() {
		rec.Status = status
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
	}()
	fail := func(st int, code, msg string) { status = st; elevenError(w, st, code, msg) }

	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/text-to-speech/")
	parts := strings.Split(rest, "/")
	switch {
	case !ok || parts[0] == "":
		fail(http.StatusNotFound, "not_found", "Not Found")
		return
	case len(parts) == 2 && parts[1] == "stream":
	case len(parts) == 3 && parts[1] == "stream" && parts[2] == "with-timestamps":
		rec.WithTimestamps = true
	default:
		fail(http.StatusNotFound, "not_found", "Not Found")
		return
	}
	rec.VoiceID, _ = url.PathUnescape(parts[0])
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "method_not_allowed", "Method Not Allowed")
		return
	}
	key := r.Header.Get("xi-api-key")
	if key == "" {
		fail(http.StatusUnauthorized, "needs_authorization", "Neither authorization header nor xi-api-key received, please provide one.")
		return
	}
	if o.APIKey != "" && key != o.APIKey {
		fail(http.StatusUnauthorized, "invalid_api_key", "Invalid API key")
		return
	}
	rec.RawBody, _ = io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var body map[string]any
	if err := json.Unmarshal(rec.RawBody, &body); err != nil {
		status = http.StatusUnprocessableEntity
		elevenValidation(w, []any{"body", 0}, "json_invalid", "JSON decode error")
		return
	}
	rec.Body = body
	text, isStr := body["text"].(string)
	if _, present := body["text"]; !present {
		status = http.StatusUnprocessableEntity
		elevenValidation(w, []any{"body", "text"}, "missing", "Field required")
		return
	}
	if !isStr {
		status = http.StatusUnprocessableEntity
		elevenValidation(w, []any{"body", "text"}, "string_type", "Input should be a valid string")
		return
	}
	if strings.TrimSpace(text) == "" {
		fail(http.StatusBadRequest, "empty_text", "Text must not be empty.")
		return
	}
	for _, k := range []string{"model_id", "language_code"} {
		if v, present := body[k]; present && v != nil {
			if _, ok := v.(string); !ok {
				status = http.StatusUnprocessableEntity
				elevenValidation(w, []any{"body", k}, "string_type", "Input should be a valid string")
				return
			}
		}
	}
	if vs, present := body["voice_settings"]; present && vs != nil {
		m, ok := vs.(map[string]any)
		if !ok {
			status = http.StatusUnprocessableEntity
			elevenValidation(w, []any{"body", "voice_settings"}, "model_type", "Input should be a valid dictionary")
			return
		}
		for k, v := range m {
			switch k {
			case "stability", "similarity_boost", "style", "speed":
				if _, ok := v.(float64); !ok && v != nil {
					status = http.StatusUnprocessableEntity
					elevenValidation(w, []any{"body", "voice_settings", k}, "float_type", "Input should be a valid number")
					return
				}
			case "use_speaker_boost":
				if _, ok := v.(bool); !ok && v != nil {
					status = http.StatusUnprocessableEntity
					elevenValidation(w, []any{"body", "voice_settings", k}, "bool_type", "Input should be a valid boolean")
					return
				}
			}
		}
	}
	format := r.URL.Query().Get("output_format")
	if format == "" {
		format = "mp3_44100_128" // the vendor's default, which this fake cannot make
	}
	mulaw, rate, err := elevenFormat(format)
	if err != nil {
		fail(http.StatusBadRequest, "unsupported_output_format", err.Error())
		return
	}
	if len(o.Voices) > 0 && !elevenHasVoice(o.Voices, rec.VoiceID) {
		fail(http.StatusNotFound, "voice_not_found", "A voice with the voice_id "+rec.VoiceID+" was not found.")
		return
	}
	if o.FailStatus != 0 {
		fail(o.FailStatus, "internal_error", "injected failure")
		return
	}
	start := time.Now()
	if o.StallBeforeFirstByte {
		audioStall(r.Context(), f.done)
		status = 499
		return
	}
	lang, _ := body["language_code"].(string)
	pcm, used := audioSpeech(r.Context(), text, rate, o.ToneHz, o.Amplitude, o.PerChar, o.Espeak, lang)
	rec.Espeak = used
	var data []byte
	frame := 2
	if mulaw {
		frame = 1
		data = make([]byte, len(pcm))
		for i, v := range pcm {
			data[i] = audioLinearToMulaw(v)
		}
	} else {
		data = audioLE(make([]byte, 0, 2*len(pcm)), pcm)
	}
	bps := rate * frame
	pacing := audioPacing{FirstByte: o.FirstByte, Speed: o.Speed, Chunk: o.Chunk, StallAfterBytes: o.StallAfterBytes}
	flusher, _ := w.(http.Flusher)
	wrote := false
	header := func(ct string) {
		if !wrote {
			wrote = true
			w.Header().Set("Content-Type", ct)
			w.Header().Set("request-id", dgFakeID())
			w.WriteHeader(http.StatusOK)
		}
	}
	if !rec.WithTimestamps {
		audioSend(r.Context(), f.done, start, data, bps, frame, pacing, func(chunk []byte, _, _ int) error {
			header("audio/pcm")
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		})
		return
	}
	runes := []rune(text)
	total := float64(len(data)) / float64(bps)
	perChar := total / float64(max(1, len(runes)))
	next := 0 // next character to align
	var line bytes.Buffer
	audioSend(r.Context(), f.done, start, data, bps, frame, pacing, func(chunk []byte, from, to int) error {
		header("application/json")
		end := float64(to) / float64(bps)
		al := elevenAlignment{Characters: []string{}, Starts: []float64{}, Ends: []float64{}}
		for next < len(runes) && (float64(next)*perChar < end || to == len(data)) {
			al.Characters = append(al.Characters, string(runes[next]))
			al.Starts = append(al.Starts, elevenRound3(float64(next)*perChar))
			al.Ends = append(al.Ends, elevenRound3(float64(next+1)*perChar))
			next++
		}
		line.Reset()
		json.NewEncoder(&line).Encode(map[string]any{
			"audio_base64":         base64.StdEncoding.EncodeToString(chunk),
			"alignment":            al,
			"normalized_alignment": al,
		})
		if _, err := w.Write(line.Bytes()); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
}

// elevenAlignment is the documented character alignment object.
type elevenAlignment struct {
	Characters []string  `json:"characters"`
	Starts     []float64 `json:"character_start_times_seconds"`
	Ends       []float64 `json:"character_end_times_seconds"`
}

func elevenRound3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

func elevenHasVoice(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Forget drops the recorded requests (a soak's fakes would otherwise grow with every call).
func (f *ElevenLabsFake) Forget() {
	f.mu.Lock()
	f.reqs = nil
	f.mu.Unlock()
}
