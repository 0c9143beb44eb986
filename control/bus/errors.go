package bus

import "errors"

// Sentinel errors. Every error a Bus returns wraps one of these or the cause from the backend
// (a network error, a context error), so callers compare with errors.Is.
var (
	// ErrNotFound: Get found no live key (it never existed, was deleted, or expired).
	ErrNotFound = errors.New("bus: key not found")
	// ErrClosed: the Bus was closed; no further operation is possible.
	ErrClosed = errors.New("bus: closed")
	// ErrInvalid: a bad argument (empty key or channel, negative TTL, bad Limit).
	ErrInvalid = errors.New("bus: invalid argument")
	// ErrNotInteger: IncrBy on a key whose value is not a base-10 64-bit integer, or whose
	// result would overflow.
	ErrNotInteger = errors.New("bus: value is not an integer or out of range")
)
