package mediatest

import (
	"testing"
	"time"
)

func TestClockTimers(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewClock(start)
	tm := c.NewTimer(20 * time.Millisecond)
	fired := func() bool {
		select {
		case <-tm.C():
			return true
		default:
			return false
		}
	}
	c.Advance(19 * time.Millisecond)
	if fired() {
		t.Fatal("fired early")
	}
	c.Advance(time.Millisecond)
	if !fired() {
		t.Fatal("did not fire at its deadline")
	}
	if c.Armed() != 0 {
		t.Fatal("fired timer still armed")
	}
	if tm.Reset(10*time.Millisecond) || !tm.Stop() {
		t.Fatal("Reset/Stop report the wrong armed state")
	}
	c.Advance(time.Second)
	if fired() {
		t.Fatal("stopped timer fired")
	}
	tm.Reset(0)
	if !fired() {
		t.Fatal("Reset(0) should fire at once")
	}
	if got := c.Now().Sub(start); got != time.Second+20*time.Millisecond {
		t.Fatalf("clock reads %v after start", got)
	}
}
