package fakes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// OpenAISTTFakeOptions configure an OpenAISTTFake.
type OpenAISTTFakeOptions struct {
	// APIKey is the key accepted in "Authorization: Bearer <key>". Empty accepts any non-empty
	// key; a missing or wrong key is refused with 401 and OpenAI's error JSON.
	APIKey string
	// Script holds the transcript returned for each request, in turn (cycling).
	Script []string
	// Latency is the processing time before the answer is sent.
	Latency time.Duration
	// FailStatus, when not 0, answers every request with that status and an error JSON.
	FailStatus int
	// FailFirst, when > 0, answers only the first FailFirst requests with FailStatus (500
	// when FailStatus is 0).
	FailFirst int
}

// OpenAISTTFakeRequest is what the fake recorded about one request.
type OpenAISTTFakeRequest struct {
	Header http.Header
	// Fields are the multipart form's text fields (model, language, response_format, …).
	Fields map[string]string
	// FileName and FileContentType describe the "file" part.
	FileName, FileContentType string
	// FileBytes is the size of the uploaded file.
	FileBytes int
	// WAV format of the file, and the duration and RMS (0..1) of its audio.
	SampleRate, Channels, Bits int
	AudioDuration              time.Duration
	RMS                        float64
	// Status is the HTTP status the fake answered.
	Status int
	At     time.Time
}

// OpenAISTTFake is an http.Handler for POST /v1/audio/transcriptions (multipart/form-data with
// file, model, language, prompt, response_format) that answers a scripted transcript after a
// configurable latency. It validates the request like the vendor (auth, required fields,
// response_format) and accepts PCM WAV files.
type OpenAISTTFake struct {
	mu     sync.Mutex
	opts   OpenAISTTFakeOptions
	reqs   []OpenAISTTFakeRequest
	served int
	line   int
	closed bool
	done   chan struct{}
}

// NewOpenAISTTFake returns a fake with o.
func NewOpenAISTTFake(o OpenAISTTFakeOptions) *OpenAISTTFake {
	return &OpenAISTTFake{opts: oaiAudioSTTDefaults(o), done: make(chan struct{})}
}

func oaiAudioSTTDefaults(o OpenAISTTFakeOptions) OpenAISTTFakeOptions {
	if len(o.Script) == 0 {
		o.Script = []string{"hello there", "i would like to book a table for two", "thank you very much"}
	}
	return o
}

// Options returns the current options.
func (f *OpenAISTTFake) Options() OpenAISTTFakeOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opts
}

// SetOptions replaces the options for later requests.
func (f *OpenAISTTFake) SetOptions(o OpenAISTTFakeOptions) {
	f.mu.Lock()
	f.opts = oaiAudioSTTDefaults(o)
	f.mu.Unlock()
}

// Requests returns a copy of the recorded requests, oldest first.
func (f *OpenAISTTFake) Requests() []OpenAISTTFakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]OpenAISTTFakeRequest(nil), f.reqs...)
}

// Close releases requests waiting out their latency. It is idempotent.
func (f *OpenAISTTFake) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	f.mu.Unlock()
	return nil
}

// openAIError writes OpenAI's error shape: {"error":{"message","type","param","code"}}.
func oaiAudioError(w http.ResponseWriter, status int, typ, msg string, param, code any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": param, "code": code}})
}

// openAIAuth checks "Authorization: Bearer <key>" and answers 401 like the vendor.
func oaiAudioAuth(w http.ResponseWriter, r *http.Request, want string) bool {
	h := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || key == "" {
		oaiAudioError(w, http.StatusUnauthorized, "invalid_request_error",
			"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", nil, nil)
		return false
	}
	if want != "" && key != want {
		oaiAudioError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.", nil, "invalid_api_key")
		return false
	}
	return true
}

// ServeHTTP handles POST /v1/audio/transcriptions.
func (f *OpenAISTTFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	o := f.opts
	f.mu.Unlock()
	rec := OpenAISTTFakeRequest{Header: r.Header.Clone(), Fields: map[string]string{}, At: time.Now()}
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
	if r.URL.Path != "/v1/audio/transcriptions" {
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
	f.mu.Lock()
	f.served++
	n := f.served
	f.mu.Unlock()
	if o.FailStatus != 0 && o.FailFirst == 0 || o.FailFirst > 0 && n <= o.FailFirst {
		st := o.FailStatus
		if st == 0 {
			st = http.StatusInternalServerError
		}
		fail(st, "server_error", "The server had an error while processing your request (injected).", nil, nil)
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		fail(http.StatusBadRequest, "invalid_request_error", "Invalid Content-Type header (expected multipart/form-data)", nil, nil)
		return
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		fail(http.StatusBadRequest, "invalid_request_error", "Could not parse multipart form: "+err.Error(), nil, nil)
		return
	}
	for k, vs := range r.MultipartForm.Value {
		if len(vs) > 0 {
			rec.Fields[k] = vs[0]
		}
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		fail(http.StatusBadRequest, "invalid_request_error", "you must provide a file", "file", nil)
		return
	}
	data, err := io.ReadAll(io.LimitReader(file, 25<<20+1))
	file.Close()
	if err != nil {
		fail(http.StatusBadRequest, "invalid_request_error", "could not read file", "file", nil)
		return
	}
	rec.FileName, rec.FileContentType, rec.FileBytes = hdr.Filename, hdr.Header.Get("Content-Type"), len(data)
	if len(data) > 25<<20 {
		fail(http.StatusRequestEntityTooLarge, "invalid_request_error", "Maximum content size limit (26214400) exceeded", "file", nil)
		return
	}
	if rec.Fields["model"] == "" {
		fail(http.StatusBadRequest, "invalid_request_error", "you must provide a model parameter", "model", nil)
		return
	}
	format := rec.Fields["response_format"]
	switch format {
	case "", "json", "verbose_json", "text":
	default:
		fail(http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("response_format %q is not supported by this fake (json, verbose_json, text)", format), "response_format", nil)
		return
	}
	wav, err := audioParseWAV(data)
	if err == nil && wav.Bits != 16 {
		err = errors.New("only 16-bit PCM")
	}
	if err != nil {
		fail(http.StatusBadRequest, "invalid_request_error", "Invalid file format ("+err.Error()+"). This fake accepts PCM WAV.", "file", nil)
		return
	}
	rec.SampleRate, rec.Channels, rec.Bits = wav.Rate, wav.Channels, wav.Bits
	pcm := audioSamplesLE(wav.Data)
	if wav.Rate > 0 && wav.Channels > 0 {
		rec.AudioDuration = time.Duration(int64(len(pcm)/wav.Channels) * int64(time.Second) / int64(wav.Rate))
	}
	rec.RMS = audioRMS(pcm)

	if o.Latency > 0 && !audioWaitUntil(r.Context(), f.done, time.Now().Add(o.Latency)) {
		status = 499 // client gone
		return
	}
	f.mu.Lock()
	text := o.Script[f.line%len(o.Script)]
	f.line++
	f.mu.Unlock()
	switch format {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, text+"\n")
	case "verbose_json":
		w.Header().Set("Content-Type", "application/json")
		secs := rec.AudioDuration.Seconds()
		lang := rec.Fields["language"]
		if lang == "" {
			lang = "english"
		}
		json.NewEncoder(w).Encode(map[string]any{
			"task": "transcribe", "language": lang, "duration": secs, "text": text,
			"segments": []map[string]any{{
				"id": 0, "seek": 0, "start": 0.0, "end": secs, "text": " " + text, "tokens": []int{},
				"temperature": 0.0, "avg_logprob": -0.1, "compression_ratio": 1.0, "no_speech_prob": 0.01,
			}},
		})
	default:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"text": text})
	}
}
