// Package providererr classifies a failure talking to a vendor (HTTP status, network error,
// timeout) into the classes the adapter packages expose as sentinels. media/stt and media/tts
// each keep their own ProviderError type and sentinels (their messages name the package); the
// rules that map a failure to a class live here once.
package providererr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Classes are one package's class sentinels.
type Classes struct {
	Auth, RateLimited, BadRequest, Unavailable, Timeout error
}

// Failure is what a ProviderError holds.
type Failure struct {
	Provider, Op  string
	Status        int
	Code, Message string
	Err           error
}

// Error renders f as "<pkg>: <provider> <op>: HTTP <status> <code>: <message>: <cause>",
// leaving out the parts that are empty.
func (f Failure) Error(pkg string) string {
	s := fmt.Sprintf("%s: %s %s", pkg, f.Provider, f.Op)
	if f.Status != 0 {
		s += fmt.Sprintf(": HTTP %d", f.Status)
	}
	if f.Code != "" {
		s += " " + f.Code
	}
	if f.Message != "" {
		s += ": " + f.Message
	}
	if f.Err != nil {
		s += ": " + f.Err.Error()
	}
	return s
}

// Is reports whether f belongs to the class target (one of c's sentinels): 401/403 auth,
// 429 rate limited, other 4xx bad request, 5xx or a network failure unavailable, 408 or a
// deadline timeout.
func (f Failure) Is(c *Classes, target error) bool {
	switch target {
	case c.Auth:
		return f.Status == http.StatusUnauthorized || f.Status == http.StatusForbidden
	case c.RateLimited:
		return f.Status == http.StatusTooManyRequests
	case c.BadRequest:
		return f.Status >= 400 && f.Status < 500 && !f.Is(c, c.Auth) && !f.Is(c, c.RateLimited) && f.Status != http.StatusRequestTimeout
	case c.Unavailable:
		return f.Status >= 500 || (f.Status == 0 && f.Err != nil && !f.timedOut(c) && !errors.Is(f.Err, c.BadRequest) && !errors.Is(f.Err, context.Canceled))
	case c.Timeout:
		return f.Status == http.StatusRequestTimeout || f.timedOut(c)
	}
	return false
}

func (f Failure) timedOut(c *Classes) bool {
	if f.Err == nil {
		return false
	}
	if errors.Is(f.Err, context.DeadlineExceeded) || errors.Is(f.Err, c.Timeout) {
		return true
	}
	var ne net.Error
	return errors.As(f.Err, &ne) && ne.Timeout()
}

// Temporary reports whether retrying may succeed: 5xx, 429, 408, timeouts and network errors.
func (f Failure) Temporary(c *Classes) bool {
	return f.Is(c, c.Unavailable) || f.Is(c, c.RateLimited) || f.Is(c, c.Timeout)
}
