package webrtc

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/parley-voice/parley/media"
)

// monoEpoch is the origin of the service's monotonic media clock (monoNow).
var monoEpoch = time.Now()

// monoNow reads the monotonic media clock: arrival times, the playout schedule and RTCP delays
// are all durations since monoEpoch.
func monoNow() time.Duration { return time.Since(monoEpoch) }

// playoutClock is the service's one fallback clock for every receive path. While a page sends
// audio, the arrival of each packet drives its call's playout (see audioReceiver), so a call
// costs no timer wake-up of its own; when a page goes quiet (Opus DTX in its silences, loss, a
// late packet), every 20 ms the clock nudges the receivers whose next frame is overdue and
// their fallback goroutine produces it. The clock only runs while receivers are registered,
// and a tick only reads one atomic per receiver.
type playoutClock struct {
	period time.Duration
	now    func() time.Duration

	mu      sync.Mutex
	rx      []*audioReceiver
	changed chan struct{} // the set went from empty to not, or back
}

func newPlayoutClock() *playoutClock {
	return &playoutClock{period: media.FrameDuration, now: monoNow, changed: make(chan struct{}, 1)}
}

// add registers r until remove is called (remove is idempotent).
func (c *playoutClock) add(r *audioReceiver) (remove func()) {
	c.mu.Lock()
	c.rx = append(c.rx, r)
	first := len(c.rx) == 1
	c.mu.Unlock()
	if first {
		c.signal()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.rx = slices.DeleteFunc(c.rx, func(x *audioReceiver) bool { return x == r })
			last := len(c.rx) == 0
			c.mu.Unlock()
			if last {
				c.signal()
			}
		})
	}
}

func (c *playoutClock) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// len returns how many receivers are registered.
func (c *playoutClock) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.rx)
}

// tick nudges every receiver whose next frame is overdue at now.
func (c *playoutClock) tick(now time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.rx {
		if r.overdue(now) {
			r.nudge()
		}
	}
}

// run ticks every period while receivers are registered, until ctx ends.
func (c *playoutClock) run(ctx context.Context) {
	t := time.NewTicker(c.period)
	t.Stop()
	running := false
	for {
		switch n := c.len(); {
		case n > 0 && !running:
			t.Reset(c.period)
			running = true
		case n == 0 && running:
			t.Stop()
			running = false
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.changed:
		case <-t.C:
			c.tick(c.now())
		}
	}
}
