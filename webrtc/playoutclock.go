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
// late packet), every 20 ms the clock produces the overdue frames of those receivers itself, on
// its own goroutine: no goroutine per call waits to be woken for it. The clock only runs while
// receivers are registered; a tick reads one atomic per receiver and works only for the overdue
// ones (a concealed or DTX frame: a decode and the engine's frame path, some microseconds).
type playoutClock struct {
	period time.Duration
	now    func() time.Duration

	mu      sync.Mutex
	rx      []*audioReceiver
	changed chan struct{} // the set went from empty to not, or back

	due []*audioReceiver // tick's scratch: the receivers overdue at this tick
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

// tick produces the overdue frames of every receiver whose next frame is overdue at now. The
// receivers are taken under the lock and served after it, so that registering a call never
// waits for a tick's decoding. Only one goroutine ticks (run, or a test).
func (c *playoutClock) tick(now time.Duration) {
	c.mu.Lock()
	for _, r := range c.rx {
		if r.overdue(now) {
			c.due = append(c.due, r)
		}
	}
	c.mu.Unlock()
	for i, r := range c.due {
		r.catchUp(now)
		c.due[i] = nil
	}
	c.due = c.due[:0]
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
