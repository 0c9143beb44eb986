// Package webhooks sends webhook deliveries (issue 14): the handler of the job kind
// store.WebhookDeliverKind. For each job it reads the delivery, signs it (Standard Webhooks
// v1), POSTs it through the SSRF guard's client (the address actually dialled is checked, no
// redirect is followed, 15 s at most) and hands the outcome to the domain (app/webhooks), which
// records the attempt and completes or reschedules the job in one transaction.
//
// It is the only part of webhooks that speaks HTTP; the rules live in control/app/webhooks. It
// must never log a signing secret or a delivery's body.
package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	appwebhooks "github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/store"
)

// Timeout bounds one attempt: connecting, sending and reading the answer's head and first
// bytes.
const Timeout = 15 * time.Second

// drainLimit is how much of an answer's body beyond the kept 2 KB is read so that the
// connection can be used again; a longer body costs the connection instead (a 5 MB answer
// does not hold a slot).
const drainLimit = 64 << 10

// Sender sends deliveries.
type Sender struct {
	Service *appwebhooks.Service
	// Client is the SSRF guard's client (netguard.Guard.Client(Timeout)).
	Client *http.Client
	// PerReceiver bounds the deliveries to one receiver in flight at once from this sender
	// (0: DefaultPerReceiver); a delivery over it waits DeferFor, so that a slow receiver holds
	// its share of the worker's slots and never all of them.
	PerReceiver int
	Log         *slog.Logger
	Now         func() time.Time

	mu       sync.Mutex
	inflight map[store.ReceiverID]int
}

// DefaultPerReceiver is the default of Sender.PerReceiver.
const DefaultPerReceiver = 8

// DeferFor is how long a delivery to a receiver at its PerReceiver bound waits.
const DeferFor = 2 * time.Second

// take counts a delivery to r in flight, unless r has its most.
func (s *Sender) take(r store.ReceiverID) bool {
	limit := s.PerReceiver
	if limit <= 0 {
		limit = DefaultPerReceiver
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == nil {
		s.inflight = map[store.ReceiverID]int{}
	}
	if s.inflight[r] >= limit {
		return false
	}
	s.inflight[r]++
	return true
}

func (s *Sender) release(r store.ReceiverID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[r]--; s.inflight[r] <= 0 {
		delete(s.inflight, r)
	}
}

func (s *Sender) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Handle is the job handler of store.WebhookDeliverKind.
func (s *Sender) Handle(ctx context.Context, j *jobs.Job) error {
	id, once, err := store.DeliveryIDOf(j.Payload)
	if err != nil {
		return jobs.Permanent(err)
	}
	snd, m, ok, err := s.Service.Prepare(ctx, id, once)
	if err != nil || !ok {
		return err // nothing to send (receiver deleted, delivery settled) is done
	}
	if snd.Receiver.DisabledAt != nil && snd.Event.Type != store.WebhookTestEvent {
		return s.Service.Skip(ctx, j, snd)
	}
	if !s.take(snd.Receiver.ID) {
		return s.Service.Defer(ctx, j, s.now().Add(DeferFor+time.Duration(rand.Int64N(int64(DeferFor)))))
	}
	r := s.post(ctx, m)
	s.release(snd.Receiver.ID)
	if ctx.Err() != nil {
		// The worker stops or lost the lease: this attempt does not count; the job runs again.
		return fmt.Errorf("webhooks: delivery %s: %w", id, context.Cause(ctx))
	}
	return s.Service.Record(ctx, j, snd, r, once)
}

// post makes one attempt.
func (s *Sender) post(ctx context.Context, m appwebhooks.Message) appwebhooks.Result {
	start := s.now()
	r := appwebhooks.Result{At: start}
	h, err := m.Headers(start)
	if err != nil {
		r.Err = err
		return r
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		r.Err = err
		return r
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	mono := time.Now()
	resp, err := s.Client.Do(req)
	if err != nil {
		r.Duration = time.Since(mono)
		r.Err = unwrapURLError(err)
		return r
	}
	defer resp.Body.Close()
	r.StatusCode = resp.StatusCode
	b, err := io.ReadAll(io.LimitReader(resp.Body, store.MaxAttemptBody))
	r.Body = string(b)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	}
	r.Duration = time.Since(mono)
	if d, ok := retryAfter(resp.Header.Get("Retry-After"), start); ok {
		r.RetryAfter, r.HasRetry = d, true
	}
	return r
}

// unwrapURLError drops the *url.Error wrapping ("Post \"https://…\": …"): the attempt's URL is
// the receiver's own.
func unwrapURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// retryAfter reads a Retry-After header (RFC 9110 §10.2.3): seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
