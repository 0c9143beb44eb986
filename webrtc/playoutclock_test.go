package webrtc

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
)

// newIdleReceiver returns a receiver whose next frame is due at due (plus playoutLate).
func newIdleReceiver(t *testing.T, due time.Duration) *audioReceiver {
	t.Helper()
	r, err := newAudioReceiverClock(CodecPCMU, 0, func(*media.Frame) {}, func() time.Duration { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.due.Store(int64(due + playoutLate))
	return r
}

func TestPlayoutClockNudgesOverdueReceivers(t *testing.T) {
	c := newPlayoutClock()
	early := newIdleReceiver(t, 100*time.Millisecond)
	late := newIdleReceiver(t, 200*time.Millisecond)
	never, err := newAudioReceiver(CodecPCMU, 0, func(*media.Frame) {}) // no packet yet
	if err != nil {
		t.Fatal(err)
	}
	defer never.Close()
	for _, r := range []*audioReceiver{early, late, never} {
		defer c.add(r)()
	}
	for _, tc := range []struct {
		now               time.Duration
		early, late, none bool
	}{
		{now: 105 * time.Millisecond},
		{now: 110 * time.Millisecond, early: true},
		{now: 300 * time.Millisecond, early: true, late: true},
	} {
		c.tick(tc.now)
		if got := len(early.kick) == 1; got != tc.early {
			t.Errorf("at %v: receiver due at 100 ms nudged %v", tc.now, got)
		}
		if got := len(late.kick) == 1; got != tc.late {
			t.Errorf("at %v: receiver due at 200 ms nudged %v", tc.now, got)
		}
		if len(never.kick) != 0 {
			t.Errorf("at %v: a receiver without packets was nudged", tc.now)
		}
	}
}

// The clock ticks while receivers are registered and stops with its context.
func TestPlayoutClockRun(t *testing.T) {
	c := newPlayoutClock()
	c.period = time.Millisecond
	c.now = func() time.Duration { return time.Hour }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx)
	}()
	r := newIdleReceiver(t, 0)
	remove := c.add(r)
	waitFor(t, 5*time.Second, "the clock's nudge", func() bool { return len(r.kick) == 1 })
	remove()
	<-r.kick
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the clock did not stop with its context")
	}
}

func BenchmarkPlayoutClockTick(b *testing.B) {
	c := newPlayoutClock()
	for i := 0; i < 100; i++ {
		r, err := newAudioReceiver(CodecPCMU, 0, func(*media.Frame) {})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		r.due.Store(int64(time.Hour))
		defer c.add(r)()
	}
	b.ReportAllocs()
	for b.Loop() {
		c.tick(time.Minute)
	}
}
