// Package retry holds the retry delays and waits the speech adapters (media/stt, media/tts)
// share. It must never sleep on a frame path: only connection set-up and reconnects use it.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff computes retry delays: exponential from Initial, capped at Max, with "equal jitter"
// (a random delay in [d/2, d]) so that many streams that lost the same server do not retry in
// lock step.
type Backoff struct {
	Initial, Max time.Duration
}

// Delay returns the wait before retry number attempt (0-based). Attempt 0 waits nothing: the
// first retry is immediate, because a dropped call loses audio every millisecond it waits.
func (b Backoff) Delay(attempt int) time.Duration {
	if attempt <= 0 {
		return 0
	}
	d := b.Initial
	if d <= 0 {
		d = 100 * time.Millisecond
	}
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// Wait sleeps for d or until one of ctx or stop ends; it reports whether the full delay passed.
func Wait(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}
