package tts

import (
	"errors"

	"github.com/parley-voice/parley/media/internal/providererr"
)

// Sentinels. A *ProviderError matches the class sentinels with errors.Is.
var (
	// ErrClosed is returned by Read after Close.
	ErrClosed = errors.New("tts: stream closed")
	// ErrInvalidOptions wraps bad adapter configuration.
	ErrInvalidOptions = errors.New("tts: invalid options")
	// ErrInvalidRequest wraps a Request no adapter can serve (empty text, bad rate).
	ErrInvalidRequest = errors.New("tts: invalid request")
	// ErrAuth: the provider rejected the credentials (HTTP 401/403). Never retried.
	ErrAuth = errors.New("tts: authentication rejected")
	// ErrRateLimited: HTTP 429. Retried with backoff.
	ErrRateLimited = errors.New("tts: rate limited")
	// ErrBadRequest: the provider rejected the request (other 4xx, or a policy close). Never
	// retried.
	ErrBadRequest = errors.New("tts: request rejected")
	// ErrUnavailable: 5xx or a network failure. Retried with backoff.
	ErrUnavailable = errors.New("tts: provider unavailable")
	// ErrTimeout: the provider did not send its first byte in time, or stalled mid-stream.
	// Not retried (the caller's latency budget is already spent).
	ErrTimeout = errors.New("tts: provider timed out")
)

// ProviderError is a failure talking to a provider. It classifies itself: errors.Is matches
// ErrAuth, ErrRateLimited, ErrBadRequest, ErrUnavailable or ErrTimeout, and Temporary says
// whether a retry may help.
type ProviderError struct {
	// Provider names the adapter ("elevenlabs", "openai-tts", "espeak-ng").
	Provider string
	// Op is what failed ("synthesize", "read").
	Op string
	// Status is the HTTP status, 0 when there was none.
	Status int
	// Code and Message are the vendor's error code and message when it sent them.
	Code, Message string
	// Err is the underlying cause (network error, close frame, context error).
	Err error
}

// classes are this package's class sentinels, for the shared rules.
var classes = providererr.Classes{Auth: ErrAuth, RateLimited: ErrRateLimited, BadRequest: ErrBadRequest, Unavailable: ErrUnavailable, Timeout: ErrTimeout}

func (e *ProviderError) failure() providererr.Failure {
	return providererr.Failure{Provider: e.Provider, Op: e.Op, Status: e.Status, Code: e.Code, Message: e.Message, Err: e.Err}
}

func (e *ProviderError) Error() string { return e.failure().Error("tts") }

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error { return e.Err }

// Is matches the class sentinels.
func (e *ProviderError) Is(target error) bool { return e.failure().Is(&classes, target) }

// Temporary reports whether retrying may succeed: 5xx, 429, 408, timeouts and network errors.
func (e *ProviderError) Temporary() bool { return e.failure().Temporary(&classes) }

// retryable reports whether err is a temporary provider failure.
func retryable(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe) && pe.Temporary()
}
