package llm

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinels, compared with errors.Is. An [*Error] wraps the first two as its cause.
var (
	// ErrFirstTokenTimeout: no part of the reply arrived within Config.FirstTokenTimeout.
	ErrFirstTokenTimeout = errors.New("llm: no first token within the first-token timeout")
	// ErrIdleTimeout: the stream went quiet for longer than Config.IdleTimeout.
	ErrIdleTimeout = errors.New("llm: stream idle for longer than the idle timeout")
	// ErrStreamClosed is returned by Recv after Close.
	ErrStreamClosed = errors.New("llm: stream closed")
)

// Error codes set by this package itself (vendor codes are passed through as they come).
const (
	CodeConnection        = "connection"          // dial, TLS or read failure
	CodeFirstTokenTimeout = "first_token_timeout" // see ErrFirstTokenTimeout
	CodeIdleTimeout       = "idle_timeout"        // see ErrIdleTimeout
	CodeIncomplete        = "incomplete_stream"   // the stream ended without its end marker
	CodeBadStream         = "bad_stream"          // the server sent something that is not the protocol
	CodeInvalidRequest    = "invalid_request"     // the Request cannot be encoded (checked before sending)
	CodeHTTP              = "http_error"          // an HTTP error whose body named no code
)

// Error is a failed model call. It classifies itself: Retryable says a new attempt may succeed
// (rate limits, overload, server errors, dropped connections, timeouts); BeforeFirstByte says no
// part of the reply had reached the caller yet, so retrying cannot repeat output.
type Error struct {
	Provider        string // "openai" or "anthropic"
	Status          int    // the HTTP status; 0 when the failure was not an HTTP answer
	Code            string // the vendor's error code or type, or one of the Code constants
	Message         string
	Retryable       bool
	BeforeFirstByte bool
	RetryAfter      time.Duration // the server's Retry-After, when it sent one
	Err             error         // the underlying cause, if any
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("llm: ")
	if e.Provider != "" {
		b.WriteString(e.Provider)
		b.WriteString(": ")
	}
	if e.Status != 0 {
		b.WriteString(strconv.Itoa(e.Status))
		b.WriteByte(' ')
	}
	b.WriteString(e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if !e.BeforeFirstByte {
		b.WriteString(" (mid-stream)")
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// retryableStatus reports whether an HTTP status is worth another attempt: request timeout,
// conflict/lock, too early, rate limited, and every server error (Anthropic's 529 "overloaded"
// included).
func retryableStatus(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return true
	case status >= 500:
		return true
	}
	return false
}

// retryableCode reports whether an error type sent inside a stream (where there is no status)
// is transient.
func retryableCode(code string) bool {
	switch code {
	case "overloaded_error", "api_error", "rate_limit_error", "server_error", "timeout_error",
		"rate_limit_exceeded", "service_unavailable":
		return true
	}
	return false
}

// parseRetryAfter reads how long the server asked us to wait: the non-standard but common
// retry-after-ms header (milliseconds), else Retry-After (RFC 9110 §10.2.3: delay-seconds or an
// HTTP-date). It returns 0 when neither is usable.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || secs > 1e6 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
