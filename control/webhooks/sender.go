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
	"net/http"
	"strconv"
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
	Log    *slog.Logger
	Now    func() time.Time
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
	snd, m, ok, err := s.Service.Prepare(ctx, id)
	if err != nil || !ok {
		return err // nothing to send (receiver deleted, delivery settled) is done
	}
	if snd.Receiver.DisabledAt != nil && snd.Event.Type != store.WebhookTestEvent {
		return s.Service.Skip(ctx, j, snd)
	}
	r := s.post(ctx, m)
	if ctx.Err() != nil {
		// The worker stops or lost the lease: this attempt does not count; the job runs again.
		return fmt.Errorf("webhooks: delivery %s: %w", id, context.Cause(ctx))
	}
	_, err = s.Service.Record(ctx, j, snd, r, once)
	return err
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
