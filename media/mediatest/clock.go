package mediatest

import (
	"sync"
	"time"
)

// Clock is a manual clock for timing code under test: time stands still until Advance moves it,
// and timers made with NewTimer fire (a value on their channel) when Advance passes their
// deadline. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*Timer
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires every timer whose deadline is reached.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	var due []*Timer
	for _, t := range c.timers {
		if t.armed && !t.when.After(now) {
			t.armed = false
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		select {
		case t.ch <- now:
		default: // a value is already waiting; like time.Timer, never block
		}
	}
}

// NewTimer returns a timer that fires once the clock reaches Now()+d.
func (c *Clock) NewTimer(d time.Duration) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{c: c, ch: make(chan time.Time, 1), when: c.now.Add(d), armed: d > 0}
	if d <= 0 {
		t.ch <- c.now
	}
	c.timers = append(c.timers, t)
	return t
}

// Armed returns how many timers wait to fire.
func (c *Clock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.armed {
			n++
		}
	}
	return n
}

// Timer is a timer of a Clock. Its methods mirror time.Timer (Go 1.23 semantics: after Stop or
// Reset no stale value is received).
type Timer struct {
	c     *Clock
	ch    chan time.Time
	when  time.Time
	armed bool
}

// C returns the channel on which the timer fires.
func (t *Timer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer; it reports whether it was armed.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	t.drain()
	return was
}

// Reset rearms the timer to fire at Now()+d; it reports whether it was armed.
func (t *Timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	was := t.armed
	t.drain()
	t.when = t.c.now.Add(d)
	t.armed = true
	fire := d <= 0
	if fire {
		t.armed = false
	}
	now := t.c.now
	t.c.mu.Unlock()
	if fire {
		select {
		case t.ch <- now:
		default:
		}
	}
	return was
}

func (t *Timer) drain() {
	select {
	case <-t.ch:
	default:
	}
}
