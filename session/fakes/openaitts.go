package fakes

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// OpenAITTSFakeOptions configure an OpenAITTSFake.
type OpenAITTSFakeOptions struct {
	// APIKey is the key accepted in "Authorization: Bearer <key>". Empty accepts any non-empty
	// key.
	APIKey string
	// FirstByte is the time from the request to the first audio byte (headers go with it).
	FirstByte time.Duration
	// Speed is how many times faster than real time audio is sent after the first byte.
	// 0 means 4; negative sends everything at once.
	Speed float64
	// PerChar is the audio length per character of input. Default 60 ms.
	PerChar time.Duration
	// ToneHz and Amplitude (0..1) shape the tone. Defaults 440 Hz and 0.3.
	ToneHz, Amplitude float64
	// Chunk is the audio per write. Default 40 ms.
	Chunk time.Duration
	// Espeak renders real speech with espeak-ng (falls back to the tone when missing).
	Espeak bool
	// FailStatus, when not 0, answers every (valid) request with that status and OpenAI's
	// error JSON.
	FailStatus int
	// StallBeforeFirstByte holds the request without answering until the client gives up.
	StallBeforeFirstByte bool
	// StallAfterBytes, when > 0, stops sending after that many audio bytes and holds the
	// connection open.
	StallAfterBytes int
}

func (o OpenAITTSFakeOptions) withDefaults() OpenAITTSFakeOptions {
	e := ElevenLabsFakeOptions{Speed: o.Speed, PerChar: o.PerChar, ToneHz: o.ToneHz, Amplitude: o.Amplitude, Chunk: o.Chunk}.withDefaults()
	o.Speed, o.PerChar, o.ToneHz, o.Amplitude, o.Chunk = e.Speed, e.PerChar, e.ToneHz, e.Amplitude, e.Chunk
	return o
}

// OpenAITTSFakeRequest is what the fake recorded about one request.
type OpenAITTSFakeRequest struct {
	Method, Path string
	Header       http.Header
	// Body is the decoded JSON body (nil if it was not JSON); RawBody the bytes.
	Body    map[string]any
	RawBody []byte
	Status  int
	Espeak  bool
	At      time.Time
}

// OpenAITTSRate is the sample rate of the fake's (and OpenAI's) "pcm" output.
const OpenAITTSRate = 24000

// OpenAITTSFake is an http.Handler for POST /v1/audio/speech ({model, input, voice,
// response_format, speed, instructions}) streaming 24 kHz 16-bit little-endian PCM ("pcm") or
// a WAV of it ("wav"), chunked. The audio is a tone whose length follows the input (or
// espeak-ng speech).
type OpenAITTSFake struct {
	mu     sync.Mutex
	opts   OpenAITTSFakeOptions
	reqs   []OpenAITTSFakeRequest
	closed bool
	done   chan struct{}
}

// NewOpenAITTSFake returns a fake with o (defaults filled in).
func NewOpenAITTSFake(o OpenAITTSFakeOptions) *OpenAITTSFake {
	return &OpenAITTSFake{opts: o.withDefaults(), done: make(chan struct{})}
}

// Options returns the current options.
func (f *OpenAITTSFake) Options() OpenAITTSFakeOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opts
}

// SetOptions replaces the options for later requests.
func (f *OpenAITTSFake) SetOptions(o OpenAITTSFakeOptions) {
	f.mu.Lock()
	f.opts = o.withDefaults()
	f.mu.Unlock()
}

// Requests returns a copy of the recorded requests, oldest first.
func (f *OpenAITTSFake) Requests() []OpenAITTSFakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]OpenAITTSFakeRequest(nil), f.reqs...)
}

// Close releases stalled requests. It is idempotent.
func (f *OpenAITTSFake) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	f.mu.Unlock()
	return nil
}

// ServeHTTP handles POST /v1/audio/speech.
func (f *OpenAITTSFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	o := f.opts
	f.mu.Unlock()
	rec := OpenAITTSFakeRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), At: time.Now()}
	status := http.StatusOK
	defer func() {
		rec.Status = status
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
	}()
	fail := func(st int, typ, msg string, param, code any) {
		status = st
		oaiAudioError(w, st, typ, msg, param, code)
	}
	if r.URL.Path != "/v1/audio/speech" {
		fail(http.StatusNotFound, "invalid_request_error", "Invalid URL (POST "+r.URL.Path+")", nil, nil)
		return
	}
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "invalid_request_error", "Only POST is allowed", nil, nil)
		return
	}
	if !oaiAudioAuth(w, r, o.APIKey) {
		status = http.StatusUnauthorized
		return
	}
	rec.RawBody, _ = io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var body map[string]any
	if err := json.Unmarshal(rec.RawBody, &body); err != nil {
		fail(http.StatusBadRequest, "invalid_request_error", "We could not parse the JSON body of your request.", nil, nil)
		return
	}
	rec.Body = body
	str := func(k string) (string, bool) { s, ok := body[k].(string); return s, ok }
	for _, k := range []string{"model", "input", "voice"} {
		if s, ok := str(k); !ok || s == "" {
			fail(http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("'%s' is a required property", k), k, nil)
			return
		}
	}
	input, _ := str("input")
	if n := len([]rune(input)); n > 4096 {
		fail(http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("String should have at most 4096 characters (got %d)", n), "input", "string_above_max_length")
		return
	}
	format := "mp3"
	if v, present := body["response_format"]; present {
		s, ok := v.(string)
		if !ok {
			fail(http.StatusBadRequest, "invalid_request_error", "response_format must be a string", "response_format", nil)
			return
		}
		format = s
	}
	switch format {
	case "pcm", "wav":
	case "mp3", "opus", "aac", "flac":
		fail(http.StatusBadRequest, "invalid_request_error", "response_format "+format+" is not produced by this fake (pcm, wav)", "response_format", nil)
		return
	default:
		fail(http.StatusBadRequest, "invalid_request_error", "Invalid value for response_format: "+format, "response_format", "invalid_value")
		return
	}
	if v, present := body["speed"]; present {
		sp, ok := v.(float64)
		if !ok || sp < 0.25 || sp > 4 {
			fail(http.StatusBadRequest, "invalid_request_error", "speed must be a number between 0.25 and 4.0", "speed", nil)
			return
		}
	}
	if v, present := body["instructions"]; present {
		if _, ok := v.(string); !ok {
			fail(http.StatusBadRequest, "invalid_request_error", "instructions must be a string", "instructions", nil)
			return
		}
	}
	if o.FailStatus != 0 {
		fail(o.FailStatus, "server_error", "The server had an error while processing your request (injected).", nil, nil)
		return
	}
	start := time.Now()
	if o.StallBeforeFirstByte {
		audioStall(r.Context(), f.done)
		status = 499
		return
	}
	pcm, used := audioSpeech(r.Context(), input, OpenAITTSRate, o.ToneHz, o.Amplitude, o.PerChar, o.Espeak, "")
	rec.Espeak = used
	data := make([]byte, 0, 44+2*len(pcm))
	ct := "audio/pcm"
	if format == "wav" {
		ct = "audio/wav"
		data = oaiAudioWAVHeader(data, len(pcm), OpenAITTSRate)
	}
	data = audioLE(data, pcm)
	flusher, _ := w.(http.Flusher)
	wrote := false
	audioSend(r.Context(), f.done, start, data, 2*OpenAITTSRate, 2, audioPacing{FirstByte: o.FirstByte, Speed: o.Speed, Chunk: o.Chunk, StallAfterBytes: o.StallAfterBytes},
		func(chunk []byte, _, _ int) error {
			if !wrote {
				wrote = true
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(http.StatusOK)
			}
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		})
}

// oaiAudioWAVHeader appends a 44-byte mono 16-bit PCM WAV header for n samples.
func oaiAudioWAVHeader(dst []byte, n, rate int) []byte {
	var h [44]byte
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], uint32(36+2*n))
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], 1)
	binary.LittleEndian.PutUint16(h[22:], 1)
	binary.LittleEndian.PutUint32(h[24:], uint32(rate))
	binary.LittleEndian.PutUint32(h[28:], uint32(2*rate))
	binary.LittleEndian.PutUint16(h[32:], 2)
	binary.LittleEndian.PutUint16(h[34:], 16)
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], uint32(2*n))
	return append(dst, h[:]...)
}
