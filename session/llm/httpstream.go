package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// decoder turns one vendor's server-sent events into Events.
type decoder interface {
	// event handles one SSE event, appending what it yields to out. end reports that the event
	// was the stream's end marker (the decoder has then appended the Done event). A returned
	// *Error is a failure the server reported inside the stream.
	event(ev sseEvent, out []Event) (_ []Event, end bool, err error)
	// eof is called when the body ends before the end marker. A decoder that has seen enough
	// (a finish reason) completes the reply; otherwise it returns an error.
	eof(out []Event) ([]Event, error)
}

// httpStream is the part of a Stream both adapters share: the HTTP response, the SSE reader, the
// timeouts, error classification and the queue of decoded events.
type httpStream struct {
	provider string
	parent   context.Context
	cancel   context.CancelCauseFunc
	ctx      context.Context
	body     io.ReadCloser
	sse      sseReader
	dec      decoder
	wd       *watchdog

	pending   []Event
	head      int
	delivered bool  // an event has reached the caller
	ended     bool  // the end marker was decoded; Done is queued
	err       error // sticky: io.EOF after Done, or the failure

	closed    atomic.Bool
	closeOnce sync.Once
}

// startStream sends the request and waits for the answer's headers. It is shared by both adapters;
// hdr sets the vendor's headers. No goroutine is started before the request is written.
func startStream(ctx context.Context, e *endpoint, provider string, body []byte, hdr func(http.Header), dec decoder) (Stream, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	wd := newWatchdog(e.cfg.FirstTokenTimeout, e.cfg.IdleTimeout, cancel)
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		wd.stop()
		cancel(nil)
		return nil, &Error{Provider: provider, Code: CodeInvalidRequest, Message: err.Error(), BeforeFirstByte: true, Err: err}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	hdr(h)
	for k, v := range e.cfg.Headers {
		h.Set(k, v)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		wd.stop()
		cause := context.Cause(sctx)
		cancel(nil)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(cause, ErrFirstTokenTimeout) {
			return nil, &Error{Provider: provider, Code: CodeFirstTokenTimeout, Message: "no answer within the first-token timeout",
				Retryable: true, BeforeFirstByte: true, Err: ErrFirstTokenTimeout}
		}
		if errors.Is(cause, ErrIdleTimeout) {
			return nil, &Error{Provider: provider, Code: CodeIdleTimeout, Message: "no answer within the idle timeout",
				Retryable: true, BeforeFirstByte: true, Err: ErrIdleTimeout}
		}
		return nil, &Error{Provider: provider, Code: CodeConnection, Message: err.Error(), Retryable: true, BeforeFirstByte: true, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		wd.stop()
		cancel(nil)
		code, msg := parseErrorBody(b)
		if code == "" {
			code = CodeHTTP
		}
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return nil, &Error{Provider: provider, Status: resp.StatusCode, Code: code, Message: msg,
			Retryable: retryableStatus(resp.StatusCode), BeforeFirstByte: true,
			RetryAfter: parseRetryAfter(resp.Header, time.Now())}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		// The server ignored "stream": true, or answered 200 with an error object.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		wd.stop()
		cancel(nil)
		code, msg := parseErrorBody(b)
		if code == "" {
			code, msg = CodeBadStream, "expected text/event-stream, got application/json"
		}
		return nil, &Error{Provider: provider, Status: resp.StatusCode, Code: code, Message: msg, BeforeFirstByte: true}
	}
	s := &httpStream{provider: provider, parent: ctx, cancel: cancel, ctx: sctx, body: resp.Body, dec: dec, wd: wd}
	s.sse.reset(resp.Body)
	s.pending = make([]Event, 0, 4)
	return s, nil
}

// Recv implements Stream.
func (s *httpStream) Recv() (Event, error) {
	if s.head < len(s.pending) {
		return s.pop(), nil
	}
	if s.err != nil {
		return Event{}, s.err
	}
	if s.closed.Load() {
		s.err = ErrStreamClosed
		return Event{}, s.err
	}
	if s.ended {
		s.finish()
		s.err = io.EOF
		return Event{}, io.EOF
	}
	s.pending, s.head = s.pending[:0], 0
	for len(s.pending) == 0 {
		ev, err := s.sse.next()
		if err != nil {
			if err == io.EOF && s.ctx.Err() == nil {
				out, derr := s.dec.eof(s.pending)
				if derr == nil {
					s.pending, s.ended = out, true
					break
				}
				err = derr
			}
			s.err = s.classify(err)
			s.shutdown()
			return Event{}, s.err
		}
		s.wd.activity()
		out, end, derr := s.dec.event(ev, s.pending)
		s.pending = out
		if derr != nil {
			s.pending = s.pending[:0]
			s.err = s.classify(derr)
			s.shutdown()
			return Event{}, s.err
		}
		if end {
			s.ended = true
		}
	}
	return s.pop(), nil
}

func (s *httpStream) pop() Event {
	ev := s.pending[s.head]
	s.pending[s.head] = Event{}
	s.head++
	if !s.delivered {
		s.delivered = true
		s.wd.firstEvent()
	}
	return ev
}

// classify turns a read or decode failure into the error Recv reports.
func (s *httpStream) classify(err error) error {
	if s.closed.Load() {
		return ErrStreamClosed
	}
	if perr := s.parent.Err(); perr != nil {
		return perr
	}
	e := &Error{Provider: s.provider}
	var ve *Error
	cause := context.Cause(s.ctx)
	switch {
	case errors.As(err, &ve):
		*e = *ve
	case s.ctx.Err() != nil && errors.Is(cause, ErrFirstTokenTimeout):
		e.Code, e.Message, e.Retryable, e.Err = CodeFirstTokenTimeout, "no first token within the first-token timeout", true, ErrFirstTokenTimeout
	case s.ctx.Err() != nil && errors.Is(cause, ErrIdleTimeout):
		e.Code, e.Message, e.Retryable, e.Err = CodeIdleTimeout, "stream idle for longer than the idle timeout", true, ErrIdleTimeout
	case errors.Is(err, errSSETooLarge):
		e.Code, e.Message, e.Err = CodeBadStream, err.Error(), err
	case err == io.EOF:
		e.Code, e.Message, e.Retryable = CodeIncomplete, "the stream ended before its end marker", true
	default:
		e.Code, e.Message, e.Retryable, e.Err = CodeConnection, err.Error(), true, err
	}
	e.BeforeFirstByte = !s.delivered
	if s.delivered {
		e.Retryable = false // part of the reply was delivered: a retry would repeat it
	}
	return e
}

// finish reads the end of a completed response so that its connection can be reused, then
// releases everything.
func (s *httpStream) finish() {
	s.wd.drain()
	_, _ = io.Copy(io.Discard, io.LimitReader(s.body, 64<<10))
	s.shutdown()
}

// shutdown stops the watchdog, closes the body and releases the context.
func (s *httpStream) shutdown() {
	s.wd.stop()
	_ = s.body.Close()
	s.cancel(context.Canceled)
}

// Close implements Stream.
func (s *httpStream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.wd.stop()
		s.cancel(ErrStreamClosed)
		_ = s.body.Close()
	})
	return nil
}

// parseErrorBody extracts a code and a message from a vendor's error JSON:
// OpenAI {"error":{"message","type","code"}}, Anthropic {"type":"error","error":{"type","message"}},
// Ollama {"error":"text"}, llama.cpp {"error":{"code":500,"message","type"}}.
func parseErrorBody(b []byte) (code, msg string) {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &env) != nil {
		t := bytes.TrimSpace(b)
		if len(t) > 512 {
			t = t[:512]
		}
		return "", string(t)
	}
	var s string
	if json.Unmarshal(env.Error, &s) == nil {
		return "", s
	}
	var obj errorObject
	if json.Unmarshal(env.Error, &obj) == nil {
		return obj.code(), obj.Message
	}
	return "", env.Message
}

// errorObject is the "error" member of OpenAI and Anthropic error bodies and stream events.
type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// code prefers a string or numeric "code", then "type".
func (o *errorObject) code() string {
	if len(o.Code) > 0 {
		var s string
		if json.Unmarshal(o.Code, &s) == nil && s != "" {
			return s
		}
		var n int
		if json.Unmarshal(o.Code, &n) == nil && n != 0 {
			if o.Type != "" {
				return o.Type
			}
			return strconv.Itoa(n)
		}
	}
	return o.Type
}

// streamError turns an error object sent inside a stream into an *Error.
func streamError(provider string, o *errorObject) *Error {
	c := o.code()
	if c == "" {
		c = "stream_error"
	}
	return &Error{Provider: provider, Code: c, Message: o.Message,
		Retryable: retryableCode(o.Type) || retryableCode(c)}
}
