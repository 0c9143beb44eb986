package stt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Sentinels. A *ProviderError matches the class sentinels with errors.Is.
var (
	// ErrClosed is returned by Write after the stream ended.
	ErrClosed = errors.New("stt: stream closed")
	// ErrInvalidOptions wraps bad configuration or stream options.
	ErrInvalidOptions = errors.New("stt: invalid options")
	// ErrAuth: the provider rejected the credentials (HTTP 401/403). Never retried.
	ErrAuth = errors.New("stt: authentication rejected")
	// ErrRateLimited: HTTP 429. Retried with backoff.
	ErrRateLimited = errors.New("stt: rate limited")
	// ErrBadRequest: the provider rejected the request (other 4xx, or a policy close). Never
	// retried.
	ErrBadRequest = errors.New("stt: request rejected")
	// ErrUnavailable: 5xx or a network failure. Retried with backoff.
	ErrUnavailable = errors.New("stt: provider unavailable")
	// ErrTimeout: the provider did not answer in time. Retried with backoff.
	ErrTimeout = errors.New("stt: provider timed out")
)

// ProviderError is a failure talking to a provider. It classifies itself: errors.Is matches
// ErrAuth, ErrRateLimited, ErrBadRequest, ErrUnavailable or ErrTimeout, and Temporary says
// whether a retry may help.
type ProviderError struct {
	// Provider names the adapter ("deepgram", "openai-stt").
	Provider string
	// Op is what failed ("dial", "stream", "transcribe").
	Op string
	// Status is the HTTP status, 0 when there was none.
	Status int
	// Code and Message are the vendor's error code and message when it sent them.
	Code, Message string
	// Err is the underlying cause (network error, close frame, context error).
	Err error
}

func (e *ProviderError) Error() string {
	s := fmt.Sprintf("stt: %s %s", e.Provider, e.Op)
	if e.Status != 0 {
		s += fmt.Sprintf(": HTTP %d", e.Status)
	}
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error { return e.Err }

// Is matches the class sentinels.
func (e *ProviderError) Is(target error) bool {
	switch target {
	case ErrAuth:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrBadRequest:
		return e.Status >= 400 && e.Status < 500 && !e.Is(ErrAuth) && !e.Is(ErrRateLimited) && e.Status != http.StatusRequestTimeout
	case ErrUnavailable:
		return e.Status >= 500 || (e.Status == 0 && e.Err != nil && !e.isTimeout() && !errors.Is(e.Err, ErrBadRequest) && !errors.Is(e.Err, context.Canceled))
	case ErrTimeout:
		return e.Status == http.StatusRequestTimeout || e.isTimeout()
	}
	return false
}

func (e *ProviderError) isTimeout() bool {
	if e.Err == nil {
		return false
	}
	if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, ErrTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}

// Temporary reports whether retrying may succeed: 5xx, 429, 408, timeouts and network errors.
func (e *ProviderError) Temporary() bool {
	return e.Is(ErrUnavailable) || e.Is(ErrRateLimited) || e.Is(ErrTimeout)
}

// retryable reports whether err is a temporary provider failure.
func retryable(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe) && pe.Temporary()
}
