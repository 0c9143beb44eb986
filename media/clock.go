package media

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ClockTicker is what a Clock drives: Tick does the work due at now (send the frames that are
// due). It runs on one of the clock's goroutines; it must not block (encode and write a UDP
// packet, or drop) and must not add or remove tickers.
type ClockTicker interface {
	Tick(now time.Time)
}

// CatchUpSteps bounds the 20 ms steps a StepSchedule runs for one late tick.
const CatchUpSteps = 5

// StepSchedule turns a ClockTicker's ticks into 20 ms steps: a ticker drops ticks when its
// goroutine wakes late, so the steps follow the time rather than the tick count, up to
// CatchUpSteps at once; further behind, the schedule restarts at now (the frames are lost, as a
// jitter buffer would skip them). The zero value starts at the first tick.
type StepSchedule struct{ next time.Time }

// Due returns how many steps are due at now and moves the schedule past them.
func (s *StepSchedule) Due(now time.Time) int {
	if s.next.IsZero() || now.Sub(s.next) > CatchUpSteps*FrameDuration {
		s.next = now
	}
	n := 0
	for n < CatchUpSteps && !now.Before(s.next) {
		n++
		s.next = s.next.Add(FrameDuration)
	}
	return n
}

// ClockOptions configure a Clock.
type ClockOptions struct {
	// Period between ticks. Default FrameDuration (20 ms).
	Period time.Duration
	// Shards is how many goroutines tick, each for its share of the tickers (given out in turn),
	// so that the frames of many calls are sent from every core. Default GOMAXPROCS.
	Shards int
	// Now and NewTicker are the clock's source of time (tests inject a manual ticker); default
	// time.Now and time.NewTicker.
	Now       func() time.Time
	NewTicker func(d time.Duration) ClockSource
}

// ClockSource is the periodic signal a Clock's shard waits on (*time.Ticker through an
// adapter).
type ClockSource interface {
	C() <-chan time.Time
	Stop()
}

// Clock is one media clock shared by every call of the process: instead of a goroutine and a
// timer per call, each waking 50 times a second, a few goroutines (one per shard) wake once per
// period and tick every registered stream in turn. With N calls this is Shards wake-ups per
// 20 ms instead of N, and no goroutine per call.
//
// A shard's goroutine exists only while the shard has tickers: Add starts it, and it ends at the
// first tick after the last ticker was removed, so an idle clock holds no goroutine and no timer
// (it needs no Close). A stream registered with a Clock is ticked at its shard's phase, so a
// frame due at t goes out at the first tick at or after t: up to one period late, the same for
// every frame of a stretch of audio, so the spacing stays 20 ms. The first frame of new audio
// does not wait for a tick (see Pacer).
//
// What it must never do: block a tick on one stream (a ticker that blocks holds up its whole
// shard), or allocate per tick.
type Clock struct {
	period time.Duration
	now    func() time.Time
	newTk  func(time.Duration) ClockSource
	shards []*clockShard
	turn   atomic.Uint32
}

type clockShard struct {
	mu      sync.Mutex
	subs    []ClockTicker
	running bool // the shard's goroutine runs

	due   []ClockTicker // the running tick's copy of subs (shard goroutine only)
	ticks atomic.Uint64
}

// NewClock returns a clock. It starts no goroutine until a ticker is added.
func NewClock(o ClockOptions) *Clock {
	if o.Period <= 0 {
		o.Period = FrameDuration
	}
	if o.Shards <= 0 {
		o.Shards = runtime.GOMAXPROCS(0)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewTicker == nil {
		// On the grid (GridDelay): the shards tick together, and with the other media tickers.
		o.NewTicker = func(d time.Duration) ClockSource { return sysTicker{NewGridTicker(d)} }
	}
	c := &Clock{period: o.Period, now: o.Now, newTk: o.NewTicker}
	for range o.Shards {
		c.shards = append(c.shards, &clockShard{})
	}
	return c
}

var (
	sharedClockOnce sync.Once
	sharedClock     *Clock
)

// SharedClock returns the process's 20 ms media clock (default options), made on first use.
// Like the clock of any Clock, its goroutines exist only while streams are registered.
func SharedClock() *Clock {
	sharedClockOnce.Do(func() { sharedClock = NewClock(ClockOptions{}) })
	return sharedClock
}

type sysTicker struct{ t *time.Ticker }

func (s sysTicker) C() <-chan time.Time { return s.t.C }
func (s sysTicker) Stop()               { s.t.Stop() }

// Add registers t on the next shard in turn until the returned remove is called (remove is
// idempotent; once it returns, t is not ticked again unless a tick had already begun).
func (c *Clock) Add(t ClockTicker) (remove func()) {
	sh := c.shards[int(c.turn.Add(1)-1)%len(c.shards)]
	sh.mu.Lock()
	sh.subs = append(sh.subs, t)
	if !sh.running {
		sh.running = true
		go c.runShard(sh)
	}
	sh.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			sh.mu.Lock()
			if i := slices.Index(sh.subs, t); i >= 0 {
				sh.subs = slices.Delete(sh.subs, i, i+1)
			}
			sh.mu.Unlock()
		})
	}
}

// Len returns how many tickers are registered.
func (c *Clock) Len() int {
	n := 0
	for _, sh := range c.shards {
		sh.mu.Lock()
		n += len(sh.subs)
		sh.mu.Unlock()
	}
	return n
}

// Running returns how many shard goroutines run.
func (c *Clock) Running() int {
	n := 0
	for _, sh := range c.shards {
		sh.mu.Lock()
		if sh.running {
			n++
		}
		sh.mu.Unlock()
	}
	return n
}

// Ticks returns how many ticks the clock's shards have made (all shards together).
func (c *Clock) Ticks() uint64 {
	var n uint64
	for _, sh := range c.shards {
		n += sh.ticks.Load()
	}
	return n
}

// runShard ticks one shard until a tick finds it empty.
func (c *Clock) runShard(sh *clockShard) {
	tk := c.newTk(c.period)
	defer tk.Stop()
	for range tk.C() {
		if !sh.tick(c.now()) {
			return
		}
	}
}

// tick ticks every ticker of the shard and reports whether it has any; with none, the shard's
// goroutine is marked stopped (the caller returns). The tickers are copied under the lock and
// ticked after it, so that adding or removing a call never waits for a tick's work.
func (sh *clockShard) tick(now time.Time) bool {
	sh.mu.Lock()
	if len(sh.subs) == 0 {
		sh.running = false
		sh.mu.Unlock()
		return false
	}
	sh.due = append(sh.due[:0], sh.subs...)
	sh.mu.Unlock()
	for i, t := range sh.due {
		t.Tick(now)
		sh.due[i] = nil
	}
	sh.ticks.Add(1)
	return true
}
