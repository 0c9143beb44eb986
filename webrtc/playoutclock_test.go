package webrtc

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/pion/rtp"
)

// newIdleReceiver returns a receiver that has had one packet, at 0, and whose next frame is due
// at due (plus playoutLate); it counts the frames it delivers.
func newIdleReceiver(t *testing.T, due time.Duration) (*audioReceiver, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	r, err := newAudioReceiverClock(CodecPCMU, 0, func(*media.Frame) { n.Add(1) }, func() time.Duration { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.Push(&rtp.Packet{Header: rtp.Header{Version: 2}, Payload: make([]byte, 160)}, 0)
	r.mu.Lock()
	r.next = due
	r.mu.Unlock()
	r.due.Store(int64(due + playoutLate))
	return r, &n
}

func TestPlayoutClockServesOverdueReceivers(t *testing.T) {
	c := newPlayoutClock()
	early, nEarly := newIdleReceiver(t, 100*time.Millisecond)
	late, nLate := newIdleReceiver(t, 200*time.Millisecond)
	var nNever atomic.Int64
	never, err := newAudioReceiver(CodecPCMU, 0, func(*media.Frame) { nNever.Add(1) }) // no packet yet
	if err != nil {
		t.Fatal(err)
	}
	defer never.Close()
	for _, r := range []*audioReceiver{early, late, never} {
		defer c.add(r)()
	}
	for _, tc := range []struct {
		now         time.Duration
		early, late int64
	}{
		{now: 105 * time.Millisecond},
		{now: 110 * time.Millisecond, early: 1},
		{now: 130 * time.Millisecond, early: 2},
		// Far behind (the clock was held up): one frame each now, not a burst.
		{now: 300 * time.Millisecond, early: 3, late: 1},
	} {
		c.tick(tc.now)
		if got := nEarly.Load(); got != tc.early {
			t.Errorf("at %v: receiver due at 100 ms has %d frames, want %d", tc.now, got, tc.early)
		}
		if got := nLate.Load(); got != tc.late {
			t.Errorf("at %v: receiver due at 200 ms has %d frames, want %d", tc.now, got, tc.late)
		}
		if nNever.Load() != 0 {
			t.Errorf("at %v: a receiver without packets got a frame", tc.now)
		}
	}
}

// The clock is a stream of the media clock while receivers are registered, and only then: its
// ticks produce the overdue frames.
func TestPlayoutClockOnMediaClock(t *testing.T) {
	c := newPlayoutClock()
	c.clock = media.NewClock(media.ClockOptions{Period: time.Millisecond})
	c.now = func() time.Duration { return time.Second }
	r, n := newIdleReceiver(t, 0)
	r2, _ := newIdleReceiver(t, time.Hour)
	remove := c.add(r)
	remove2 := c.add(r2)
	if got := c.clock.Len(); got != 1 {
		t.Fatalf("%d streams on the media clock with two receivers, want 1", got)
	}
	waitFor(t, 5*time.Second, "the clock's frame", func() bool { return n.Load() >= 1 })
	remove()
	if got := c.clock.Len(); got != 1 {
		t.Fatalf("%d streams on the media clock with one receiver left, want 1", got)
	}
	remove2()
	remove2()
	if got := c.clock.Len(); got != 0 {
		t.Fatalf("%d streams on the media clock without receivers", got)
	}
	remove3 := c.add(r2)
	defer remove3()
	if got := c.clock.Len(); got != 1 {
		t.Fatalf("%d streams on the media clock after a new receiver, want 1", got)
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
