package webrtc

import (
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

// playoutClock is the service's one clock for every receive path. While a page sends audio,
// the arrival of each packet drives its call's playout (see audioReceiver), so a call costs no
// timer wake-up of its own; every 20 ms the clock steps each receiver's playout, which produces
// the frames owed when the packets fell behind (Opus DTX in the page's silences, loss, a late
// packet). It has no goroutine or timer of its own either: while receivers are registered it is
// one stream of the process's shared media clock (media.SharedClock, which also paces the
// agents' voices), so the whole process wakes once per 20 ms per clock shard for both. A step
// whose packets are on time is a counter under the receiver's mutex; an owed frame is a
// concealment or a silence frame and the engine's frame path (some microseconds).
type playoutClock struct {
	clock *media.Clock
	now   func() time.Duration

	mu    sync.Mutex
	rx    []*audioReceiver
	unreg func() // takes the clock off the media clock; nil while it has no receivers

	tickMu sync.Mutex       // one tick at a time (the media clock's, or a test's)
	due    []*audioReceiver // tick's scratch: the receivers registered at this tick
}

func newPlayoutClock() *playoutClock {
	return &playoutClock{clock: media.SharedClock(), now: monoNow}
}

// add registers r until remove is called (remove is idempotent).
func (c *playoutClock) add(r *audioReceiver) (remove func()) {
	c.mu.Lock()
	c.rx = append(c.rx, r)
	if c.unreg == nil {
		c.unreg = c.clock.Add(c)
	}
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.rx = slices.DeleteFunc(c.rx, func(x *audioReceiver) bool { return x == r })
			if len(c.rx) == 0 && c.unreg != nil {
				c.unreg()
				c.unreg = nil
			}
			c.mu.Unlock()
		})
	}
}

// len returns how many receivers are registered.
func (c *playoutClock) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.rx)
}

// Tick is the media clock's tick (media.ClockTicker): every playout's step at the media clock's
// now.
func (c *playoutClock) Tick(time.Time) { c.tick(c.now()) }

// tick steps every receiver's playout at now. The receivers are taken under the lock and served
// after it, so that registering a call never waits for a tick's decoding.
func (c *playoutClock) tick(now time.Duration) {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	c.mu.Lock()
	c.due = append(c.due, c.rx...)
	c.mu.Unlock()
	for i, r := range c.due {
		r.catchUp(now)
		c.due[i] = nil
	}
	c.due = c.due[:0]
}
