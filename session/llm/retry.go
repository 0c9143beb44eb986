package llm

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// RetryPolicy says how [WithRetry] retries. The zero value means 3 attempts, 100 ms base delay,
// 2 s maximum delay and no jitter.
type RetryPolicy struct {
	// Attempts is the total number of attempts, the first included. 0: 3. 1: no retries.
	Attempts int
	// BaseDelay is the wait before the second attempt; it doubles for each further attempt.
	BaseDelay time.Duration
	// MaxDelay caps the wait. A server asking (Retry-After) for longer than MaxDelay is not
	// retried: its error is returned at once, with RetryAfter set, so a live call can move on.
	MaxDelay time.Duration
	// Jitter is the fraction (0 to 1) of each wait drawn at random, so that many calls failing
	// together do not retry together.
	Jitter float64
	// OnRetry, when set, is called before each wait (for logging and metrics).
	OnRetry func(attempt int, err error, wait time.Duration)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts == 0 {
		p.Attempts = 3
	}
	if p.Attempts < 1 {
		p.Attempts = 1
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 100 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 2 * time.Second
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	p.Jitter = min(max(p.Jitter, 0), 1)
	return p
}

// backoff returns the wait after the given failed attempt (1-based), before Retry-After.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	if p.Jitter > 0 {
		d -= time.Duration(p.Jitter * rand.Float64() * float64(d))
	}
	return d
}

// WithRetry returns a Client that retries c's failures that happened before the first byte of
// the reply reached the caller ([Error.BeforeFirstByte]) and that may succeed on a new attempt
// ([Error.Retryable]): connection failures, 429, 5xx, 529, a first-token timeout, or an overload
// error sent before any content. It waits with exponential backoff and never sooner than the
// server's Retry-After. Once an event has been delivered it never retries, so the caller never
// receives a reply twice. Retries that happen inside Recv are invisible to the caller.
func WithRetry(c Client, p RetryPolicy) Client {
	return &retryClient{c: c, p: p.withDefaults()}
}

type retryClient struct {
	c Client
	p RetryPolicy
}

// Stream implements Client.
func (rc *retryClient) Stream(ctx context.Context, r Request) (Stream, error) {
	sctx, cancel := context.WithCancel(ctx)
	s := &retryStream{rc: rc, parent: ctx, ctx: sctx, cancel: cancel, req: r}
	if err := s.open(); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

type retryStream struct {
	rc      *retryClient
	parent  context.Context
	ctx     context.Context
	cancel  context.CancelFunc
	req     Request
	attempt int

	mu        sync.Mutex
	inner     Stream
	delivered bool
	closed    atomic.Bool
	closeOnce sync.Once
}

// open starts attempts until one is accepted, the error is final, or attempts run out.
func (s *retryStream) open() error {
	for {
		s.attempt++
		st, err := s.rc.c.Stream(s.ctx, s.req)
		if err == nil {
			s.mu.Lock()
			s.inner = st
			s.mu.Unlock()
			if s.closed.Load() {
				_ = st.Close()
				return ErrStreamClosed
			}
			return nil
		}
		if err := s.wait(err); err != nil {
			return err
		}
	}
}

// wait decides whether err is retried and sleeps before the next attempt. It returns the error
// to report when there is no next attempt.
func (s *retryStream) wait(err error) error {
	if s.closed.Load() {
		return ErrStreamClosed
	}
	var e *Error
	if !errors.As(err, &e) || !e.Retryable || !e.BeforeFirstByte || s.delivered || s.attempt >= s.rc.p.Attempts {
		return err
	}
	d := s.rc.p.backoff(s.attempt)
	if e.RetryAfter > 0 {
		if e.RetryAfter > s.rc.p.MaxDelay {
			return err
		}
		d = max(d, e.RetryAfter)
	}
	if s.rc.p.OnRetry != nil {
		s.rc.p.OnRetry(s.attempt, err, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.ctx.Done():
		if s.closed.Load() {
			return ErrStreamClosed
		}
		return s.parent.Err()
	}
}

// Recv implements Stream.
func (s *retryStream) Recv() (Event, error) {
	for {
		s.mu.Lock()
		inner := s.inner
		s.mu.Unlock()
		ev, err := inner.Recv()
		if err == nil {
			s.delivered = true
			return ev, nil
		}
		if s.closed.Load() {
			return Event{}, ErrStreamClosed
		}
		var e *Error
		if s.delivered || !errors.As(err, &e) {
			s.cancel() // the inner stream has ended (io.EOF or a final error)
			return Event{}, err
		}
		if werr := s.wait(err); werr != nil {
			s.cancel()
			return Event{}, werr
		}
		_ = inner.Close()
		if oerr := s.open(); oerr != nil {
			s.cancel()
			return Event{}, oerr
		}
	}
}

// Close implements Stream.
func (s *retryStream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.mu.Lock()
		inner := s.inner
		s.mu.Unlock()
		if inner != nil {
			_ = inner.Close()
		}
	})
	return nil
}
