package fakes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ScriptOptions configures a fake LLM server ([OpenAIChatFake], [AnthropicFake]).
type ScriptOptions struct {
	// Script gives the replies. nil: an empty script, so every reply is the fallback echo.
	Script *Script
	// APIKey, when set, must be presented (Authorization: Bearer for OpenAI, x-api-key for
	// Anthropic); otherwise the fake answers 401 like the vendor.
	APIKey string
	// FirstTokenDelay is the time from the request to the first token.
	FirstTokenDelay time.Duration
	// TokensPerSecond paces the tokens after the first. 0: as fast as possible.
	TokensPerSecond float64
	// ArgChunkBytes is the size of the pieces tool-call arguments are streamed in. 0: 8.
	ArgChunkBytes int
}

// ScriptRequest is one request a fake received, recorded before it is validated.
type ScriptRequest struct {
	Method string
	Path   string
	Header http.Header
	Raw    []byte         // the body as sent
	Body   map[string]any // the body parsed as JSON (nil when it is not a JSON object)
	Status int            // the status the fake answered with
}

// scriptFault is one injected failure; each applies to one request.
type scriptFault struct {
	kind        int
	status      int
	retryAfter  time.Duration
	afterTokens int
}

const (
	scriptFaultFail = iota + 1
	scriptFaultDrop
	scriptFaultStall
)

// scriptServer is what both LLM fakes share: options, injected faults, the request log and the
// token pacing.
type scriptServer struct {
	mu       sync.Mutex
	script   *Script
	apiKey   string
	first    time.Duration
	tps      float64
	argChunk int
	faults   []scriptFault
	requests []ScriptRequest
	dropped  int // requests forgotten (Forget): the log's first entry is request number dropped
	seq      uint64

	done      chan struct{}
	closeOnce sync.Once
}

func newScriptServer(o ScriptOptions) *scriptServer {
	s := &scriptServer{script: o.Script, apiKey: o.APIKey, first: o.FirstTokenDelay,
		tps: o.TokensPerSecond, argChunk: o.ArgChunkBytes, done: make(chan struct{})}
	if s.script == nil {
		s.script = NewScript()
	}
	if s.argChunk <= 0 {
		s.argChunk = 8
	}
	return s
}

// Script returns the script the fake answers from.
func (s *scriptServer) Script() *Script { return s.script }

// SetLatency changes the time to first token and the pace of the following tokens
// (0 tokens per second: no pacing).
func (s *scriptServer) SetLatency(firstToken time.Duration, tokensPerSecond float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.first, s.tps = firstToken, tokensPerSecond
}

// FailNext makes the next n requests fail before the first token with the given HTTP status
// (500 when 0) and the vendor's error body; retryAfter > 0 adds Retry-After and retry-after-ms.
// Later requests succeed again.
func (s *scriptServer) FailNext(n, status int, retryAfter time.Duration) {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	s.addFaults(n, scriptFault{kind: scriptFaultFail, status: status, retryAfter: retryAfter})
}

// DropNext makes the next n requests lose their connection after afterTokens tokens (0: before
// the first token, once the 200 answer's headers were sent).
func (s *scriptServer) DropNext(n, afterTokens int) {
	s.addFaults(n, scriptFault{kind: scriptFaultDrop, afterTokens: afterTokens})
}

// StallNext makes the next n requests stop sending after afterTokens tokens (0: before the first
// token), without closing, until the client goes away or the fake is closed.
func (s *scriptServer) StallNext(n, afterTokens int) {
	s.addFaults(n, scriptFault{kind: scriptFaultStall, afterTokens: afterTokens})
}

func (s *scriptServer) addFaults(n int, f scriptFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults = append(s.faults, f)
	}
}

// Requests returns a copy of the requests received so far, oldest first.
func (s *scriptServer) Requests() []ScriptRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ScriptRequest(nil), s.requests...)
}

// Close releases stalled requests. It is idempotent; the fake keeps answering new requests.
func (s *scriptServer) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}

// record reads and logs the request, returning its index in the log, its body and the body
// parsed as a JSON object (nil when it is not one).
func (s *scriptServer) record(r *http.Request) (int, []byte, map[string]any, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	rec := ScriptRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
	var body map[string]any
	if json.Unmarshal(raw, &body) == nil {
		rec.Body = body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
	return s.dropped + len(s.requests) - 1, raw, body, err
}

func (s *scriptServer) setStatus(i, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i -= s.dropped; i >= 0 && i < len(s.requests) {
		s.requests[i].Status = status
	}
}

// Forget drops the request log so far (a soak's fake would otherwise grow with every call);
// requests still being answered are no longer listed.
func (s *scriptServer) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped += len(s.requests)
	s.requests = nil
}

// take pops the next fault and snapshots the pacing.
func (s *scriptServer) take() (f scriptFault, first time.Duration, tps float64, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) > 0 {
		f = s.faults[0]
		s.faults = s.faults[1:]
	}
	s.seq++
	return f, s.first, s.tps, s.seq
}

// errScriptStopped ends a reply whose client went away or whose fake was closed while stalled.
var errScriptStopped = errors.New("fakes: stopped")

// scriptPacer writes one streamed reply: it waits before each token, flushes after each event and
// applies an injected drop or stall.
type scriptPacer struct {
	ctx    context.Context
	done   <-chan struct{}
	w      http.ResponseWriter
	flush  func()
	first  time.Duration
	gap    time.Duration
	fault  scriptFault
	sent   int
	timer  *time.Timer
	buf    []byte
	failed bool
}

func newScriptPacer(ctx context.Context, done <-chan struct{}, w http.ResponseWriter, first time.Duration, tps float64, f scriptFault) *scriptPacer {
	p := &scriptPacer{ctx: ctx, done: done, w: w, first: first, fault: f}
	if tps > 0 {
		p.gap = time.Duration(float64(time.Second) / tps)
	}
	p.flush = func() {}
	if fl, ok := w.(http.Flusher); ok {
		p.flush = fl.Flush
	}
	return p
}

// token waits for the next token's turn, or applies the fault due at this token.
func (p *scriptPacer) token() error {
	if p.fault.kind != 0 && p.sent >= p.fault.afterTokens {
		return p.applyFault()
	}
	d := p.gap
	if p.sent == 0 {
		d = p.first
	}
	if d > 0 {
		if p.timer == nil {
			p.timer = time.NewTimer(d)
		} else {
			p.timer.Reset(d)
		}
		select {
		case <-p.timer.C:
		case <-p.ctx.Done():
			return errScriptStopped
		case <-p.done:
			return errScriptStopped
		}
	}
	if p.ctx.Err() != nil {
		return errScriptStopped
	}
	p.sent++
	return nil
}

// event writes one server-sent event (an "event:" line when name is set, then one "data:" line)
// and flushes it.
func (p *scriptPacer) event(name string, data []byte) error {
	b := p.buf[:0]
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, '\n', '\n')
	p.buf = b
	if _, err := p.w.Write(b); err != nil {
		p.failed = true
		return errScriptStopped
	}
	p.flush()
	return nil
}

// end is called before the reply's closing events: a drop or stall set for more tokens than the
// reply has happens here, before the reply is complete.
func (p *scriptPacer) end() error {
	if p.fault.kind != 0 {
		return p.applyFault()
	}
	return nil
}

func (p *scriptPacer) applyFault() error {
	p.flush()
	switch p.fault.kind {
	case scriptFaultDrop:
		panic(http.ErrAbortHandler) // net/http closes the connection without ending the response
	case scriptFaultStall:
		select {
		case <-p.ctx.Done():
		case <-p.done:
		}
		return errScriptStopped
	}
	return nil
}

func (p *scriptPacer) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// waitFirst is used by non-streamed replies: it waits the first-token delay.
func (p *scriptPacer) waitFirst() error {
	if p.fault.kind == scriptFaultDrop {
		panic(http.ErrAbortHandler)
	}
	if p.fault.kind == scriptFaultStall {
		select {
		case <-p.ctx.Done():
		case <-p.done:
		}
		return errScriptStopped
	}
	if p.first <= 0 {
		return nil
	}
	t := time.NewTimer(p.first)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-p.ctx.Done():
	case <-p.done:
	}
	return errScriptStopped
}

// scriptTokens splits text into the pieces a model would stream: words with the space before them.
func scriptTokens(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' && text[i-1] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// scriptChunks splits s into pieces of about n bytes, never inside a UTF-8 sequence.
func scriptChunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
			for cut < len(s) && !utf8.RuneStart(s[cut]) {
				cut++
			}
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if len(s) > 0 {
		out = append(out, s)
	}
	return out
}

// scriptInputTokens estimates prompt tokens from the body size (about four bytes a token).
func scriptInputTokens(raw []byte) int {
	return max(1, len(raw)/4)
}

// scriptRetryAfter sets Retry-After (whole seconds, rounded up, RFC 9110 §10.2.3) and the
// millisecond variant OpenAI's clients read.
func scriptRetryAfter(h http.Header, d time.Duration) {
	if d <= 0 {
		return
	}
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
	h.Set("Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
}

// scriptWriteJSON answers with a JSON body.
func scriptWriteJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// scriptStartSSE sends the headers of a streamed answer at once.
func scriptStartSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// scriptJSON returns v's JSON text.
func scriptJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Helpers reading a request parsed into map[string]any.

func scriptStr(m map[string]any, k string) (string, bool) {
	v, ok := m[k].(string)
	return v, ok
}

func scriptIsObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

func scriptPositiveInt(v any) bool {
	f, ok := v.(float64)
	return ok && f >= 1 && f == math.Trunc(f)
}

// validImageData reports whether s is standard base64 (what both vendors require).
func scriptBase64OK(s string) bool {
	if len(s) == 0 || len(s)%4 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return !strings.Contains(strings.TrimRight(s, "="), "=")
}
