package stt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
)

// TestProviderErrorClasses is the table of failures → classes → retry decisions.
func TestProviderErrorClasses(t *testing.T) {
	netErr := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	tests := []struct {
		name      string
		err       *ProviderError
		class     error
		temporary bool
	}{
		{"401", &ProviderError{Status: 401}, ErrAuth, false},
		{"403", &ProviderError{Status: 403}, ErrAuth, false},
		{"400", &ProviderError{Status: 400}, ErrBadRequest, false},
		{"404", &ProviderError{Status: 404}, ErrBadRequest, false},
		{"408", &ProviderError{Status: 408}, ErrTimeout, true},
		{"429", &ProviderError{Status: 429}, ErrRateLimited, true},
		{"500", &ProviderError{Status: 500}, ErrUnavailable, true},
		{"503", &ProviderError{Status: 503}, ErrUnavailable, true},
		{"network", &ProviderError{Err: netErr}, ErrUnavailable, true},
		{"deadline", &ProviderError{Err: context.DeadlineExceeded}, ErrTimeout, true},
		{"wrapped timeout", &ProviderError{Err: fmt.Errorf("%w: slow", ErrTimeout)}, ErrTimeout, true},
		{"cancelled", &ProviderError{Err: context.Canceled}, nil, false},
	}
	classes := []error{ErrAuth, ErrBadRequest, ErrTimeout, ErrRateLimited, ErrUnavailable}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range classes {
				if got := errors.Is(tt.err, c); got != (c == tt.class) {
					t.Errorf("errors.Is(%v, %v) = %v", tt.err, c, got)
				}
			}
			if tt.err.Temporary() != tt.temporary || retryable(fmt.Errorf("wrapped: %w", tt.err)) != tt.temporary {
				t.Errorf("Temporary = %v, want %v", tt.err.Temporary(), tt.temporary)
			}
			if tt.err.Error() == "" {
				t.Error("empty message")
			}
		})
	}
}
