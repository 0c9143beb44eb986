package jobs

import (
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with jitter: before attempt n+1 a failed job waits between
// half and all of Base·2^(n-1), capped at Max ("equal jitter"), so that jobs failing together
// spread out while each still waits at least half its step.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
	// Rand returns a number in [0, n); nil means math/rand/v2.
	Rand func(n int64) int64
}

// DefaultBackoff waits about 1 s, 2 s, 4 s … up to an hour.
var DefaultBackoff = Backoff{Base: time.Second, Max: time.Hour}

// Delay is how long to wait after the failure of attempt (1 for the first).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Base
	if d <= 0 {
		d = time.Second
	}
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	half := d / 2
	r := rand.Int64N
	if b.Rand != nil {
		r = b.Rand
	}
	return d - half + time.Duration(r(int64(half)+1))
}
